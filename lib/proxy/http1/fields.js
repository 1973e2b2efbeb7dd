'use strict'

// The header lines of an HTTP/1.1 head (parse.js), checked and read in place: the fields
// as lila's head form holds them, and the facts of framing and connection found among
// them. Strict, as parse.js says why: a bare CR or LF, obs-fold, a name that is no token,
// a control byte in a value, a repeated or malformed Content-Length are refused.

const { HttpError } = require('../../errors')
const { TOKEN, BAD_VALUE, trimOws, MAX_HEADERS } = require('../message/grammar')

// What parseFields found beside the fields, read out by the head's parser: one object
// for every head, as a head is parsed at once (a parse allocates no record of its own).
const FACTS = {
  contentLength: -1,
  transferEncoding: null,
  connection: '',
  upgrade: null,
  host: null,
  hosts: 0,
  expect: null,
  keepAliveHint: null,
  contentType: null,
  grpcTimeout: null
}

// The lower-case names of the fields most heads hold, so that those are not made
// again per head (the name as sent is still kept as sent).
const LOWER = new Map()
for (const name of ['Host', 'User-Agent', 'Accept', 'Accept-Encoding', 'Accept-Language', 'Connection',
  'Keep-Alive', 'Content-Length', 'Content-Type', 'Date', 'Server', 'Transfer-Encoding', 'Cache-Control',
  'Cookie', 'Set-Cookie', 'Referer', 'Origin', 'Authorization', 'Upgrade', 'Expect', 'Last-Modified', 'ETag',
  'Etag', 'Location', 'Vary', 'Pragma', 'If-None-Match', 'If-Modified-Since', 'X-Forwarded-For',
  'X-Forwarded-Proto', 'X-Forwarded-Host', 'X-Request-Id', 'Via', 'Forwarded', 'Accept-Ranges', 'Expires']) {
  LOWER.set(name, name.toLowerCase())
}
// Already lower case: the name itself.
for (const name of [...LOWER.values()]) LOWER.set(name, name)
// Those names again, by their length and first character (KNOWN[length * 128 + code]),
// so that a head's known names are found in its text and not sliced out of it per field.
const KNOWN = []
for (const name of LOWER.keys()) {
  const key = name.length * 128 + name.charCodeAt(0)
  if (KNOWN[key] === undefined) KNOWN[key] = []
  KNOWN[key].push(name)
}

// The last value seen of the fields whose value most often repeats from head to head
// (a client's Host and User-Agent, a backend's Date, Server, Connection), so that the
// same value is not sliced out again: one per name for the whole process. Never a
// credential's (Cookie, Authorization). A kept value may hold the head it was sliced
// from (at most MAX_HEAD bytes, one head per name) until another value replaces it.
const LAST = new Map()
for (const lower of ['host', 'user-agent', 'accept', 'accept-encoding', 'accept-language', 'connection',
  'keep-alive', 'content-type', 'date', 'server', 'cache-control', 'origin', 'vary', 'pragma',
  'accept-ranges', 'x-forwarded-proto', 'via']) {
  LAST.set(lower, '')
}

// text[from, to), the last value of `lower` if it is that again (then kept), or sliced.
function valueOf (text, from, to, lower) {
  const last = LAST.get(lower)
  if (last === undefined) return text.slice(from, to)
  if (last.length === to - from && text.startsWith(last, from)) return last
  const value = text.slice(from, to)
  LAST.set(lower, value)
  return value
}

// The known name text[start, colon) is, as sent, or null.
function knownName (text, start, colon) {
  const candidates = KNOWN[(colon - start) * 128 + (text.charCodeAt(start) & 127)]
  if (candidates === undefined) return null
  for (let i = 0; i < candidates.length; i++) {
    if (text.startsWith(candidates[i], start)) return candidates[i]
  }
  return null
}

