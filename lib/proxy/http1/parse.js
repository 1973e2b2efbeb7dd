'use strict'

// Strict HTTP/1.1 message heads (RFC 9112), parsed from raw bytes. lila forwards bodies
// as bytes, so it only needs the head: what the message is and how its body is framed.
// Anything ambiguous is refused rather than guessed at, because a proxy that reads
// framing differently from the server behind it is how requests get smuggled:
// bare LF or CR, obs-fold, whitespace before a colon, control bytes in values, both
// Content-Length and Transfer-Encoding, a repeated Content-Length, any transfer coding
// but a lone "chunked".
//
// A parse returns a head object, or throws an HttpError carrying the status to answer.

const { HttpError } = require('../../errors')
const { TOKEN, MAX_TARGET } = require('../message/grammar')
const { FACTS, parseFields, connectionTokens, checkLines } = require('./fields')

const { STATUS_CODES } = require('http')
// A reason phrase (RFC 9112 4): tabs, spaces, visible ASCII and obs-text.
const REASON = /^[\t -~\x80-\xff]*$/

// The same control bytes less CR and LF, for a whole head at once: its line endings are
// checked on their own (checkLines).
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const CONTROL_BUT_CRLF = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/

const HEAD_END = Buffer.from('\r\n\r\n')

// Where the head that starts at `start` ends (the index just past CRLFCRLF), or -1 if
// it has not all arrived. `from` lets a caller resume the search in a growing buffer.
function findHeadEnd (buf, start, from = start) {
  const i = buf.indexOf(HEAD_END, Math.max(start, from - 3))
  return i === -1 ? -1 : i + 4
}

// A head's text, the blank line that ends it left out (latin1Slice: Buffer#toString
// ('latin1', ...) without its argument checks).
function headText (buf, start, end) {
  return buf.latin1Slice(start, end - 4)
}

// Does buf, from `from` on, hold a LF without a CR right before it? A head that will
// never end in CRLFCRLF. (The CR may sit just before `from`: heads arrive in pieces.)
function hasBareLf (buf, from) {
  for (let i = buf.indexOf(10, from); i !== -1; i = buf.indexOf(10, i + 1)) {
    if (i === 0 || buf[i - 1] !== 13) return true
  }
  return false
}

// The methods most requests use, so that those are not made again per request.
const METHODS = ['GET', 'POST', 'PUT', 'HEAD', 'DELETE', 'OPTIONS', 'PATCH', 'CONNECT', 'TRACE']
// A request-target: visible ASCII.
const TARGET = /^[!-~]+$/

// The request line's method, text[0, length), or null when it is no token.
function methodOf (text, length) {
  for (let i = 0; i < METHODS.length; i++) {
    const method = METHODS[i]
    if (method.length === length && text.startsWith(method)) return method
  }
  const method = text.slice(0, length)
  return length > 0 && TOKEN.test(method) ? method : null
}

