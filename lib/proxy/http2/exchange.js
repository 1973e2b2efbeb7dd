'use strict'

const { constants } = require('http2')
const { performance } = require('perf_hooks')
const { reasonOf, isLocalShortage, HttpError } = require('../../errors')
const { requestHead, viaLoops } = require('../http1/rewrite')
const { Attempt } = require('../../upstream/attempt')
const { backendReason } = require('../../upstream/dial')
const { handlers, addListeners } = require('../socket-events')
const { StreamBody } = require('./request-body')
const { Response } = require('./response')
const { responseHeaders, trailerHeaders } = require('./headers')
const { trailerFields } = require('./request')
const { replyOf } = require('./replies')

const { NGHTTP2_NO_ERROR, NGHTTP2_PROTOCOL_ERROR, NGHTTP2_INTERNAL_ERROR } = constants

// The access log's status when the client went away before any of its response.
const CLIENT_CLOSED = 499
// A response complete before the client's body: the rest of the body is read and
// dropped for this long, then the stream is reset (as http1/session.js lingers).
const LINGER_MS = 2000

// Stream handlers shared by every exchange (socket-events.js): `this` is the
// Http2Stream, which carries its exchange.
const STREAM = handlers({
  data (chunk) { this.exchange.onClientData(chunk) },
  end () { this.exchange.onClientEnd() },
  trailers (headers) { this.exchange.onClientTrailers(headers) },
  drain () { this.exchange.onClientDrain() },
  wantTrailers () { this.exchange.onWantTrailers() },
  error (err) { this.exchange.onClientError(err) },
  close () { this.exchange.onClientClose() }
})

// One HTTP/2 stream: one request, balanced on its own exactly as an HTTP/1.1 request
// is (http1/exchange.js, of which this is the stream-level counterpart): an Attempt
// picks the backend, queues, retries and blames; a pooled HTTP/1.1 connection
// (http1/connection-pool.js, whose socket events come here) gets the head rewrite.js
// makes and the body (request-body.js); the response (response.js) comes back as
// HTTP/2 headers, DATA and trailers, with back-pressure both ways (a stream the client
// does not read pauses the backend connection; a backend that does not read pauses
// the stream, and HTTP/2 flow control stops the client). lila's own answers (502, 503,
// 504, ...) are HTTP/2 responses; a failure after the response started resets the
// stream (INTERNAL_ERROR), never the connection, which other streams share.
//
// Its Http2Session (session.js) gives it the stream and hears exchangeDone(); the
// session's `clientAddress`, touch() (not idle) and the listener's sweep (onSweep)
// serve it as an HTTP/1.1 session serves an Exchange.
class StreamExchange {
  constructor (session, stream, head) {
    this.session = session
    this.listener = session.listener
    this.stream = stream
    this.head = head
    this.clientAddress = session.clientAddress // ctx for ip-hash
    this.path = head.path // ctx for uri-hash
    this.body = new StreamBody(head)
    this.clientTrailers = null // the request's trailers, [name, value, ...]
    this.response = new Response(this, head)
    this.reading = !this.body.done // the client's DATA is still to come

    // Where it goes.
    this.attempt = new Attempt(this.listener.upstream, this, this, { perRequest: true })
    this.sentAt = 0
    this.lastStatus = 502
    this.silentTicks = 0
    this.conn = null
    this.upstreamHead = null

    // What the client got.
    this.responseStarted = false
    this.responseTrailers = null
    this.bytesOut = 0
    this.done = false
    this.replied = 0
    this.openedAt = performance.now()
    stream.exchange = this
    addListeners(stream, STREAM)
  }

  // The request's head as HTTP/1.1 would write it, and its body.
  get bytesIn () {
    return this.head.size + this.body.received
  }

  start () {
    const { via } = this.listener.protocol
    if (viaLoops(this.head, via)) return this.answer(508, `request already passed through this lila (Via: ${via})`)
    this.attempt.start()
  }

  // The attempt's owner (upstream/attempt.js), as Exchange.

  unserved (queueReason) {
    const { attempt } = this
    if (attempt.attempts === 0) {
      this.listener.countUnserved()
      const detail = queueReason === null ? 'no backend available' : `no backend available (${queueReason})`
      return this.answer(503, detail, { retryAfter: 5 })
    }
    this.answer(this.lastStatus, attempt.failure)
  }

