'use strict'

const { performance } = require('perf_hooks')
const { isLocalShortage } = require('../../errors')
const { backendReason } = require('../../upstream/dial')
const { findHeadEnd, hasBareLf, parseKeepAlive, view } = require('./parse')
const { MAX_HEAD } = require('../message/grammar')
const { ChunkedReader } = require('./chunked')
const { requestHead, trailerLines, fieldsOfTrailers, ROOM_LIMIT } = require('./heads')
const { Fields, requestFields, trailerFields } = require('../message/rewrite')
const { Tunnel } = require('./tunnel')
const { responseBody } = require('../message/response-body')

const CRLF = '\r\n'
// The fields of the head being written (message/rewrite.js): one array for every leg,
// as a head is written at once.
const FIELDS = new Fields()

// A request on an HTTP/1.1 backend: the leg of an Exchange (http/exchange.js) on the
// backend it was seated on. It takes a keep-alive connection from the backend's pool
// (connection-pool.js, whose socket events come here), writes the request's head (the
// fields message/rewrite.js decides, as heads.js writes them) and the body (as the
// client framed it, by its length, or in chunks lila frames, with the client's
// trailers), and reads the response: 1xx heads, the final head, then the
// body as the backend frames it (Content-Length, chunked, or until it closes),
// forwarded as it comes. Chunked framing passes as it is to a client that takes it (an
// HTTP/1.1 one) and is decoded for the others (HTTP/1.0, HTTP/2: then its trailers are
// kept for the client). It also keeps what the response says of the connection: its
// Keep-Alive hint, and whether it can serve another request (`reusable`). A 101 turns
// the connection into a Tunnel.
class Http1Leg {
  // The fields #begin sets, declared so that V8 keeps them in the object (exchange.js).
  backend; fresh; pool; conn; dialing; abandoned; silentTicks; sentAt; chunkedOut
  partial; res; reader; left; untilClose; decode; sendDecoded; gotBytes; reusable
  tunnel

  constructor (exchange, backend, fresh) {
    this.x = exchange
    this.#begin(backend, fresh)
  }

  // The exchange's next request (forwarding.js seated), on `backend`: this leg, made
  // new. Its last response completed (done) and its connection went back to the pool,
  // which sends it no more events (conn.owner: null).
  renew (backend) {
    this.#begin(backend, false)
    return this
  }

