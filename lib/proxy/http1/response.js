'use strict'

const { findHeadEnd, hasBareLf, parseResponseHead, parseKeepAlive, view, MAX_HEAD } = require('./parse')
const { ChunkedReader } = require('./chunked')
const { responseHead, interimHead } = require('./rewrite')

// How the client's copy of a final response head is framed (responseHead's `how`):
// one object per combination, so that a response allocates none.
const HOW = []
for (let i = 0; i < 8; i++) HOW.push({ chunked: (i & 4) !== 0, close: (i & 2) !== 0, keepAlive10: (i & 1) !== 0 })

// The backend's response to one request, as its Exchange (exchange.js) reads it: 1xx
// heads passed on (never to HTTP/1.0), then the final head, then the body as the
// backend frames it (Content-Length, chunked, or until it closes), forwarded as it
// comes; chunked framing is decoded for an HTTP/1.0 client, which cannot take it.
// It also keeps what the response says of the backend connection: its Keep-Alive hint,
// and whether it can serve another request (`reusable`).
//
// What it reads goes back through the exchange: upstreamFailed(reason, 'invalid'),
// startTunnel / startResponse (res, buf, end) with the final head, toClient(piece)
// for body bytes, responseDone() at the body's end.
class Response {
  constructor (exchange, session, request) {
    this.exchange = exchange
    this.session = session // 1xx heads go to the client as they are
    this.request = request // the request head
    this.partial = null // a response head still arriving
    this.head = null // the final response head, once parsed
    this.reader = null // ChunkedReader for a chunked response
    this.left = 0 // bytes still to come, for a Content-Length response
    this.untilClose = false
    this.decode = false // strip chunked framing: an HTTP/1.0 client
    this.sendDecoded = null // then, the ChunkedReader's onData: the data to the client
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
        // A head whose lines end in a bare LF would never end by CRLF: refused at once
        // rather than waited on until --timeout.
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
      if (res.status === 101) {
        if (!request.isUpgrade) return exchange.upstreamFailed('switched protocols unasked', 'invalid')
        return exchange.startTunnel(res, buf, end)
      }
      if (res.status < 200) {
        // 100 Continue, 103 Early Hints: pass on (never to HTTP/1.0) and read on.
        if (request.version === 1) this.session.write(interimHead(res), 'latin1')
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
      this.reader = new ChunkedReader(502)
      this.decode = this.request.version === 0
      if (this.decode) {
        const exchange = this.exchange
        this.sendDecoded = (b, s, e) => exchange.toClient(b.subarray(s, e))
      }
    } else if (res.bodyLength === -1) {
      this.untilClose = true
      this.reusable = false
    } else {
      this.left = res.bodyLength
    }
    // "Keep-Alive: timeout=5, max=100": how long and how often the connection may serve.
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

  // Only the connection's close can tell the client where this body ends: it is read
  // until the backend closes, or decoded from chunked for an HTTP/1.0 client.
  get endsWithClose () {
    return this.untilClose || this.decode
  }

  // The final head as the client gets it: lila's framing, and `keepAlive` or not.
  clientHead (keepAlive) {
    const res = this.head
    const chunked = res.chunked && !this.decode
    const how = HOW[(chunked ? 4 : 0) | (keepAlive ? 0 : 2) | (this.request.version === 0 ? 1 : 0)]
    const { exchange } = this
    return responseHead(res, how, exchange.listener.protocol.rewrite.response, exchange)
  }

  // Body bytes from buf[start], forwarded to the client up to the body's end.
  forward (buf, start) {
    const exchange = this.exchange
    let end = buf.length
    if (this.reader !== null) {
      let bodyEnd
      try {
        bodyEnd = this.reader.read(buf, start, end, this.sendDecoded)
      } catch (err) {
        return exchange.upstreamFailed(err.message, 'invalid')
      }
      if (bodyEnd !== -1) {
        if (bodyEnd < end) this.reusable = false // bytes after the response: not a clean connection
        end = bodyEnd
      }
      if (!this.decode) exchange.toClient(view(buf, start, end))
      if (bodyEnd !== -1) exchange.responseDone()
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
