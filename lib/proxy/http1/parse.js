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
const { TOKEN, BAD_VALUE, trimOws, MAX_TARGET, MAX_HEADERS } = require('../message/grammar')

const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([!-~]+) HTTP\/(\d)\.(\d)$/
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: ([\t -~\x80-\xff]*))?$/

// The same control bytes less CR and LF, for a whole head at once: its line endings are
// checked on their own (splitLines).
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const CONTROL_BUT_CRLF = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/

const HEAD_END = Buffer.from('\r\n\r\n')

// Where the head that starts at `start` ends (the index just past CRLFCRLF), or -1 if
// it has not all arrived. `from` lets a caller resume the search in a growing buffer.
function findHeadEnd (buf, start, from = start) {
  const i = buf.indexOf(HEAD_END, Math.max(start, from - 3))
  return i === -1 ? -1 : i + 4
}

// Header lines -> { fields, framing facts }. Shared by requests and responses; `lines`
// starts after the first line. `fields` is flat, three entries per field: the name as
// sent, the name in lower case, the value (one array per head, none per field).
// `controls`: the head holds a control byte other than CR and LF somewhere, so each value
// is checked for one; most heads hold none, and skip the check.
function parseFields (lines, first, controls = true) {
  const fields = []
  let contentLength = -1
  let transferEncoding = null
  let connection = ''
  let upgrade = null
  let host = null
  let hosts = 0
  let expect = null
  let keepAliveHint = null
  let contentType = null
  let grpcTimeout = null
  if (lines.length - first > MAX_HEADERS) throw new HttpError(431, 'too many header fields')
  for (let i = first; i < lines.length; i++) {
    const line = lines[i]
    const colon = line.indexOf(':')
    if (colon <= 0) {
      const folded = line.charCodeAt(0) === 32 || line.charCodeAt(0) === 9
      throw new HttpError(400, folded ? 'obsolete line folding in a header' : 'header line without a name and colon')
    }
    const name = line.slice(0, colon)
    if (!TOKEN.test(name)) throw new HttpError(400, `invalid header name ${JSON.stringify(name)}`)
    const lower = name.toLowerCase()
    const value = trimOws(line, colon + 1)
    if (controls && BAD_VALUE.test(value)) throw new HttpError(400, `control character in header ${name}`)
    fields.push(name, lower, value)
    switch (lower) {
      case 'host':
        host = value
        hosts++
        break
      case 'expect':
        expect = value.toLowerCase()
        break
      case 'upgrade':
        upgrade = value
        break
      case 'connection':
        connection = connection ? `${connection},${value}` : value
        break
      case 'keep-alive':
        keepAliveHint = value
        break
      case 'content-type':
        contentType = value
        break
      case 'grpc-timeout':
        grpcTimeout = value
        break
      case 'content-length':
        // A repeated Content-Length is refused even when the values agree (RFC 9112
        // allows merging them; strict parsers such as Node's and nginx's do not).
        if (contentLength !== -1) throw new HttpError(400, 'more than one Content-Length header')
        if (line.indexOf('\t') !== -1) throw new HttpError(400, 'tab in Content-Length')
        if (!/^\d{1,15}$/.test(value)) throw new HttpError(400, `invalid Content-Length ${JSON.stringify(value)}`)
        contentLength = Number(value)
        break
      case 'transfer-encoding':
        // A tab around the coding is OWS (RFC 9110 5.6.3), trimmed like a space: safe,
        // since lila writes its own framing on, never this field as it came.
        transferEncoding = transferEncoding === null ? value : `${transferEncoding}, ${value}`
        break
    }
  }
  return {
    fields,
    contentLength,
    transferEncoding,
    connection: connectionTokens(connection),
    upgrade,
    host,
    hosts,
    expect,
    keepAliveHint,
    contentType, // gRPC calls are known by it (message/grpc.js callType)
    grpcTimeout
  }
}

// "Keep-Alive, Upgrade" -> ['keep-alive', 'upgrade'] (null for no Connection field).
function connectionTokens (value) {
  if (value === '') return null
  const lower = value.toLowerCase()
  if (lower.indexOf(',') === -1) { // most often one token: "keep-alive", "close"
    const token = trimOws(lower, 0)
    return token === '' ? [] : [token]
  }
  const tokens = []
  for (const part of lower.split(',')) {
    const token = trimOws(part, 0)
    if (token !== '') tokens.push(token)
  }
  return tokens
}

// A head's text, the blank line that ends it left out (latin1Slice: Buffer#toString
// ('latin1', ...) without its argument checks).
function headText (buf, start, end) {
  return buf.latin1Slice(start, end - 4)
}

// A head's lines, each LF checked to follow a CR and each line to hold no other CR.
function splitLines (text) {
  const lines = []
  let from = 0
  for (let lf = text.indexOf('\n'); lf !== -1; lf = text.indexOf('\n', from)) {
    if (lf === 0 || text.charCodeAt(lf - 1) !== 13) throw new HttpError(400, 'bare CR or LF in the message head')
    lines.push(text.slice(from, lf - 1))
    from = lf + 1
  }
  lines.push(from === 0 ? text : text.slice(from))
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].indexOf('\r') !== -1) throw new HttpError(400, 'bare CR or LF in the message head')
  }
  return lines
}