// A request head in buf[start, end) (end from findHeadEnd). The request line is
// method SP request-target SP HTTP/d.d, each part as RFC 9112 3 says, nothing around.
// `into`: a head this returned before, parsed into again (its object and its fields'
// array) when its readers are done with it, or null for a new one.
function parseRequestHead (buf, start, end, into = null) {
  const text = headText(buf, start, end)
  const count = checkLines(text)
  const lf = text.indexOf('\n')
  const lineEnd = lf === -1 ? text.length : lf - 1
  if (lineEnd > MAX_TARGET + 32) throw new HttpError(414, 'request target too long')
  const space = text.indexOf(' ')
  const second = space === -1 ? -1 : text.indexOf(' ', space + 1)
  const method = space === -1 || space > lineEnd ? null : methodOf(text, space)
  if (method === null || second === -1 || lineEnd - second !== 9 || !text.startsWith(' HTTP/', second) ||
    text.charCodeAt(lineEnd - 2) !== 46 || !isDigit(text.charCodeAt(lineEnd - 3)) ||
    !isDigit(text.charCodeAt(lineEnd - 1))) {
    throw new HttpError(400, 'malformed request line')
  }
  const target = text.slice(space + 1, second)
  if (!TARGET.test(target)) throw new HttpError(400, 'malformed request line')
  const major = text.charCodeAt(lineEnd - 3) - 48
  const minor = text.charCodeAt(lineEnd - 1) - 48
  if (major !== 1 || minor > 1) throw new HttpError(505, `HTTP/${major}.${minor} is not supported`)
  if (target.length > MAX_TARGET) throw new HttpError(414, 'request target too long')
  if (method === 'CONNECT') throw new HttpError(405, 'CONNECT is not supported by a reverse proxy')
  const controls = CONTROL_BUT_CRLF.test(text)
  const fields = parseFields(text, lineEnd + 2, count, controls, into === null ? null : into.fields)
  const f = FACTS
  const version = minor
  const path = requestPath(method, target)
  // RFC 9112 3.2.2: with an absolute-form target, its authority is the host; a Host
  // field that says otherwise is replaced (rewrite.js), never passed on beside it.
  const authority = target.charCodeAt(0) === 47 || target === '*' ? null : authorityOf(target)
  if (version === 1 && f.hosts !== 1) {
    throw new HttpError(400, f.hosts === 0 ? 'missing Host header' : 'more than one Host header')
  }
  if (f.hosts > 1) throw new HttpError(400, 'more than one Host header')

  // Body framing (RFC 9112 section 6): chunked, a length, or none.
  let chunked = false
  if (f.transferEncoding !== null) {
    if (version === 0) throw new HttpError(400, 'Transfer-Encoding in an HTTP/1.0 request')
    if (f.contentLength !== -1) throw new HttpError(400, 'both Content-Length and Transfer-Encoding')
    if (f.transferEncoding.toLowerCase() !== 'chunked') {
      throw new HttpError(400, `unsupported Transfer-Encoding ${JSON.stringify(f.transferEncoding)}`)
    }
    chunked = true
  }
  const connection = connectionTokens(f.connection)
  // h2c is not passed on: a client speaking HTTP/2 straight to a backend would be out
  // of lila's sight ("h2c smuggling"). Without the upgrade, Upgrade is just hop-by-hop.
  const asksUpgrade = f.upgrade !== null && hasToken(connection, 'upgrade')
  const host = authority !== null ? authority : f.host
  const head = withFacts(into === null ? requestHead() : into, fields, connection, host)
  head.method = method
  head.target = target
  head.version = version
  head.path = path
  head.authority = authority
  head.chunked = chunked
  head.bodyLength = chunked ? -1 : Math.max(f.contentLength, 0)
  head.keepAlive = keepAliveOf(version, connection)
  head.asksUpgrade = asksUpgrade
  head.isUpgrade = asksUpgrade && !/^\s*h2c\s*$/i.test(f.upgrade)
  return head
}

// What both kinds of head hold of parseFields' FACTS, as a form starts.
const FACTS_FORM = Object.freeze({
  fields: null,
  contentLength: -1,
  transferEncoding: null,
  connection: null,
  upgrade: null,
  host: null,
  hosts: 0,
  expect: null,
  keepAliveHint: null,
  contentType: null, // gRPC calls are known by it (message/grpc.js callType)
  grpcTimeout: null
})

// A head's FACTS_FORM part, from parseFields' FACTS: `fields`, its Connection tokens,
// and `host` (a request's authority when its target has one).
function withFacts (head, fields, connection, host) {
  const f = FACTS
  head.fields = fields
  head.contentLength = f.contentLength
  head.transferEncoding = f.transferEncoding
  head.connection = connection
  head.upgrade = f.upgrade
  head.host = host
  head.hosts = f.hosts
  head.expect = f.expect
  head.keepAliveHint = f.keepAliveHint
  head.contentType = f.contentType
  head.grpcTimeout = f.grpcTimeout
  return head
}

// A request head's form, every field there from the start (one shape for all).
function requestHead () {
  return {
    ...FACTS_FORM,
    method: '',
    target: '',
    version: 1,
    path: '',
    authority: null,
    chunked: false,
    bodyLength: 0,
    keepAlive: false,
    asksUpgrade: false,
    isUpgrade: false
  }
}

function isDigit (code) {
  return code >= 48 && code <= 57
}

// "http://host:port/path" -> "host:port". User information (user@host) has no place in
// an http(s) URI (RFC 9110 4.2.4) and is refused.
function authorityOf (target) {
  const from = target.indexOf('//') + 2
  let to = from
  while (to < target.length && target[to] !== '/' && target[to] !== '?' && target[to] !== '#') to++
  const authority = target.slice(from, to)
  if (authority.includes('@')) throw new HttpError(400, 'user information in the request target')
  return authority
}

