'use strict'

// SHA-crypt (Ulrich Drepper's "Unix crypt using SHA-256 and SHA-512"), as `htpasswd -2`
// and `-5` write it: "$5$[rounds=N$]salt$hash" and "$6$...". Pure.
//
//   parseShaCrypt(text)             -> { algorithm, rounds, salt, expected } or null
//   shaCryptWork(parsed, password)  -> the hash as work done in rounds (passwords.js)

const crypto = require('crypto')
const { to64 } = require('./crypt64')

const SHA_CRYPT = /^\$([56])\$(?:rounds=(\d{1,9})\$)?([^$]{0,16})\$([./0-9A-Za-z]{43}|[./0-9A-Za-z]{86})$/
const DEFAULT_ROUNDS = 5000
const MIN_ROUNDS = 1000
// The digest's bytes in the order the hash is written, three at a time, then the rest.
const ORDERS = {
  sha256: {
    length: 43,
    groups: [[0, 10, 20], [21, 1, 11], [12, 22, 2], [3, 13, 23], [24, 4, 14], [15, 25, 5], [6, 16, 26],
      [27, 7, 17], [18, 28, 8], [9, 19, 29]],
    tail: d => to64((d[31] << 8) | d[30], 3)
  },
  sha512: {
    length: 86,
    groups: [[0, 21, 42], [22, 43, 1], [44, 2, 23], [3, 24, 45], [25, 46, 4], [47, 5, 26], [6, 27, 48],
      [28, 49, 7], [50, 8, 29], [9, 30, 51], [31, 52, 10], [53, 11, 32], [12, 33, 54], [34, 55, 13],
      [56, 14, 35], [15, 36, 57], [37, 58, 16], [59, 17, 38], [18, 39, 60], [40, 61, 19], [62, 20, 41]],
    tail: d => to64(d[63], 2)
  }
}

function parseShaCrypt (text) {
  const match = SHA_CRYPT.exec(text)
  if (match === null) return null
  const algorithm = match[1] === '5' ? 'sha256' : 'sha512'
  if (match[4].length !== ORDERS[algorithm].length) return null
  // As glibc: a rounds= outside 1000..999999999 is brought within it.
  const rounds = match[2] === undefined ? DEFAULT_ROUNDS : Math.max(MIN_ROUNDS, Number(match[2]))
  return { algorithm, rounds, salt: Buffer.from(match[3], 'utf8'), expected: Buffer.from(match[4], 'latin1') }
}

const hash = (algorithm, ...parts) => {
  const h = crypto.createHash(algorithm)
  for (const part of parts) h.update(part)
  return h.digest()
}

// `source` repeated to `length` bytes.
function stretch (source, length) {
  const out = Buffer.alloc(length)
  for (let at = 0; at < length; at += source.length) source.copy(out, at, 0, Math.min(source.length, length - at))
  return out
}

function shaCryptWork ({ algorithm, rounds, salt }, password) {
  const pw = Buffer.from(password, 'utf8')
  const b = hash(algorithm, pw, salt, pw)
  const a = crypto.createHash(algorithm).update(pw).update(salt).update(stretch(b, pw.length))
  for (let i = pw.length; i > 0; i >>= 1) a.update((i & 1) ? b : pw)
  let c = a.digest()
  const p = stretch(hash(algorithm, ...Array(pw.length).fill(pw)), pw.length)
  const s = stretch(hash(algorithm, ...Array(16 + c[0]).fill(salt)), salt.length)
  let i = 0
  return {
    rounds,
    round () {
      const h = crypto.createHash(algorithm)
      h.update((i & 1) ? p : c)
      if (i % 3) h.update(s)
      if (i % 7) h.update(p)
      h.update((i & 1) ? c : p)
      c = h.digest()
      i++
    },
    result () {
      const { groups, tail } = ORDERS[algorithm]
      let out = ''
      for (const [x, y, z] of groups) out += to64((c[x] << 16) | (c[y] << 8) | c[z], 4)
      return Buffer.from(out + tail(c), 'latin1')
    }
  }
}

module.exports = { parseShaCrypt, shaCryptWork }