// Does buf, from `from` on, hold a LF without a CR right before it? A head that will
// never end in CRLFCRLF. (The CR may sit just before `from`: heads arrive in pieces.)
function hasBareLf (buf, from) {
  for (let i = buf.indexOf(10, from); i !== -1; i = buf.indexOf(10, i + 1)) {
    if (i === 0 || buf[i - 1] !== 13) return true
  }
  return false
}

// A request head in buf[start, end) (end from findHeadEnd).
function parseRequestHead (buf, start, end) {
  const text = headText(buf, start, end)
  const lines = splitLines(text)
  const requestLine = lines[0]
  if (requestLine.length > MAX_TARGET + 32) throw new HttpError(414, 'request target too long')
  const match = REQUEST_LINE.exec(requestLine)
  if (match === null) throw new HttpError(400, 'malformed request line')
  const [, method, target, major, minor] = match
  if (major !== '1' || (minor !== '0' && minor !== '1')) {
    throw new HttpError(505, `HTTP/${major}.${minor} is not supported`)
  }
  if (target.length > MAX_TARGET) throw new HttpError(414, 'request target too long')
  if (method === 'CONNECT') throw new HttpError(405, 'CONNECT is not supported by a reverse proxy')
  const head = parseFields(lines, 1, CONTROL_BUT_CRLF.test(text))
  head.method = method
  head.target = target
  head.version = minor === '1' ? 1 : 0
  head.path = requestPath(method, target)
  // RFC 9112 3.2.2: with an absolute-form target, its authority is the host; a Host
  // field that says otherwise is replaced (rewrite.js), never passed on beside it.
  head.authority = target.charCodeAt(0) === 47 || target === '*' ? null : authorityOf(target)
  if (head.authority !== null) head.host = head.authority

  if (head.version === 1 && head.hosts !== 1) {
    throw new HttpError(400, head.hosts === 0 ? 'missing Host header' : 'more than one Host header')
  }
  if (head.hosts > 1) throw new HttpError(400, 'more than one Host header')

  // Body framing (RFC 9112 section 6): chunked, a length, or none.
  head.chunked = false
  if (head.transferEncoding !== null) {
    if (head.version === 0) throw new HttpError(400, 'Transfer-Encoding in an HTTP/1.0 request')
    if (head.contentLength !== -1) throw new HttpError(400, 'both Content-Length and Transfer-Encoding')
    if (head.transferEncoding.toLowerCase() !== 'chunked') {
      throw new HttpError(400, `unsupported Transfer-Encoding ${JSON.stringify(head.transferEncoding)}`)
    }
    head.chunked = true
  }
  head.bodyLength = head.chunked ? -1 : Math.max(head.contentLength, 0)
  head.keepAlive = keepAliveOf(head)
  // h2c is not passed on: a client speaking HTTP/2 straight to a backend would be out
  // of lila's sight ("h2c smuggling"). Without the upgrade, Upgrade is just hop-by-hop.
  head.asksUpgrade = head.upgrade !== null && hasToken(head.connection, 'upgrade')
  head.isUpgrade = head.asksUpgrade && !/^\s*h2c\s*$/i.test(head.upgrade)
  return head
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
// HEAD has no body whatever its headers say.
function parseResponseHead (buf, start, end, method) {
  const text = headText(buf, start, end)
  const lines = splitLines(text)
  const match = STATUS_LINE.exec(lines[0])
  if (match === null) throw new HttpError(502, 'malformed status line from the backend')
  const head = parseFields(lines, 1, CONTROL_BUT_CRLF.test(text))
  head.version = match[1] === '1' ? 1 : 0
  head.status = Number(match[2])
  head.reason = match[3] || ''
  // Framing: none, chunked, a length, or until the backend closes.
  head.chunked = false
  head.bodyLength = -1 // -1 with chunked false: read until close
  const status = head.status
  if (status < 200 || status === 204 || status === 304 || method === 'HEAD') {
    head.bodyLength = 0
  } else if (head.transferEncoding !== null) {
    // Only a lone "chunked" is framing lila can follow; anything else would leave lila
    // and the client disagreeing about where the response ends.
    if (head.transferEncoding.toLowerCase() !== 'chunked') {
      const coding = JSON.stringify(head.transferEncoding)
      throw new HttpError(502, `unsupported Transfer-Encoding ${coding} from the backend`)
    }
    if (head.contentLength !== -1) {
      throw new HttpError(502, 'both Content-Length and Transfer-Encoding from the backend')
    }
    head.chunked = true
  } else if (head.contentLength !== -1) {
    head.bodyLength = head.contentLength
  }
  head.keepAlive = keepAliveOf(head)
  return head
}

// HTTP/1.1 stays open unless told to close; HTTP/1.0 closes unless told otherwise.
function keepAliveOf (head) {
  return head.version === 1
    ? !hasToken(head.connection, 'close')
    : hasToken(head.connection, 'keep-alive')
}

function hasToken (tokens, token) {
  return tokens !== null && tokens.includes(token)
}

// "timeout=5, max=100" -> { timeout: 5000, max: 100 } (ms; -1 when absent).
function parseKeepAlive (value) {
  const out = { timeout: -1, max: -1 }
  if (value === null) return out
  const timeout = /(?:^|[,\s])timeout=(\d+)/i.exec(value)
  const max = /(?:^|[,\s])max=(\d+)/i.exec(value)
  if (timeout) out.timeout = Number(timeout[1]) * 1000
  if (max) out.max = Number(max[1])
  return out
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
