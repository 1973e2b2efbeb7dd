'use strict'

// HTTP/1.1 heads as lila writes them: the fields message/rewrite.js decided (a Fields:
// name, lower-case name, value and a pre-encoded line or null, per field) as text, with what is
// HTTP/1.1's own: the request or status line, the framing (Transfer-Encoding,
// Content-Length), and the connection's options (Connection: close, keep-alive,
// upgrade). Pure; latin1 text, one string per head.

const { STATUS_CODES } = require('http')
const { trimOws } = require('../message/grammar')
const { FIELD } = require('../message/rewrite')

// The request line and fields, then lila's framing: always HTTP/1.1, kept alive; the
// body as the client framed it (chunked, or its length, which is among the fields), an
// upgrade asked for. TE ("trailers", which HTTP/2 carries for gRPC) stays out: HTTP/1.1
// would need it named in Connection too (RFC 9110 10.1.4), and lila takes a backend's
// trailers whether it said so or not.
function requestHead (head, fields) {
  let out = `${head.method} ${head.target} HTTP/1.1\r\n`
  const { list, length } = fields
  for (let i = 0; i < length; i += FIELD) {
    if (list[i + 1] !== 'te') out = lineOf(out, list, i)
  }
  if (head.chunked) out += 'Transfer-Encoding: chunked\r\n'
  if (head.isUpgrade) out += `Connection: upgrade\r\nUpgrade: ${head.upgrade}\r\n`
  return `${out}\r\n`
}

// The response as the client gets it, with `fields` (message/rewrite.js
// responseFields); an HTTP/2 head has no reason phrase: the status's usual one.
//   how: { chunked: Transfer-Encoding: chunked, close: this is the last response on
//          the connection, keepAlive10: tell an HTTP/1.0 client the connection stays,
//          upgrade: a 101 switching protocols }
//   length: the Content-Length to say (-1: none), when not chunked
function responseHead (res, fields, how, length = res.contentLength) {
  let out = statusLine(res.status, reasonOf(res))
  const list = fields.list
  for (let i = 0; i < fields.length; i += FIELD) out = lineOf(out, list, i)
  if (how.upgrade) return `${out}Connection: upgrade\r\nUpgrade: ${res.upgrade}\r\n\r\n`
  if (how.chunked) out += 'Transfer-Encoding: chunked\r\n'
  else if (length !== -1) out += length < LENGTH_LINES.length ? lengthLine(length) : `Content-Length: ${length}\r\n`
  if (how.close) out += 'Connection: close\r\n'
  else if (how.keepAlive10) out += 'Connection: keep-alive\r\n'
  return `${out}\r\n`
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

module.exports = { requestHead, responseHead, trailerLines, fieldsOfTrailers }