  seated (lease) {
    this.upstreamHead = null
    if (this.attempt.attempts > 1) this.response = new Response(this, this.head)
    this.listener.protocol.poolFor(lease.backend).acquire(this)
  }

  // The backend connection failed (see Exchange#upstreamFailed). After the response
  // started, only this stream is reset.
  upstreamFailed (reason, cause, conn = this.conn) {
    if (this.done) return
    const { attempt } = this
    const backend = attempt.backend
    const status = cause === 'timeout' ? 504 : 502
    if (conn !== null) conn.destroy()
    this.conn = null
    const { log } = this.listener
    if (this.responseStarted) {
      const request = `${this.head.method} ${this.path} from ${this.clientAddress}`
      log.warn(`${request}: backend ${backend.address} ${reason}; HTTP/2 stream reset`)
      attempt.blame(reason, cause)
      this.releaseLease()
      this.reset(NGHTTP2_INTERNAL_ERROR)
      this.finish()
      return
    }
    const replayable = !this.response.gotBytes && this.body.canReplay()
    if (conn !== null && conn.reused && cause !== 'timeout' && replayable && attempt.retryFresh()) {
      log.debug(`${backend.address}: reused connection ${reason}; retrying on a fresh one`)
      return conn.pool.acquire(this, { fresh: true })
    }
    this.lastStatus = status
    const sent = cause !== 'connect'
    const retried = attempt.failed(reason, { cause, sent, replayable, bytesIn: this.bytesIn })
    if (retried) log.debug(`${backend.address} ${reason}; retrying ${this.head.method} ${this.path} elsewhere`)
    else this.answer(status, attempt.failure)
  }

  shortOf (conn, err) {
    conn.destroy()
    this.conn = null
    this.attempt.shortage(this.bytesIn)
    this.listener.sayShortage(`cannot open a backend connection: ${reasonOf(err)}`)
    this.answer(503, `lila is short of resources (${reasonOf(err)})`, { retryAfter: 5, quiet: true })
  }

  abandonUpstream () {
    const conn = this.conn
    this.conn = null
    if (conn !== null) {
      conn.destroy()
    } else if (this.attempt.backend !== null) {
      this.listener.protocol.poolFor(this.attempt.backend).cancel(this)
    }
    this.attempt.cancel()
  }

  releaseLease () {
    this.attempt.release(this.bytesIn, this.bytesOut)
  }

  // The pooled connection's owner (http1/connection-pool.js).

  onUpstreamConnect (conn) {
    if (!conn.ready) return
    this.conn = conn
    this.silentTicks = 0
    if (this.upstreamHead === null) {
      const { rewrite } = this.listener.protocol
      this.upstreamHead = requestHead(this.head, this.clientAddress, this.attempt.backend.address, rewrite)
    }
    this.sentAt = performance.now()
    const socket = conn.socket
    socket.cork()
    socket.write(this.upstreamHead, 'latin1')
    this.body.replay(socket)
    socket.uncork()
    if (this.reading) this.stream.resume()
  }

  onUpstreamData (conn, chunk) {
    this.session.touch()
    this.silentTicks = 0
    this.response.read(chunk)
  }

  onUpstreamDrain () {
    if (this.reading) this.stream.resume()
  }

  onUpstreamEnd (conn) {
    if (this.response.ended()) this.responseDone()
  }

  onUpstreamClose (conn) {
    if (this.conn !== conn) return
    const reason = this.response.gotBytes
      ? 'closed the connection mid-response'
      : 'closed the connection without answering'
    this.upstreamFailed(reason, 'closed')
  }

  onUpstreamError (conn, err) {
    if (this.conn !== null && this.conn !== conn) return
    if (isLocalShortage(err) && !this.responseStarted) return this.shortOf(conn, err)
    this.upstreamFailed(backendReason(err, conn.pool.tls), conn.ready ? 'reset' : 'connect', conn)
  }

  onUpstreamTimeout (conn) {
    if (!conn.ready) return this.upstreamFailed('connect timed out', 'connect', conn)
    this.upstreamFailed('timed out', 'timeout')
  }

  // The request body, from the client's stream.

