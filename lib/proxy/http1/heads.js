'use strict'

// HTTP/1.1 heads as lila writes them: the fields message/rewrite.js decided (a Fields:
// name, lower-case name, value and a pre-encoded line or null, per field) as text, with what is
// HTTP/1.1's own: the request or status line, the framing (Transfer-Encoding,
// Content-Length), and the connection's options (Connection: close, keep-alive,
// upgrade). Pure; each head as one Buffer of latin1 bytes.

const { STATUS_CODES } = require('http')
const { trimOws } = require('../message/grammar')
const { FIELD } = require('../message/rewrite')

// The request line and fields, then lila's framing: always HTTP/1.1, kept alive; the
// body as the client framed it (chunked, or its length, which is among the fields), an
// upgrade asked for. TE ("trailers", which HTTP/2 carries for gRPC) stays out: HTTP/1.1
// would need it named in Connection too (RFC 9110 10.1.4), and lila takes a backend's
// trailers whether it said so or not. Bytes, written piece by piece into one Buffer
// sized first: text joined with + made a cons string per piece (about 18 per head with
// X-Forwarded-*), and the socket flattened them again (bench/README.md, garbage).
// `room`: bytes left free after the head, for a body that joins it.
function requestHead (head, fields, room = 0) {
  const { list, length } = fields
  const { method, target } = head
  let size = method.length + target.length + REQUEST_LINE_END.length + 3 // SP, and the blank line
  for (let i = 0; i < length; i += FIELD) {
    if (list[i + 1] !== 'te') size += lineLength(list, i)
  }
  const tail = head.chunked ? CHUNKED_LINE : head.isUpgrade ? `Connection: upgrade\r\nUpgrade: ${head.upgrade}\r\n` : ''
  size += tail.length
  const out = Buffer.allocUnsafe(size + room)
  let at = put(out, 0, method)
  out[at++] = 32
  at = put(out, at, target)
  at = put(out, at, REQUEST_LINE_END)
  for (let i = 0; i < length; i += FIELD) {
    if (list[i + 1] !== 'te') at = putLine(out, at, list, i)
  }
  at = put(out, at, tail)
  out[at] = 13
  out[at + 1] = 10
  return out
}

const REQUEST_LINE_END = ' HTTP/1.1\r\n'
const CHUNKED_LINE = 'Transfer-Encoding: chunked\r\n'

// The bytes of the field at list[i] as a line: the one made once, or name: value.
function lineLength (list, i) {
  const line = list[i + 3]
  return line !== null ? line.length : list[i].length + list[i + 2].length + 4
}

function putLine (out, at, list, i) {
  const line = list[i + 3]
  if (line !== null) return put(out, at, line)
  at = put(out, at, list[i])
  out[at] = 58 // ": "
  out[at + 1] = 32
  at = put(out, at + 2, list[i + 2])
  out[at] = 13
  out[at + 1] = 10
  return at + 2
}

// `text` into out at `at`, as latin1 (a character's low byte, as a socket's 'latin1'
// write does); where it ends. Short pieces byte by byte: cheaper than a call into C++.
function put (out, at, text) {
  const n = text.length
  if (n > 64) return at + out.latin1Write(text, at, n)
  for (let i = 0; i < n; i++) out[at + i] = text.charCodeAt(i)
  return at + n
}

// The response as the client gets it, with `fields` (message/rewrite.js
// responseFields); an HTTP/2 head has no reason phrase: the status's usual one. Bytes,
// as requestHead's, with `room` bytes left after the head for the body to join it (the
// caller writes them): the head is its first length - room bytes.
//   how: { chunked: Transfer-Encoding: chunked, close: this is the last response on
//          the connection, keepAlive10: tell an HTTP/1.0 client the connection stays,
//          upgrade: a 101 switching protocols }
//   length: the Content-Length to say (-1: none), when not chunked
function responseHead (res, fields, how, length = res.contentLength, room = 0) {
  const status = statusLine(res.status, reasonOf(res))
  const { list } = fields
  const count = fields.length
  let size = status.length + 2
  for (let i = 0; i < count; i += FIELD) size += lineLength(list, i)
  let framing = ''
  let connection = ''
  if (how.upgrade) {
    connection = `Connection: upgrade\r\nUpgrade: ${res.upgrade}\r\n`
  } else {
    if (how.chunked) framing = CHUNKED_LINE
    else if (length !== -1) framing = lengthLine(length)
    if (how.close) connection = 'Connection: close\r\n'
    else if (how.keepAlive10) connection = 'Connection: keep-alive\r\n'
  }
  size += framing.length + connection.length
  const out = Buffer.allocUnsafe(size + room)
  let at = put(out, 0, status)
  for (let i = 0; i < count; i += FIELD) at = putLine(out, at, list, i)
  at = put(out, at, framing)
  at = put(out, at, connection)
  out[at] = 13
  out[at + 1] = 10
  return out
}

// Status lines with their usual reason phrase, and Content-Length lines of small
// lengths, made once each, as they are asked for: most responses say one of a few.
const STATUS_LINES = new Map()
const LENGTH_LINES = new Array(1024).fill(null)

function statusLine (status, reason) {
  if (reason === STATUS_CODES[status]) {
    let line = STATUS_LINES.get(status)
    if (line === undefined) STATUS_LINES.set(status, line = `HTTP/1.1 ${status} ${reason}\r\n`)
    return line
  }
  return `HTTP/1.1 ${status} ${reason}\r\n`
}

function lengthLine (length) {
  if (length >= LENGTH_LINES.length) return `Content-Length: ${length}\r\n`
  const line = LENGTH_LINES[length]
  return line !== null ? line : (LENGTH_LINES[length] = `Content-Length: ${length}\r\n`)
}

// `out` and the field at list[i] as a line: the one made once, or name: value. (Added
// on left to right, not as a template per line: that cost the request head 10-15% in
// a loop of them, flattened and copied as a socket write does.)
function lineOf (out, list, i) {
  const line = list[i + 3]
  return line !== null ? out + line : out + list[i] + ': ' + list[i + 2] + '\r\n'
}

// An HTTP/2 head has no reason phrase: the status's usual one.
function reasonOf (res) {
  return res.version === 2 ? STATUS_CODES[res.status] || '' : res.reason
}

// Trailer fields (message/rewrite.js trailerFields) as HTTP/1.1 lines for the end of a
// chunked body; '' for none.
function trailerLines (fields) {
  let out = ''
  const { list, length } = fields
  for (let i = 0; i < length; i += FIELD) out = lineOf(out, list, i)
  return out
}

// A chunked body's trailer section as a ChunkedReader kept it ("Name: value\r\n"
// lines) as fields; null when there are none.
function fieldsOfTrailers (text) {
  if (text === null || text === '') return null
  const out = []
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const name = line.slice(0, colon)
    out.push(name, name.toLowerCase(), trimOws(line, colon + 1))
  }
  return out.length === 0 ? null : out
}

// A body up to this many bytes gets room behind its head, in the head's own Buffer (a
// slice of Node's pool while the two fit in half of it): one allocation and one plain
// write, cheaper in Node than a corked writev of the two (a chunk array, the buffered
// writes' objects). A larger one made its Buffer outside the pool, which cost more
// than the writev saved (a 4 KiB POST's CPU per request, ab.js).
const ROOM_LIMIT = 2048

module.exports = { requestHead, responseHead, trailerLines, fieldsOfTrailers, ROOM_LIMIT }