// The path (no query) of a request target in origin, absolute or asterisk form.
function requestPath (method, target) {
  let path = target
  if (target.charCodeAt(0) !== 47) { // not "/"
    if (target === '*') {
      if (method !== 'OPTIONS') throw new HttpError(400, 'asterisk-form target outside OPTIONS')
      return '*'
    }
    const absolute = /^https?:\/\/[^/?#]+(.*)$/i.exec(target)
    if (absolute === null) throw new HttpError(400, 'request target in an unknown form')
    path = absolute[1] || '/'
  }
  const query = path.indexOf('?')
  return query === -1 ? path : path.slice(0, query)
}

// A response head in buf[start, end). `method` is the request's, because a response to
// HEAD has no body whatever its headers say. The status line is HTTP/1.x SP 3DIGIT,
// then SP and a reason phrase of visible bytes, spaces and tabs, or nothing. `into`: a
// head this returned before, parsed into again (its object and its fields' array)
// when its reader is done with it, or null for a new one.
function parseResponseHead (buf, start, end, method, into = null) {
  const text = headText(buf, start, end)
  const count = checkLines(text)
  const lf = text.indexOf('\n')
  const lineEnd = lf === -1 ? text.length : lf - 1
  const minor = text.charCodeAt(7) - 48
  const hundreds = text.charCodeAt(9) - 48
  if (!text.startsWith('HTTP/1.') || (minor !== 0 && minor !== 1) || text.charCodeAt(8) !== 32 ||
    hundreds < 1 || hundreds > 9 || !isDigit(text.charCodeAt(10)) || !isDigit(text.charCodeAt(11)) ||
    (lineEnd !== 12 && (lineEnd < 12 || text.charCodeAt(12) !== 32))) {
    throw new HttpError(502, 'malformed status line from the backend')
  }
  const status = hundreds * 100 + (text.charCodeAt(10) - 48) * 10 + text.charCodeAt(11) - 48
  const reason = reasonAt(text, status, lineEnd)
  const controls = CONTROL_BUT_CRLF.test(text)
  const fields = parseFields(text, lineEnd + 2, count, controls, into === null ? null : into.fields)
  const f = FACTS
  // Framing: none, chunked, a length, or until the backend closes.
  let chunked = false
  let bodyLength = -1 // -1 with chunked false: read until close
  if (status < 200 || status === 204 || status === 304 || method === 'HEAD') {
    bodyLength = 0
  } else if (f.transferEncoding !== null) {
    // Only a lone "chunked" is framing lila can follow; anything else would leave lila
    // and the client disagreeing about where the response ends.
    if (f.transferEncoding.toLowerCase() !== 'chunked') {
      const coding = JSON.stringify(f.transferEncoding)
      throw new HttpError(502, `unsupported Transfer-Encoding ${coding} from the backend`)
    }
    if (f.contentLength !== -1) {
      throw new HttpError(502, 'both Content-Length and Transfer-Encoding from the backend')
    }
    chunked = true
  } else if (f.contentLength !== -1) {
    bodyLength = f.contentLength
  }
  const connection = connectionTokens(f.connection)
  const res = withFacts(into === null ? responseHead() : into, fields, connection, f.host)
  res.version = minor
  res.status = status
  res.reason = reason
  res.chunked = chunked
  res.bodyLength = bodyLength
  res.keepAlive = keepAliveOf(minor, connection)
  return res
}

// A response head's form, every field there from the start (one shape for all).
function responseHead () {
  return {
    ...FACTS_FORM,
    version: 1,
    status: 0,
    reason: '',
    chunked: false,
    bodyLength: 0,
    keepAlive: false
  }
}

// The reason phrase after a status line's code ('' for none): the status's usual one
// when it is that, as most are, so that it is not made again per response.
function reasonAt (text, status, lineEnd) {
  if (lineEnd <= 13) return ''
  const usual = STATUS_CODES[status]
  if (usual !== undefined && usual.length === lineEnd - 13 && text.startsWith(usual, 13)) return usual
  const reason = text.slice(13, lineEnd)
  if (!REASON.test(reason)) throw new HttpError(502, 'malformed status line from the backend')
  return reason
}

// HTTP/1.1 stays open unless told to close; HTTP/1.0 closes unless told otherwise.
function keepAliveOf (version, connection) {
  return version === 1
    ? !hasToken(connection, 'close')
    : hasToken(connection, 'keep-alive')
}

function hasToken (tokens, token) {
  return tokens !== null && tokens.includes(token)
}

// "timeout=5, max=100" -> { timeout: 5000, max: 100 } (ms; -1 when absent). A backend
// says the same on every response: the last value's answer is kept (read, never changed).
let lastHint = null
let lastKeepAlive = Object.freeze({ timeout: -1, max: -1 })
function parseKeepAlive (value) {
  if (value === lastHint) return lastKeepAlive
  const out = { timeout: -1, max: -1 }
  if (value !== null) {
    const timeout = /(?:^|[,\s])timeout=(\d+)/i.exec(value)
    const max = /(?:^|[,\s])max=(\d+)/i.exec(value)
    if (timeout) out.timeout = Number(timeout[1]) * 1000
    if (max) out.max = Number(max[1])
  }
  lastHint = value
  lastKeepAlive = Object.freeze(out)
  return lastKeepAlive
}

// buf[start, end), without a new view when that is all of it.
function view (buf, start, end) {
  return start === 0 && end === buf.length ? buf : buf.subarray(start, end)
}

module.exports = {
  HttpError,
  view,
  findHeadEnd,
  hasBareLf,
  parseRequestHead,
  parseResponseHead,
  parseKeepAlive
}