  onClientData (chunk) {
    if (this.done) return
    this.session.touch()
    if (this.body.overflows(chunk)) return this.clientBodyFailed('more DATA than its Content-Length')
    const framed = this.body.frame(chunk)
    if (framed === chunk) return this.sendBody(chunk)
    for (const piece of framed) this.sendBody(piece)
  }

  sendBody (piece) {
    const holdingEnough = this.body.keep(piece)
    if (this.conn === null) {
      // Still connecting (or queued): hold it, and stop reading once holding enough.
      if (holdingEnough) this.stream.pause()
      return
    }
    this.body.sent()
    this.silentTicks = 0 // a backend still being sent the request is not silent
    if (!this.conn.socket.write(piece)) this.stream.pause()
  }

  onClientTrailers (headers) {
    if (this.done) return
    try {
      this.clientTrailers = trailerFields(headers)
    } catch (err) {
      if (!(err instanceof HttpError)) throw err
      this.clientBodyFailed(err.message)
    }
  }

  onClientEnd () {
    if (this.done || !this.reading) return
    this.reading = false
    this.session.touch()
    if (!this.body.end()) return this.clientBodyFailed('the body ended short of its Content-Length')
    const last = this.body.last(this.clientTrailers)
    if (last !== null) this.sendBody(last)
  }

  // The request cannot be completed (its body contradicts its framing): the stream is
  // reset as malformed (RFC 9113 8.1.1).
  clientBodyFailed (detail) {
    this.listener.log.debug(`HTTP/2 stream from ${this.clientAddress} reset: ${detail}`)
    this.reading = false
    this.abandonUpstream()
    this.releaseLease()
    if (!this.responseStarted) this.replied = 400
    this.reset(NGHTTP2_PROTOCOL_ERROR)
    this.finish()
  }

  onClientDrain () {
    if (this.conn !== null) this.conn.socket.resume()
  }

  onClientError (err) {
    this.listener.log.debug(`HTTP/2 stream from ${this.clientAddress}: ${reasonOf(err)}`)
  }

  // The stream is gone (the client reset it, or the connection closed): drop the
  // backend connection and release the count, as for an HTTP/1.1 client that left.
  onClientClose () {
    if (this.done) return
    this.abandonUpstream()
    this.releaseLease()
    this.done = true
    this.logged()
    this.session.exchangeDone(this)
  }

  awaitingBackend () {
    return this.body.done && !this.responseStarted && !this.done
  }

  // The listener's sweep (see Exchange#onSweep).
  onSweep (silentLimit) {
    const conn = this.conn
    if (conn === null || conn.socket.isPaused()) return
    if (++this.silentTicks >= silentLimit) this.onUpstreamTimeout(conn)
  }

  // The response, to the client's stream.

  // A 1xx from the backend: interim headers.
  interim (res) {
    if (this.done || this.stream.destroyed) return
    try {
      this.stream.additionalHeaders(responseHeaders(res))
    } catch (err) {
      this.listener.log.debug(`${res.status} from ${this.attempt.backend.address} not passed on: ${err.message}`)
    }
  }

  startResponse (res, buf, end) {
    const { response, conn, stream } = this
    const how = { replayable: this.body.canRepeat(), bytesIn: this.bytesIn, latencyMs: performance.now() - this.sentAt }
    this.lastStatus = res.status
    if (this.attempt.answered(res.status, how)) {
      if (this.conn === conn) this.conn = null
      conn.destroy()
      return
    }
    response.frame(res, conn, buf.length - end)
    if (stream.destroyed || stream.closed) return this.onClientClose() // reset by the client meanwhile
    try {
      stream.respond(responseHeaders(res, response.chunked), {
        endStream: response.bodyless,
        waitForTrailers: response.chunked && !response.bodyless
      })
    } catch (err) {
      return this.upstreamFailed(`sent a response HTTP/2 cannot carry (${err.message})`, 'invalid')
    }
    this.responseStarted = true
    this.bytesOut += headSize(res)
    if (response.bodyless) return this.responseDone()
    if (end < buf.length) response.forward(buf, end)
  }

  toClient (piece) {
    if (this.done) return
    this.bytesOut += piece.length
    if (!this.stream.write(piece) && this.conn !== null) this.conn.socket.pause()
  }

