'use strict'

// An htpasswd file, as Apache's `htpasswd` writes it: "user:hash" lines, "#" comments.
// The hashes lila checks: bcrypt ($2y$, $2b$, $2a$: htpasswd -B), MD5-crypt ($apr1$:
// -m, its default), SHA-crypt ($5$, $6$: -2, -5) and {SHA} (-s). crypt(3)'s DES (-d)
// and plain text (-p) are refused: anyone who reads the file has the passwords.
//
//   parsePasswords(text, file) -> PasswordFile, or a UsageError naming the file and line
//   passwords.has(user)
//   passwords.verify(user, password) -> a Promise of true or false
//
// A hash of many rounds (bcrypt's 2^cost key setups, SHA-crypt's thousands of digests)
// is computed in slices of about SLICE_MS, each in its own turn of the event loop, so
// that checking one password never holds every other client up. The result is
// compared in constant time; a user not in the file costs a check all the same (of the
// file's first hash), so that timing does not tell who is in it.

const crypto = require('crypto')
const { setImmediate } = require('timers')
const { performance } = require('perf_hooks')
const { UsageError } = require('../../errors')
const { parseBcrypt, bcryptWork } = require('./bcrypt')
const { parseApr1, apr1Work } = require('./apr1')
const { parseShaCrypt, shaCryptWork } = require('./sha-crypt')

const SLICE_MS = 2

// { name, parse(text) -> parsed | null, work(parsed, password) } in the order tried.
const SCHEMES = [
  { name: 'bcrypt', parse: parseBcrypt, work: bcryptWork },
  { name: 'apr1', parse: parseApr1, work: apr1Work },
  { name: 'sha-crypt', parse: parseShaCrypt, work: shaCryptWork },
  { name: 'sha1', parse: parseSha1, work: sha1Work }
]

const EXPECTED = 'expected user:hash with a hash of htpasswd -B (bcrypt), -m ($apr1$), -2 or -5 ($5$, $6$) ' +
  'or -s ({SHA})'

// {SHA}: base64 of SHA-1, no salt (htpasswd -s).
function parseSha1 (text) {
  if (!text.startsWith('{SHA}')) return null
  const expected = Buffer.from(text.slice(5), 'base64')
  return expected.length === 20 && expected.toString('base64') === text.slice(5) ? { expected } : null
}

function sha1Work (parsed, password) {
  return { rounds: 0, round () {}, result: () => crypto.createHash('sha1').update(password, 'utf8').digest() }
}

class PasswordFile {
  // users: Map of name -> { scheme, parsed }
  constructor (users) {
    this.users = users
    this.decoy = users.size === 0 ? null : users.values().next().value
  }

  get size () {
    return this.users.size
  }

  has (user) {
    return this.users.has(user)
  }

  async verify (user, password) {
    const entry = this.users.get(user)
    if (entry === undefined) {
      if (this.decoy !== null) await compute(this.decoy, password)
      return false
    }
    const result = await compute(entry, password)
    return result.length === entry.parsed.expected.length && crypto.timingSafeEqual(result, entry.parsed.expected)
  }
}

// The hash of `password` with an entry's salt and settings, in slices.
function compute ({ scheme, parsed }, password) {
  const work = scheme.work(parsed, password)
  let left = work.rounds
  return new Promise(resolve => {
    const slice = () => {
      const until = performance.now() + SLICE_MS
      while (left > 0) {
        work.round()
        left--
        if (performance.now() >= until) break
      }
      if (left > 0) return setImmediate(slice)
      resolve(work.result())
    }
    slice()
  })
}

function parsePasswords (text, file) {
  const users = new Map()
  const lines = text.split(/\r?\n/)
  lines.forEach((raw, i) => {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) return
    const fail = message => new UsageError(`${file}: line ${i + 1}: ${message}`)
    const colon = line.indexOf(':')
    if (colon <= 0) throw fail(`no "user:" at the start: ${EXPECTED}`)
    const user = line.slice(0, colon)
    const hash = line.slice(colon + 1)
    if (users.has(user)) throw fail(`user ${JSON.stringify(user)} appears twice: expected each user once`)
    for (const scheme of SCHEMES) {
      const parsed = scheme.parse(hash)
      if (parsed !== null) {
        users.set(user, { scheme, parsed })
        return
      }
    }
    const what = hash.startsWith('$') || hash.startsWith('{') ? 'a hash lila does not read' : 'no hash it reads'
    throw fail(`user ${JSON.stringify(user)} has ${what} (crypt and plain text are refused): ${EXPECTED}`)
  })
  if (users.size === 0) throw new UsageError(`${file}: no user in it: ${EXPECTED}, e.g. htpasswd -B ${file} alice`)
  return new PasswordFile(users)
}

module.exports = { parsePasswords }
