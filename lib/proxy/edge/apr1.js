'use strict'

// Apache's "$apr1$" password hash (`htpasswd -m`, its default): Poul-Henning Kamp's
// MD5-crypt with Apache's magic word, a thousand rounds of MD5 over the password and a
// salt of up to 8 characters. Pure.
//
//   parseApr1(text)             -> { salt, expected } (the 22 characters of the hash, as
//                                  bytes) or null
//   apr1Work(parsed, password)  -> the hash as work done in rounds (passwords.js):
//                                  { rounds, round(), result() -> the 22 characters as bytes }

const crypto = require('crypto')
const { to64 } = require('./crypt64')

const APR1 = /^\$apr1\$([^$]{0,8})\$([./0-9A-Za-z]{22})$/
const MAGIC = Buffer.from('$apr1$')
const ROUNDS = 1000
// The digest's bytes in the order crypt writes them, three at a time.
const ORDER = [[0, 6, 12], [1, 7, 13], [2, 8, 14], [3, 9, 15], [4, 10, 5]]

function parseApr1 (text) {
  const match = APR1.exec(text)
  return match === null ? null : { salt: Buffer.from(match[1], 'utf8'), expected: Buffer.from(match[2], 'latin1') }
}

function apr1Work ({ salt }, password) {
  const pw = Buffer.from(password, 'utf8')
  let final = crypto.createHash('md5').update(pw).update(salt).update(pw).digest()
  const ctx = crypto.createHash('md5').update(pw).update(MAGIC).update(salt)
  for (let left = pw.length; left > 0; left -= 16) ctx.update(final.subarray(0, Math.min(16, left)))
  // The bits of the length: a zero byte for each 1, the password's first byte (C's
  // string, so a zero when it is empty) for each 0.
  const zero = Buffer.alloc(1)
  const first = pw.length > 0 ? pw.subarray(0, 1) : zero
  for (let i = pw.length; i > 0; i >>= 1) ctx.update((i & 1) ? zero : first)
  final = ctx.digest()
  let i = 0
  return {
    rounds: ROUNDS,
    round () {
      const h = crypto.createHash('md5')
      h.update((i & 1) ? pw : final)
      if (i % 3) h.update(salt)
      if (i % 7) h.update(pw)
      h.update((i & 1) ? final : pw)
      final = h.digest()
      i++
    },
    result () {
      let out = ''
      for (const [a, b, c] of ORDER) out += to64((final[a] << 16) | (final[b] << 8) | final[c], 4)
      return Buffer.from(out + to64(final[11], 2), 'latin1')
    }
  }
}

module.exports = { parseApr1, apr1Work }
