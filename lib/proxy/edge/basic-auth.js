'use strict'

// --basic-auth FILE: HTTP Basic authentication (RFC 7617) against an htpasswd file
// (passwords.js). Pure but for the clock the password checks take turns on.
//
//   const auth = new BasicAuth(passwords, { realm })
//   auth.check(authorization) -> 'ok', 'missing' (no Basic credentials), 'bad' (wrong
//                                ones), or a Promise of 'ok', 'bad' or 'busy' (too many
//                                checks under way: try again soon)
//   auth.challenge             the WWW-Authenticate value of a 401
//
// A password is checked once: credentials found good (or bad) are remembered by an
// HMAC of them under a key made at random for this object, never in clear, so that
// bcrypt's cost is not paid per request, and a client repeating wrong ones costs a
// lookup. Both memories are bounded (the oldest goes first); a reload, which reads the
// file again, starts them afresh.

const crypto = require('crypto')

const REMEMBERED = 1024 // credentials kept, good and bad each
const CHECKING = 16 // password checks under way at once, at most

class BasicAuth {
  constructor (passwords, { realm }) {
    this.passwords = passwords
    this.challenge = `Basic realm="${realm}", charset="UTF-8"`
    this.key = crypto.randomBytes(32)
    this.good = new Map() // HMAC of the credentials -> the user
    this.bad = new Set()
    this.checking = 0
  }

  check (authorization) {
    const token = credentialsOf(authorization)
    if (token === null) return 'missing'
    const mac = crypto.createHmac('sha256', this.key).update(token).digest('base64')
    if (this.good.has(mac)) return 'ok'
    if (this.bad.has(mac)) return 'bad'
    const decoded = Buffer.from(token, 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    if (colon === -1) return this.remember(this.bad, mac, 'bad')
    if (this.checking >= CHECKING) return Promise.resolve('busy')
    this.checking++
    const user = decoded.slice(0, colon)
    return this.passwords.verify(user, decoded.slice(colon + 1)).then(ok => {
      this.checking--
      return ok ? this.remember(this.good, mac, 'ok', user) : this.remember(this.bad, mac, 'bad')
    })
  }

  // Keep `mac` in `memory` (a Map or a Set), the oldest out when full.
  remember (memory, mac, verdict, user) {
    if (memory.size >= REMEMBERED) memory.delete(memory.keys().next().value)
    if (memory instanceof Map) memory.set(mac, user)
    else memory.add(mac)
    return verdict
  }
}

// "Basic dXNlcjpwYXNz" -> "dXNlcjpwYXNz" (the scheme in any case, RFC 7235), or null.
function credentialsOf (authorization) {
  if (typeof authorization !== 'string' || authorization.length < 7) return null
  if (authorization.slice(0, 6).toLowerCase() !== 'basic ') return null
  const token = authorization.slice(6).trim()
  return /^[A-Za-z0-9+/]+={0,2}$/.test(token) ? token : null
}

module.exports = { BasicAuth, credentialsOf, REMEMBERED, CHECKING }