  responseDone () {
    const conn = this.conn
    this.conn = null
    if (this.response.reusable && this.body.done) conn.pool.release(conn)
    else conn.destroy()
    this.releaseLease()
    const { response, stream } = this
    if (!stream.writableEnded && !stream.destroyed) { // not a bodyless response (endStream)
      if (response.chunked) this.responseTrailers = trailerHeaders(response.trailers)
      stream.end() // then wantTrailers, for a chunked body
    }
    this.finish()
  }

  // A chunked response's body is all sent: its trailers (or none) end the stream.
  onWantTrailers () {
    try {
      this.stream.sendTrailers(this.responseTrailers || {})
    } catch (err) {
      this.listener.log.debug(`trailers from ${this.attempt.lastBackend} not passed on: ${err.message}`)
      this.reset(NGHTTP2_INTERNAL_ERROR)
    }
  }

  // lila answers the request itself (error statuses).
  answer (status, detail, { retryAfter = 0, quiet = false } = {}) {
    const { head, stream } = this
    if (status >= 500 && !quiet) {
      this.listener.log.warn(`${status} for ${head.method} ${this.path} from ${this.clientAddress}: ${detail}`)
    }
    this.responseStarted = true
    this.replied = status
    if (!stream.destroyed && !stream.headersSent) {
      const { headers, body } = replyOf(status, detail, { retryAfter, head: head.method === 'HEAD' })
      try {
        stream.respond(headers)
        stream.end(body)
        this.bytesOut += body.length
      } catch (err) {
        this.listener.log.debug(`${status} to ${this.clientAddress} not sent: ${err.message}`)
      }
    }
    this.finish()
  }

  reset (code) {
    if (!this.stream.destroyed) this.stream.close(code)
  }

  finish () {
    if (this.done) return
    this.done = true
    if (this.reading) {
      this.reading = false
      linger(this.stream)
    }
    this.logged()
    this.session.exchangeDone(this)
  }

  // Once per stream: counted (http1/response-stats.js) and written to the access log.
  logged () {
    const { accessLog, protocol } = this.listener
    const ms = performance.now() - this.openedAt
    protocol.stats.count(this.status, this.response.head !== null ? this.attempt.backend : null, ms)
    if (accessLog !== null) accessLog.log(this.record(ms))
  }

  get status () {
    if (this.response.head !== null) return this.response.head.status
    return this.replied || CLIENT_CLOSED
  }

  // What the access log (access-log.js) prints of this request, as Exchange#record.
  record (ms) {
    const { head, attempt } = this
    return {
      listener: this.listener.name,
      protocol: 'http',
      client: this.clientAddress,
      backend: attempt.backend !== null ? attempt.backend.address : attempt.lastBackend,
      method: head.method,
      target: head.target,
      version: 'HTTP/2.0',
      status: this.status,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      ms,
      host: head.host,
      referer: fieldOf(head, 'referer'),
      userAgent: fieldOf(head, 'user-agent')
    }
  }
}

// Answered before the client finished its body, which is not wanted: RFC 9113 8.1 has
// the server reset the stream (NO_ERROR) after its complete response. Node says when
// the response was handed to nghttp2, not when it left, and a reset drops what has not
// left; so the rest of the body is read and dropped (the stream's data handler drops
// it once the exchange is done) and the stream reset only if the client still sends
// after LINGER_MS, when the response has long left.
function linger (stream) {
  if (stream.destroyed) return
  stream.resume()
  const timer = setTimeout(() => { if (!stream.destroyed) stream.close(NGHTTP2_NO_ERROR) }, LINGER_MS)
  stream.once('close', () => clearTimeout(timer))
}

// A response head's size as HTTP/1.1 writes it (HTTP/2 compresses it; the access log
// counts what it says).
function headSize (res) {
  const fields = res.fields
  let size = 17 // "HTTP/1.1 200 \r\n" and the empty line
  for (let i = 0; i < fields.length; i += 3) size += fields[i].length + fields[i + 2].length + 4
  return size
}

function fieldOf (head, lower) {
  const fields = head.fields
  for (let i = 1; i < fields.length; i += 3) if (fields[i] === lower) return fields[i + 1]
  return null
}

module.exports = { StreamExchange, linger }
