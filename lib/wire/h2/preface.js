'use strict'

// The HTTP/2 connection preface (RFC 9113 3.4): what a client that knows the server
// speaks HTTP/2 ("prior knowledge", h2c) sends first. Its first 18 bytes read as an
// HTTP/1.x request head ("PRI * HTTP/2.0", then an empty line), so an HTTP/1.1 session
// looks for it before it parses anything (proxy/http1/request-reader.js). Once those 18
// bytes are in, the connection is HTTP/2's: the codec checks the rest (connection.js: a
// preface that breaks off there is a connection error, GOAWAY PROTOCOL_ERROR), as no
// HTTP/1.x client sends that head. Pure.
const { PREFACE } = require('./constants')
const HEAD = 18 // "PRI * HTTP/2.0\r\n\r\n"

const NOT_HTTP2 = -1
const MAYBE = 0 // the start of it: wait for more bytes
const HTTP2 = 1

// Do the first bytes of a connection, `buf`, open with the preface's head?
function matchPreface (buf) {
  const n = Math.min(buf.length, HEAD)
  for (let i = 0; i < n; i++) if (buf[i] !== PREFACE[i]) return NOT_HTTP2
  return n === HEAD ? HTTP2 : MAYBE
}

module.exports = { matchPreface, MAYBE, HTTP2 }
