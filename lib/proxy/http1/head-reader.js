'use strict'

const { HttpError } = require('../../errors')
const { findHeadEnd, hasBareLf, parseRequestHead } = require('./parse')
const { MAX_HEAD } = require('../message/grammar')

// What an HTTP/1.x request line ends with.
const HTTP_LINE = / HTTP\/\d\.\d$/
// HeadReader's `status` for a first line that is no HTTP/1.x request line at all.
const NOT_HTTP = -1

// The request heads a client connection receives (request-reader.js), found at the
// front of what it read: past empty lines (RFC 9112 2.2), searched from where the last
// search stopped (a head arriving a byte at a time costs linear work, not quadratic),
// parsed strictly (parse.js). What it found is in its fields, read at once, so that a
// request allocates nothing here.
class HeadReader {
  constructor () {
    this.scanned = 0 // bytes of the buffer (from `start`) already searched for a head's end
    this.start = 0 // where the head begins, past empty lines
    this.end = 0 // and where it ends (its blank line included)
    this.status = 0 // refused: the status to answer and why (`detail`); 0: not refused
    this.detail = ''
  }

  // The head at the front of `buf`, parsed; or null: refused (`status`; NOT_HTTP: the
  // client may have meant HTTP/2, `mayBeHttp2`), or not all there yet (`start` ===
  // buf.length: not begun). `scanned`: the bytes from `start` searched before, and
  // after (`this.scanned`). `clientEnded`: no more will come. `form`: a head read before
  // that nothing reads any more, to parse this one into (parse.js), or null.
  read (buf, scanned, clientEnded, mayBeHttp2, form) {
    this.status = 0
    this.scanned = scanned
    let start = 0
    while (start + 1 < buf.length && buf[start] === 13 && buf[start + 1] === 10) start += 2
    this.start = start
    if (start === buf.length) return null
    const from = start + this.scanned
    const end = this.end = findHeadEnd(buf, start, from)
    if (end === -1) {
      if (buf.length - start > MAX_HEAD) return this.refused(431, 'request head too large')
      if (hasBareLf(buf, from)) return this.refused(400, 'bare LF in the request head')
      if (clientEnded) return this.refused(400, 'connection closed in the middle of a request head')
      this.scanned = buf.length - start
      return null
    }
    this.scanned = 0
    if (end - start > MAX_HEAD + 4) return this.refused(431, 'request head too large')
    try {
      return parseRequestHead(buf, start, end, form)
    } catch (err) {
      if (!(err instanceof HttpError)) throw err
      if (mayBeHttp2 && !HTTP_LINE.test(buf.latin1Slice(start, buf.indexOf(10, start) - 1))) {
        return this.refused(NOT_HTTP, 'neither HTTP/1.x nor the HTTP/2 preface')
      }
      return this.refused(err.status, err.message)
    }
  }

  refused (status, detail) {
    this.status = status
    this.detail = detail
    return null
  }
}

module.exports = { HeadReader, NOT_HTTP }
