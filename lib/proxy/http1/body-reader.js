'use strict'

const { HttpError } = require('../../errors')
const { ChunkedReader } = require('./chunked')
const { fieldsOfTrailers } = require('./heads')
const { view } = require('./parse')

// The request body an HTTP/1.1 client connection is reading (request-reader.js),
// through its framing: bytes left of its Content-Length, or chunked (a ChunkedReader
// finds its end, and takes it apart for a backend that is not sent the client's
// framing). Its pieces go to the exchange (onBody) as RequestBody's `framed` says;
// what follows its end is the next request's.
class BodyReader {
  constructor () {
    this.left = 0 // bytes left of its length, or -1 while chunked; 0: none being read
    this.chunks = null
    this.decoded = null // taking a chunked body apart: the ChunkedReader's onData
    this.trailers = null // a chunked body's trailers taken apart (fields as in a head), once ended
  }

  get active () {
    return this.left !== 0
  }

  // A reader of its own for a connection that is to read a body: NO_BODY, which every
  // connection has until then (and which never reads one), makes one.
  own () {
    return this === NO_BODY ? new BodyReader() : this
  }

  // Exchange `x`'s body is to be read: how it is framed.
  start (x) {
    const { head } = x
    this.left = head.chunked ? -1 : head.bodyLength
    if (!head.chunked) return
    this.chunks = new ChunkedReader(400, { keepTrailers: !x.body.framed })
    if (!x.body.framed) this.decoded = (b, s, e) => x.onBody(b.subarray(s, e))
  }

  stop () {
    this.left = 0
    this.chunks = null
    this.decoded = null
  }

  // Body bytes from buf[start] for exchange `x`, up to the body's end. Returns where in
  // buf the body ended (`trailers` then holds its trailers, or null), or -1: more is to
  // come, or its framing broke (the exchange was told, clientBodyFailed).
  read (x, buf, start) {
    let end = buf.length
    this.trailers = null
    if (this.chunks !== null) {
      const before = this.chunks.data
      let bodyEnd
      try {
        bodyEnd = this.chunks.read(buf, start, end, this.decoded)
      } catch (err) {
        if (!(err instanceof HttpError)) throw err
        x.clientBodyFailed(err.message)
        return -1
      }
      if (bodyEnd !== -1) end = bodyEnd
      if (this.decoded === null && end > start) x.onBody(view(buf, start, end), this.chunks.data - before)
      if (bodyEnd === -1) return -1
      if (this.decoded !== null) this.trailers = fieldsOfTrailers(this.chunks.trailers)
      return end
    }
    if (end - start > this.left) end = start + this.left
    this.left -= end - start
    if (end > start) x.onBody(view(buf, start, end))
    return this.left === 0 ? end : -1
  }
}

const NO_BODY = new BodyReader()

module.exports = { NO_BODY }
