'use strict'

const { performance } = require('perf_hooks')
const { isLocalShortage } = require('../../errors')
const { requestHead } = require('../http1/rewrite')
const { backendReason } = require('../../upstream/dial')
const { Response } = require('./response')
const { responseHeaders, trailerHeaders } = require('./headers')

const CRLF = '\r\n'

// A stream's request on an HTTP/1.1 backend: one leg of a StreamExchange
// (exchange.js), for one backend it was seated on. It takes a keep-alive connection
// from the backend's pool (http1/connection-pool.js, whose socket events come here),
// writes the head rewrite.js makes and the body, with its Content-Length or chunked
// (ending with the client's trailers), and reads the response (response.js) back into
// HTTP/2 headers, DATA and trailers through the exchange.
//
// The exchange drives it with start(), write(chunk), end(), pause()/resume() (its
// client's stream is full, or drained), abandon() and onSweep(limit); it reads
// `connected` and `gotBytes`. It reports with legConnected(), legDrained(), answered()
// and respond() for the final head, interim(), toClient(), responseDone(trailers),
// upstreamFailed(reason, cause, { reused }) and shortOf(err).
class Http1Leg {
  constructor (exchange, backend, { fresh = false } = {}) {
    this.exchange = exchange
    this.backend = backend
    this.newConnection = fresh // not a pooled one (the keep-alive race's retry)
    this.pool = exchange.listener.protocol.poolFor(backend)
    this.chunked = exchange.head.chunked // no Content-Length: the body goes chunked
    this.conn = null
    this.response = new Response(this, exchange.head)
    this.silentTicks = 0 // listener sweeps without a byte from the backend (--timeout)
    this.sentAt = 0
    this.abandoned = false
    this.dialing = null // a connection being opened for it (see start)
  }

  get connected () {
    return this.conn !== null
  }

  get gotBytes () {
    return this.response.gotBytes
  }

  // The pool has no queue of its own (http1/connection-pool.js): a connection now,
  // ready or being opened; one being opened is kept to close if the client leaves.
  start () {
    const conn = this.pool.acquire(this, { fresh: this.newConnection })
    if (this.conn !== conn) this.dialing = conn
  }

  // The connection is ready: the head, then the body held so far (all of it, on a
  // retry), and its end if it came.
  onUpstreamConnect (conn) {
    if (!conn.ready) return
    if (this.abandoned) return conn.destroy() // the client left while it connected
    this.dialing = null
    this.conn = conn
    this.silentTicks = 0
    const { exchange } = this
    const { rewrite } = exchange.listener.protocol
    const socket = conn.socket
    this.sentAt = performance.now()
    socket.cork()
    const { continued } = exchange
    socket.write(requestHead(exchange.head, exchange, this.backend.hostHeader, rewrite, { continued }), 'latin1')
    for (const piece of exchange.body.held()) this.frame(piece)
    if (exchange.body.done) this.finishBody()
    socket.uncork()
    exchange.legConnected()
  }

  frame (chunk) {
    const socket = this.conn.socket
    if (!this.chunked) return socket.write(chunk)
    socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1')
    socket.write(chunk)
    return socket.write(CRLF, 'latin1')
  }

  finishBody () {
    if (!this.chunked) return
    let out = '0\r\n'
    const trailers = this.exchange.clientTrailers
    if (trailers !== null) {
      for (let i = 0; i < trailers.length; i += 2) out += `${trailers[i]}: ${trailers[i + 1]}\r\n`
    }
    this.conn.socket.write(`${out}\r\n`, 'latin1')
  }

  // A piece of the client's body; false when the backend's socket is full.
  write (chunk) {
    this.silentTicks = 0 // a backend still being sent the request is not silent
    return this.frame(chunk)
  }

  end () {
    this.finishBody()
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
    return new Http1Leg(this.exchange, this.backend, { fresh: true })
  }

  // The listener's sweep (see Exchange#onSweep): not while lila holds the socket paused
  // for a client that does not read.
  onSweep (silentLimit) {
    const conn = this.conn
    if (conn === null || conn.socket.isPaused()) return
    if (++this.silentTicks >= silentLimit) this.onUpstreamTimeout(conn)
  }

  // The pooled connection's owner (http1/connection-pool.js).

  // What an HTTP/2 stream was written may wait in nghttp2 after its write completed, so
  // the bytes of a read are never said to be free (connection-pool.js READ).
  holdsRead () {
    return true
  }

  onUpstreamData (conn, chunk) {
    this.exchange.session.touch()
    this.silentTicks = 0
    this.response.read(chunk)
  }

  onUpstreamDrain () {
    this.exchange.legDrained()
  }

  onUpstreamEnd (conn) {
    if (this.response.ended()) this.responseDone()
  }

  onUpstreamClose (conn) {
    if (this.conn !== conn) return
    const reason = this.response.gotBytes
      ? 'closed the connection mid-response'
      : 'closed the connection without answering'
    this.failed(reason, 'closed')
  }

  onUpstreamError (conn, err) {
    if (this.conn !== null && this.conn !== conn) return
    if (this.abandoned) return
    if (isLocalShortage(err) && !this.exchange.responseStarted) {
      this.abandon()
      return this.exchange.shortOf(err)
    }
    this.failed(backendReason(err, conn.pool.tls), conn.ready ? 'reset' : 'connect', conn)
  }

  onUpstreamTimeout (conn) {
    if (!conn.ready) return this.failed('connect timed out', 'connect', conn)
    this.failed('timed out', 'timeout')
  }

  failed (reason, cause, conn = this.conn) {
    const reused = conn !== null && conn.reused
    this.exchange.upstreamFailed(reason, cause, { reused })
  }

  // The response (response.js).

  upstreamFailed (reason, cause) {
    this.failed(reason, cause)
  }

  interim (res) {
    this.exchange.interim(responseHeaders(res))
  }

  startResponse (res, buf, end) {
    const { exchange, response } = this
    if (exchange.answered(res.status, performance.now() - this.sentAt)) return // dropped: retried elsewhere
    response.frame(res, this.conn, buf.length - end)
    const how = { bodyless: response.bodyless, trailers: response.chunked, headBytes: headSize(res) }
    const headers = responseHeaders(res, response.chunked)
    const rules = exchange.listener.protocol.rewrite.response
    if (rules !== null) rules.apply(headers, exchange) // --set-response-header, --request-id
    if (!exchange.respond(headers, how)) return
    if (response.bodyless) return this.responseDone()
    if (end < buf.length) response.forward(buf, end)
  }

  toClient (piece) {
    this.exchange.toClient(piece)
  }

  responseDone () {
    const conn = this.conn
    this.conn = null
    if (this.response.reusable && this.exchange.body.done) conn.pool.release(conn)
    else conn.destroy()
    const { response } = this
    this.exchange.responseDone(response.chunked ? trailerHeaders(response.trailers) : null)
  }
}

// A response head's size as HTTP/1.1 writes it (the access log counts it).
function headSize (res) {
  const fields = res.fields
  let size = 17 // "HTTP/1.1 200 \r\n" and the empty line
  for (let i = 0; i < fields.length; i += 3) size += fields[i].length + fields[i + 2].length + 4
  return size
}

module.exports = { Http1Leg }
