'use strict'

const { findHeadEnd, hasBareLf, parseResponseHead, parseKeepAlive, view, MAX_HEAD } = require('../http1/parse')
const { ChunkedReader } = require('../http1/chunked')

// An HTTP/1.1 backend's response to one HTTP/2 stream, as its StreamExchange
// (exchange.js) reads it: the counterpart of http1/response.js for a client that
// frames bodies itself. 1xx heads go on as interim headers, then the final head, then
// the body as data only: chunked framing is always decoded (HTTP/2 has DATA frames),
// and the chunked body's trailers are kept for the client's trailers. It also keeps
// what the response says of the backend connection: its Keep-Alive hint, and whether
// it can serve another request (`reusable`).
//
// What it reads goes back through the exchange: upstreamFailed(reason, 'invalid'),
// interim(res) for a 1xx, startResponse(res, buf, end) with the final head,
// toClient(piece) for body bytes, responseDone() at the body's end (then `trailers`
// holds the trailer section's text, or null).
class Response {
  constructor (exchange, request) {
    this.exchange = exchange
    this.request = request // the request head (http2/request.js)
    this.partial = null // a response head still arriving
    this.head = null // the final response head, once parsed
    this.reader = null // ChunkedReader for a chunked response
    this.sendData = null // then, its onData: the data to the client
    this.left = 0 // bytes still to come, for a Content-Length response
    this.untilClose = false
    this.gotBytes = false // some byte of it came (then the request is not replayed)
    this.reusable = true // the backend connection can serve another request afterwards
  }

  // Bytes from the backend.
  read (chunk) {
    this.gotBytes = true
    if (this.head === null) return this.readHead(chunk)
    this.forward(chunk, 0)
  }

  readHead (chunk) {
    const { exchange, request } = this
    const buf = this.partial === null ? chunk : Buffer.concat([this.partial, chunk])
    this.partial = null
    let start = 0
    for (;;) {
      const end = findHeadEnd(buf, start)
      if (end === -1) {
        if (buf.length - start > MAX_HEAD) return exchange.upstreamFailed('sent a response head over 16 KiB', 'invalid')
        if (hasBareLf(buf, start)) {
          return exchange.upstreamFailed('sent a response head with bare LF line endings', 'invalid')
        }
        this.partial = view(buf, start, buf.length)
        return
      }
      let res
      try {
        res = parseResponseHead(buf, start, end, request.method)
      } catch (err) {
        if (err.status === undefined) throw err
        return exchange.upstreamFailed(`sent an invalid response (${err.message})`, 'invalid')
      }
      // An HTTP/2 request never asks to switch protocols (lila sends no Upgrade).
      if (res.status === 101) return exchange.upstreamFailed('switched protocols unasked', 'invalid')
      if (res.status < 200) {
        exchange.interim(res) // 100 Continue, 103 Early Hints
        start = end
        continue
      }
      return exchange.startResponse(res, buf, end)
    }
  }

  // The final head `res` is in, read on `conn`; `extra` bytes came after it.
  frame (res, conn, extra) {
    this.head = res
    if (res.chunked) {
      this.reader = new ChunkedReader(502, { keepTrailers: true })
      const exchange = this.exchange
      this.sendData = (b, s, e) => exchange.toClient(b.subarray(s, e))
    } else if (res.bodyLength === -1) {
      this.untilClose = true
      this.reusable = false
    } else {
      this.left = res.bodyLength
    }
    if (res.keepAliveHint === null) {
      conn.answered(-1, -1)
    } else {
      const hint = parseKeepAlive(res.keepAliveHint)
      conn.answered(hint.timeout, hint.max)
    }
    if (!res.keepAlive) this.reusable = false
    if (this.bodyless && extra > 0) this.reusable = false // bytes after a complete response
  }

  get bodyless () {
    return this.reader === null && this.left === 0 && !this.untilClose
  }

  // A chunked body: it may end with trailers.
  get chunked () {
    return this.reader !== null
  }

  // The trailer section's text once the body ended ("Name: value\r\n" lines), or null.
  get trailers () {
    return this.reader === null ? null : this.reader.trailers
  }

  // Body bytes from buf[start], forwarded to the client up to the body's end.
  forward (buf, start) {
    const exchange = this.exchange
    let end = buf.length
    if (this.reader !== null) {
      let bodyEnd
      try {
        bodyEnd = this.reader.read(buf, start, end, this.sendData)
      } catch (err) {
        return exchange.upstreamFailed(err.message, 'invalid')
      }
      if (bodyEnd !== -1) {
        if (bodyEnd < end) this.reusable = false // bytes after the response: not a clean connection
        exchange.responseDone()
      }
      return
    }
    if (this.untilClose) return exchange.toClient(view(buf, start, end))
    if (end - start > this.left) {
      this.reusable = false
      end = start + this.left
    }
    this.left -= end - start
    exchange.toClient(view(buf, start, end))
    if (this.left === 0) exchange.responseDone()
  }

  // The backend sent its FIN: true when that ends the body (read until close).
  ended () {
    if (!this.untilClose || this.head === null) return false
    this.reusable = false
    return true
  }
}

module.exports = { Response }
