'use strict'

// What lila refuses of an HTTP/2 request its codec found well formed (wire/h2/message.js
// has refused what HTTP/2 itself forbids: pseudo-headers out of place, connection-specific
// fields, TE but "trailers", a content-length its DATA contradicts, upper case, NUL, CR
// and LF): what lila refuses of HTTP/1.1 heads too, since the request may go on in
// HTTP/1.1, and what a reverse proxy does not serve. Pure: a head in lila's form, null
// or [status, detail] for the answer.

const { TOKEN, BAD_VALUE, MAX_HEAD, MAX_TARGET, MAX_HEADERS } = require('../message/grammar')
const VISIBLE = /^[!-~]+$/

function refusalOf (head) {
  const { method, target, authority, fields } = head
  if (method === 'CONNECT') return [405, 'CONNECT is not supported by a reverse proxy']
  if (!TOKEN.test(method)) return [400, 'an invalid :method']
  if (fields.length / 3 > MAX_HEADERS) return [431, 'too many header fields']
  if (head.size > MAX_HEAD) return [431, 'request head too large']
  if (target.length > MAX_TARGET) return [414, 'request target too long']
  if (!VISIBLE.test(target)) return [400, 'invalid :path']
  if (target.charCodeAt(0) !== 47 && !(target === '*' && method === 'OPTIONS')) {
    return [400, 'a :path not in origin form']
  }
  let host = null
  for (let i = 0; i < fields.length; i += 3) {
    const value = fields[i + 2]
    // The codec's decoder saw whether any value holds a control byte (`controls`).
    if (head.controls && BAD_VALUE.test(value)) return [400, `control character in header ${fields[i]}`]
    if (fields[i + 1] === 'host') host = value
  }
  if (head.hosts > 1) return [400, 'more than one Host header']
  if (authority !== null) {
    if (!VISIBLE.test(authority) || authority.includes('@')) return [400, 'invalid :authority']
    // RFC 9113 8.3.1: a Host that names another server than :authority is malformed.
    if (host !== null && host.toLowerCase() !== authority.toLowerCase()) return [400, 'Host and :authority differ']
  } else if (host === null) {
    return [400, 'missing :authority and Host']
  }
  return null
}

// A request's trailers HTTP/1.1 could not carry: why, or null.
function trailersRefused (fields) {
  for (let i = 0; i < fields.length; i += 3) {
    if (BAD_VALUE.test(fields[i + 2])) return `control character in trailer ${fields[i]}`
  }
  return null
}

module.exports = { refusalOf, trailersRefused }