  #begin (backend, fresh) {
    const exchange = this.x
    this.backend = backend
    this.fresh = fresh // not a pooled connection (the keep-alive race's retry)
    this.pool = exchange.listener.protocol.poolFor(backend)
    this.conn = null // the connection, once ready
    this.dialing = null // a connection being opened for it (see start)
    this.abandoned = false
    this.silentTicks = 0 // listener sweeps without a byte from the backend (--timeout)
    this.sentAt = 0 // when the head went: latency for least-time
    // The body's pieces are bare but it has no length: lila frames them in chunks.
    this.chunkedOut = exchange.head.chunked && !exchange.body.framed
    // The response.
    this.partial = null // a response head still arriving
    this.res = null // the final response head, once parsed
    this.reader = null // ChunkedReader for a chunked response
    this.left = 0 // bytes still to come, for a Content-Length response
    this.untilClose = false
    this.decode = false // chunked framing taken off (a client that does not take it)
    this.sendDecoded = null // then, the ChunkedReader's onData: the data to the client
    this.gotBytes = false // some byte of it came (then the request is not replayed)
    this.reusable = true // the connection can serve another request afterwards
    this.tunnel = null
  }

  get connected () {
    return this.conn !== null
  }

  // The pool has no queue of its own: a connection now, ready or being opened; one
  // being opened is kept in `dialing`, so that a request given up meanwhile closes it
  // rather than have it sent later for nobody.
  start () {
    const conn = this.pool.acquire(this, { fresh: this.fresh })
    if (this.conn !== conn) this.dialing = conn
  }

  // The connection is ready (pooled and idle, or newly connected): the head, then the
  // body held so far (all of it, on a retry), and its end if it came, in one system call.
  onUpstreamConnect (conn) {
    if (!conn.ready) return // its ready event comes later
    if (this.abandoned) return conn.destroy()
    this.dialing = null
    this.conn = conn
    this.silentTicks = 0
    const x = this.x
    const { body } = x
    const socket = conn.socket
    // A gRPC call's deadline, less the time it spent in lila (queued, connecting).
    const left = x.deadline === null ? null : x.deadline.left()
    const { rewrite } = x.listener.protocol
    requestFields(x.sent, x, this.backend.hostHeader, rewrite, left, x.forwarding.clientSpan, FIELDS)
    // A small body read whole in one piece (as it came with its head, mostly) joins the
    // head: one Buffer, one write (heads.js ROOM_LIMIT).
    const whole = this.chunkedOut ? null : body.whole(ROOM_LIMIT)
    const head = requestHead(x.sent, FIELDS, whole === null ? 0 : whole.length)
    this.sentAt = performance.now()
    if (whole !== null) {
      whole.copy(head, head.length - whole.length)
      socket.write(head)
      body.replayed()
      return x.legConnected()
    }
    const corked = body.heldBytes > 0 || (body.done && this.chunkedOut)
    if (corked) socket.cork()
    socket.write(head)
    body.replay(this.writePiece, this)
    if (body.done) this.finishBody()
    if (corked) socket.uncork()
    x.legConnected()
  }

  writePiece (piece) {
    const socket = this.conn.socket
    if (!this.chunkedOut) return socket.write(piece)
    socket.write(`${piece.length.toString(16)}\r\n`, 'latin1')
    socket.write(piece)
    return socket.write(CRLF, 'latin1')
  }

  // The last chunk and the client's trailers, when lila frames the body.
  finishBody () {
    if (!this.chunkedOut) return
    trailerFields(this.x.clientTrailers, FIELDS)
    this.conn.socket.write(`0\r\n${trailerLines(FIELDS)}\r\n`, 'latin1')
  }

  // A piece of the client's body; false when the backend's socket is full.
  write (piece) {
    this.silentTicks = 0 // a backend still being sent the request is not silent
    return this.writePiece(piece)
  }

  end () {
    this.finishBody()
  }

  // Do its socket's writes still hold pieces of the body (http1/client-reads.js)?
  holdsBody () {
    return this.conn === null || this.conn.socket.writableLength > 0
  }

  pause () {
    if (this.conn !== null) this.conn.socket.pause()
  }

  resume () {
    if (this.conn !== null) this.conn.socket.resume()
  }

  abandon () {
    this.abandoned = true
    const conn = this.conn || this.dialing
    this.conn = null
    this.dialing = null
    if (conn !== null) conn.destroy()
  }

  // The keep-alive race: the same backend again, on a new connection.
  again () {
    return new Http1Leg(this.x, this.backend, true)
  }

  // The listener's sweep: not while lila holds the socket paused for a client that does
  // not read (that silence is the client's, left to --idle-timeout).
  onSweep (silentLimit) {
    const conn = this.conn
    if (conn === null || conn.socket.isPaused()) return
    if (++this.silentTicks >= silentLimit) this.onUpstreamTimeout(conn)
  }

  // The pooled connection's owner (connection-pool.js).

  // Does it still hold bytes of the backend's last read (connection-pool.js READ)? Its
  // write to the client waits, or a response head is still arriving.
  holdsRead () {
    const x = this.x
    return this.partial !== null || x.compressed !== null || x.client.holdsWrites(x) // zlib reads it later
  }

  onUpstreamData (conn, chunk) {
    const x = this.x
    x.client.touch()
    this.silentTicks = 0
    if (this.tunnel !== null) return x.toClient(chunk)
    this.gotBytes = true
    if (this.res === null) return this.readHead(chunk)
    this.forward(chunk, 0)
  }

  onUpstreamDrain () {
    this.x.legDrained()
  }

  onUpstreamEnd (conn) {
    if (this.tunnel !== null) return this.tunnel.backendEnded()
    if (this.untilClose && this.res !== null) {
      this.reusable = false
      this.done()
    }
  }

  onUpstreamClose (conn) {
    if (this.conn !== conn) return
    if (this.tunnel !== null) {
      this.conn = null
      this.tunnel.backendClosed()
      return this.x.tunnelClosed()
    }
    const reason = this.gotBytes ? 'closed the connection mid-response' : 'closed the connection without answering'
    this.failed(reason, 'closed')
  }

  onUpstreamError (conn, err) {
    if (this.abandoned || (this.conn !== null && this.conn !== conn)) return
    const x = this.x
    if (this.tunnel !== null) return x.client.cut(x)
    if (isLocalShortage(err) && !x.responseStarted) {
      this.abandon()
      return x.shortOf(err)
    }
    this.failed(backendReason(err, conn.pool.tls), conn.ready ? 'reset' : 'connect', conn)
  }

  onUpstreamTimeout (conn) {
    if (!conn.ready) return this.failed('connect timed out', 'connect', conn)
    this.failed('timed out', 'timeout')
  }

  failed (reason, cause, conn = this.conn) {
    if (this.abandoned) return
    this.x.upstreamFailed(reason, cause, conn !== null && conn.reused)
  }

  // The response.

  readHead (chunk) {
    const x = this.x
    const buf = this.partial === null ? chunk : Buffer.concat([this.partial, chunk])
    this.partial = null
    let start = 0
    for (;;) {
      const end = findHeadEnd(buf, start)
      if (end === -1) {
        if (buf.length - start > MAX_HEAD) return this.failed('sent a response head over 16 KiB', 'invalid')
        // A head whose lines end in a bare LF would never end by CRLF: refused at once
        // rather than waited on until --timeout.
        if (hasBareLf(buf, start)) return this.failed('sent a response head with bare LF line endings', 'invalid')
        this.partial = view(buf, start, buf.length)
        return
      }
      let res
      try {
        res = this.conn.readHead(buf, start, end, x.head.method)
      } catch (err) {
        if (err.status === undefined) throw err
        return this.failed(`sent an invalid response (${err.message})`, 'invalid')
      }
      if (res.status === 101) {
        if (!x.head.isUpgrade) return this.failed('switched protocols unasked', 'invalid')
        return this.startTunnel(res, buf, end)
      }
      if (res.status < 200) {
        x.interim(res) // 100 Continue, 103 Early Hints: passed on, read on
        if (this.abandoned) return
        start = end
        continue
      }
      return this.startResponse(res, buf, end)
    }
  }

  // The final head `res` is in; buf from `end` on is the start of its body. An answer
  // the attempt retries elsewhere is dropped with its connection (its body unread).
  startResponse (res, buf, end) {
    const x = this.x
    if (x.answered(res.status, performance.now() - this.sentAt, res)) return
    this.frame(res, buf.length - end)
    const bodyless = this.bodyless
    const framed = this.reader !== null && !this.decode
    if (!x.respond(res, responseBody(bodyless, framed, this.untilClose))) return
    if (bodyless) return this.done()
    if (end < buf.length) this.forward(buf, end)
    x.flushHead()
  }

  // How the body of `res` is framed; `extra` bytes came after its head.
  frame (res, extra) {
    this.res = res
    if (res.chunked) {
      this.decode = this.x.compressing || !this.x.client.takesChunked(this.x)
      this.reader = new ChunkedReader(502, { keepTrailers: this.decode })
      if (this.decode) {
        const x = this.x
        this.sendDecoded = (b, s, e) => x.toClient(b.subarray(s, e))
      }
    } else if (res.bodyLength === -1) {
      this.untilClose = true
      this.reusable = false
    } else {
      this.left = res.bodyLength
    }
    // "Keep-Alive: timeout=5, max=100": how long and how often the connection may serve.
    if (res.keepAliveHint === null) {
      this.conn.answered(-1, -1)
    } else {
      const hint = parseKeepAlive(res.keepAliveHint)
      this.conn.answered(hint.timeout, hint.max)
    }
    if (!res.keepAlive) this.reusable = false
    if (this.bodyless && extra > 0) this.reusable = false // bytes after a complete response
  }

  get bodyless () {
    return this.reader === null && this.left === 0 && !this.untilClose
  }

  // Body bytes from buf[start], forwarded to the client up to the body's end.
  forward (buf, start) {
    const x = this.x
    let end = buf.length
    if (this.reader !== null) {
      let bodyEnd
      try {
        bodyEnd = this.reader.read(buf, start, end, this.sendDecoded)
      } catch (err) {
        return this.failed(err.message, 'invalid')
      }
      if (bodyEnd !== -1) {
        if (bodyEnd < end) this.reusable = false // bytes after the response: not a clean connection
        end = bodyEnd
      }
      if (!this.decode && end > start) x.toClient(view(buf, start, end))
      if (bodyEnd !== -1) this.done()
      return
    }
    if (this.untilClose) return x.toClient(view(buf, start, end))
    if (end - start > this.left) {
      this.reusable = false
      end = start + this.left
    }
    this.left -= end - start
    if (end > start) x.toClient(view(buf, start, end))
    if (this.left === 0) this.done()
  }

  // The response is complete: the connection goes back to its pool (or is closed), and
  // the exchange finishes, with the trailers of a decoded chunked body.
  done () {
    if (this.abandoned) return
    const conn = this.conn
    this.conn = null
    if (this.reusable && this.x.body.done) conn.pool.release(conn)
    else conn.destroy()
    const trailers = this.decode ? fieldsOfTrailers(this.reader.trailers) : null
    this.x.responseDone(trailers)
  }

  // A 101: raw bytes both ways from here on; the connection never goes back to the pool.
  startTunnel (res, buf, end) {
    const x = this.x
    this.tunnel = new Tunnel(x.client, this.conn)
    x.startTunnel(this.tunnel, res)
    if (end < buf.length) x.toClient(buf.subarray(end))
    this.tunnel.open()
  }
}

module.exports = { Http1Leg }