// The header lines of a head's text, from `from` (just past the first line's CRLF) to
// its end (the blank line already cut off) -> fields, and the framing facts in FACTS.
// `fields` is flat, three entries per field: the name as sent, the name in lower case,
// the value (one array per head, sized once, none per field; `into`'s, written over,
// when a caller gives the array of a head it is done with). `count`: the lines (from
// checkLines). `controls`: the head holds a control byte other than CR and LF somewhere,
// so each value is checked for one; most heads hold none, and skip the check.
function parseFields (text, from, count, controls = true, into = null) {
  if (count > MAX_HEADERS) throw new HttpError(431, 'too many header fields')
  const fields = into === null ? new Array(count * 3) : sized(into, count * 3)
  const f = FACTS
  f.contentLength = -1
  f.transferEncoding = null
  let connection = ''
  f.upgrade = null
  f.host = null
  f.hosts = 0
  f.expect = null
  f.keepAliveHint = null
  f.contentType = null
  f.grpcTimeout = null
  let at = 0
  for (let start = from; at < fields.length; at += 3) {
    const lf = text.indexOf('\n', start)
    const end = lf === -1 ? text.length : lf - 1 // the line, its CRLF left out
    const colon = text.indexOf(':', start)
    if (colon <= start || colon > end) {
      const first = text.charCodeAt(start)
      const folded = first === 32 || first === 9
      throw new HttpError(400, folded ? 'obsolete line folding in a header' : 'header line without a name and colon')
    }
    let name = knownName(text, start, colon)
    const known = name !== null
    let lower
    if (known) {
      lower = LOWER.get(name)
    } else {
      name = text.slice(start, colon)
      if (!TOKEN.test(name)) throw new HttpError(400, `invalid header name ${JSON.stringify(name)}`)
      lower = name.toLowerCase()
    }
    let valueStart = colon + 1 // the value, OWS around it left out
    let valueEnd = end
    while (valueStart < valueEnd && isOws(text.charCodeAt(valueStart))) valueStart++
    while (valueEnd > valueStart && isOws(text.charCodeAt(valueEnd - 1))) valueEnd--
    const value = known ? valueOf(text, valueStart, valueEnd, lower) : text.slice(valueStart, valueEnd)
    if (controls && BAD_VALUE.test(value)) throw new HttpError(400, `control character in header ${name}`)
    fields[at] = name
    fields[at + 1] = lower
    fields[at + 2] = value
    switch (lower) {
      case 'host':
        f.host = value
        f.hosts++
        break
      case 'expect':
        f.expect = value.toLowerCase()
        break
      case 'upgrade':
        f.upgrade = value
        break
      case 'connection':
        connection = connection ? `${connection},${value}` : value
        break
      case 'keep-alive':
        f.keepAliveHint = value
        break
      case 'content-type':
        f.contentType = value
        break
      case 'grpc-timeout':
        f.grpcTimeout = value
        break
      case 'content-length': {
        // A repeated Content-Length is refused even when the values agree (RFC 9112
        // allows merging them; strict parsers such as Node's and nginx's do not).
        if (f.contentLength !== -1) throw new HttpError(400, 'more than one Content-Length header')
        const tab = text.indexOf('\t', start)
        if (tab !== -1 && tab < end) throw new HttpError(400, 'tab in Content-Length')
        if (!/^\d{1,15}$/.test(value)) throw new HttpError(400, `invalid Content-Length ${JSON.stringify(value)}`)
        f.contentLength = Number(value)
        break
      }
      case 'transfer-encoding':
        // A tab around the coding is OWS (RFC 9110 5.6.3), trimmed like a space: safe,
        // since lila writes its own framing on, never this field as it came.
        f.transferEncoding = f.transferEncoding === null ? value : `${f.transferEncoding}, ${value}`
        break
    }
    start = lf + 1
  }
  f.connection = connection
  return fields
}

// `array` with `length` entries (set in place: shorter, V8 keeps its store unless it
// would be under half used).
function sized (array, length) {
  if (array.length !== length) array.length = length
  return array
}

// The tokens most Connection fields hold alone, shared (a head's `connection` is read,
// never changed).
const KEEP_ALIVE = Object.freeze(['keep-alive'])
const CLOSE = Object.freeze(['close'])
const NO_TOKENS = Object.freeze([])

// "Keep-Alive, Upgrade" -> ['keep-alive', 'upgrade'] (null for no Connection field).
function connectionTokens (value) {
  if (value === '') return null
  // As most send them: no lower-case copy (toLowerCase makes one even when unchanged).
  if (value === 'keep-alive') return KEEP_ALIVE
  if (value === 'close') return CLOSE
  const lower = value.toLowerCase()
  if (lower.indexOf(',') === -1) { // most often one token: "keep-alive", "close"
    const token = trimOws(lower, 0)
    return token === 'keep-alive' ? KEEP_ALIVE : token === 'close' ? CLOSE : token === '' ? NO_TOKENS : [token]
  }
  const tokens = []
  for (const part of lower.split(',')) {
    const token = trimOws(part, 0)
    if (token !== '') tokens.push(token)
  }
  return tokens
}

// A head's lines are checked whole: each LF follows a CR, and no other CR is there.
// Returns the number of header lines (those after the first).
function checkLines (text) {
  let lfs = 0
  for (let lf = text.indexOf('\n'); lf !== -1; lf = text.indexOf('\n', lf + 1)) {
    if (lf === 0 || text.charCodeAt(lf - 1) !== 13) throw new HttpError(400, 'bare CR or LF in the message head')
    lfs++
  }
  let crs = 0
  for (let cr = text.indexOf('\r'); cr !== -1; cr = text.indexOf('\r', cr + 1)) crs++
  if (crs !== lfs) throw new HttpError(400, 'bare CR or LF in the message head')
  return lfs
}

function isOws (code) {
  return code === 32 || code === 9
}

module.exports = { FACTS, parseFields, connectionTokens, checkLines }
