'use strict'

const { constants } = require('http2')
const { performance } = require('perf_hooks')
const { reasonOf, HttpError } = require('../../errors')
const { Attempt } = require('../../upstream/attempt')
const { injectFault } = require('../injected')
const { requestRecord } = require('../request-record')
const { handlers, addListeners } = require('../socket-events')
const { StreamBody } = require('./request-body')
const { BUFFER_FIRST } = require('../http/request-body')
const { trailerFields } = require('./request')
const { replyOf } = require('./replies')
const { callType, deadlineFor } = require('../grpc')
const { Http1Leg } = require('./to-http1')
const { Http2Leg } = require('./to-http2')
const { requestIdOf } = require('../request-id')

const { NGHTTP2_NO_ERROR, NGHTTP2_PROTOCOL_ERROR, NGHTTP2_INTERNAL_ERROR } = constants

// The access log's status when the client went away before any of its response.
const CLIENT_CLOSED = 499
// A response complete before the client's body: the rest of the body is read and
// dropped for this long, then the stream is reset (as http1/session.js lingers).
const LINGER_MS = 2000

// Stream handlers shared by every exchange (socket-events.js): `this` is the
// Http2Stream, which carries its exchange.
const RESPONSE = {
  drain () { this.exchange.onClientDrain() },
  wantTrailers () { this.exchange.onWantTrailers() },
  error (err) { this.exchange.onClientError(err) },
  close () { this.exchange.onClientClose() }
}
const STREAM = handlers({
  data (chunk) { this.exchange.onClientData(chunk) },
  end () { this.exchange.onClientEnd() },
  trailers (headers) { this.exchange.onClientTrailers(headers) },
  ...RESPONSE
})
// A request whose headers ended its stream (GET, HEAD, ...) has no body to read, and
// its readable side is left unread: Node then destroys the stream a tick after it
// closes, not at once, so the write of the response's last DATA completes first.
// Destroyed before that write's callback, Node 20's Writable builds and throws away an
// ERR_STREAM_DESTROYED per stream (errorBuffer), a tenth of lila's time in H1.
const BODYLESS_STREAM = handlers(RESPONSE)

// One HTTP/2 stream: one request, balanced on its own exactly as an HTTP/1.1 request
// is (http1/exchange.js, of which this is the stream-level counterpart): an Attempt
// picks the backend, queues, retries and blames; on the backend it is seated on, a leg
// carries the request and its response: to-http1.js over a pooled HTTP/1.1
// connection, to-http2.js as a stream of a pooled HTTP/2 session
// (--backend-protocol h2). The response comes back as HTTP/2 headers, DATA and trailers, with
// back-pressure both ways (a stream the client does not read pauses the leg; a backend
// that does not read pauses the stream, and HTTP/2 flow control stops the client).
// lila's own answers (502, 503, 504, ...) are HTTP/2 responses; a failure after the
// response started resets the stream (INTERNAL_ERROR), never the connection, which
// other streams share.
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
    this.stickTo = session.listener.protocol.sticky.keys(head) // ctx for --sticky (upstream.js)
    const { idHeader } = this.listener.protocol.rewrite
    this.requestId = idHeader === null ? null : requestIdOf(head, idHeader) // --request-id
    this.grpc = callType(head, this.listener.protocol.grpc) // a gRPC call: its content-type
    this.deadline = null // the call's grpc-timeout (grpc.js Deadline), once started
    this.body = new StreamBody(head, this.grpc !== null)
    this.clientTrailers = null // the request's trailers, [name, value, ...]
    this.reading = !this.body.done // the client's DATA is still to come
    this.buffering = false // reading a small body before taking a backend (see start)
    this.continued = false // lila answered the client's expect: 100-continue itself
    this.quietTicks = 0 // listener sweeps without DATA from the client (--body-timeout)
    this.shadow = null // its copy for --mirror (proxy/mirror.js), or null

    // Where it goes.
    this.route = this.listener.routeFor(head) // null: no route matches (404)
    this.attempt = new Attempt((this.route || this.listener.own).upstream, this, this, { perRequest: true })
    this.leg = null // the request on the backend it is seated on
    this.lastStatus = 502
    this.backendAnswered = false // the response is a backend's (not lila's own)

    // What the client got.
    this.responseStarted = false
    this.responseStatus = 0
    this.responseTrailers = null
    this.bytesOut = 0
    this.done = false
    this.replied = 0
    this.openedAt = performance.now()
    stream.exchange = this
    addListeners(stream, this.body.done ? BODYLESS_STREAM : STREAM)
  }

  // The request's head as HTTP/1.1 would write it, and its body.
  get bytesIn () {
    return this.head.size + this.body.received
  }

  start () {
    const refused = this.listener.protocol.refusal(this)
    if (refused !== null) return this.answer(...refused)
    this.deadline = deadlineFor(this)
    const { mirror } = this.listener
    if (mirror !== null) this.shadow = mirror.start(this.head, this, this.body.done)
    // A small body is read whole first, as for HTTP/1.1 (http1/exchange.js start): a
    // client that sends it slowly holds no backend connection meanwhile. Only with a
    // content-length: without one it may be a stream (gRPC) answered as it goes.
    const { length } = this.body
    if (this.body.done || length === -1 || length > BUFFER_FIRST) return this.attempt.start()
    this.buffering = true
    // A client that waits for 100 Continue before its body gets it from lila, which
    // reads the body now; the backend is then not sent the Expect.
    if (this.head.expect === '100-continue') {
      this.continued = true
      this.stream.additionalHeaders({ ':status': 100 })
    }
  }

  // The body is read, or more of it than is worth holding: now a backend.
  bodyBuffered () {
    this.buffering = false
    this.attempt.start()
  }

  // The attempt's owner (upstream/attempt.js), as Exchange.

  unserved (queueReason, exhausted) {
    const { attempt } = this
    if (attempt.attempts === 0) {
      this.listener.countUnserved()
      const detail = queueReason === null ? 'no backend available' : `no backend available (${queueReason})`
      return this.answer(503, detail, { retryAfter: 5, exhausted })
    }
    this.answer(this.lastStatus, attempt.failure)
  }

  seated (lease) {
    const Leg = this.listener.protocol.backendProtocol === 'h2' ? Http2Leg : Http1Leg
    this.leg = new Leg(this, lease.backend)
    this.leg.start()
  }

  // A fault injected on the backend seated (attempt.js), as Exchange; a reset resets
  // this stream, not the connection other streams share.
  injected (fault) {
    injectFault(this, fault, () => {
      this.reset(NGHTTP2_INTERNAL_ERROR)
      this.finish()
    })
  }

  // The leg failed: `cause` says how (see Backend.failed; 'connect': before the request
  // went out). Before any response byte the attempt retries where safe; `reused`: on a
  // connection that had served before, which may be the keep-alive race, tried once
  // more on a fresh one to the same backend. After the response started, only this
  // stream is reset.
  upstreamFailed (reason, cause, { reused = false } = {}) {
    if (this.done) return
    const { attempt } = this
    const leg = this.leg
    this.leg = null
    leg.abandon()
    const backend = attempt.backend
    const status = cause === 'timeout' ? 504 : 502
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
    // 'connect': the backend did not process it (not connected, or it refused the
    // stream): whatever was sent may go again.
    const replayable = !leg.gotBytes && (cause === 'connect' ? this.body.kept : this.body.canReplay())
    if (reused && cause !== 'timeout' && replayable && attempt.retryFresh()) {
      log.debug(`${backend.address}: reused connection ${reason}; retrying on a fresh one`)
      this.leg = leg.again()
      return this.leg.start()
    }
    this.lastStatus = status
    const sent = cause !== 'connect'
    const retried = attempt.failed(reason, { cause, sent, replayable, bytesIn: this.bytesIn })
    if (retried) log.debug(`${backend.address} ${reason}; retrying ${this.head.method} ${this.path} elsewhere`)
    else this.answer(status, attempt.failure)
  }

  // lila itself could not open a backend connection (out of descriptors).
  shortOf (err) {
    this.leg = null
    this.attempt.shortage(this.bytesIn)
    this.listener.short(err, 'cannot open a backend connection')
    this.answer(503, `lila is short of resources (${reasonOf(err)})`, { retryAfter: 5, quiet: true })
  }

  abandonUpstream () {
    const leg = this.leg
    this.leg = null
    if (leg !== null) leg.abandon()
    this.attempt.cancel()
  }

  releaseLease () {
    this.attempt.release(this.bytesIn, this.bytesOut)
  }

  // The leg is connected and sent what was held: the client's body flows again.
  legConnected () {
    this.body.sent()
    if (this.reading) this.stream.resume()
  }

  // The backend took what it was sent: read the client on.
  legDrained () {
    if (this.reading) this.stream.resume()
  }

  // The request body, from the client's stream.

  onClientData (chunk) {
    if (this.done) return
    this.session.touch()
    this.quietTicks = 0
    const { body, leg } = this
    if (body.overflows(chunk)) return this.clientBodyFailed('more DATA than its Content-Length')
    if (this.shadow !== null) this.shadow.body(chunk)
    const holdingEnough = body.add(chunk)
    if (leg === null || !leg.connected) {
      // Still reading a small body, connecting or queued: held, and the stream paused
      // once holding enough.
      if (this.buffering && holdingEnough) this.bodyBuffered()
      if (holdingEnough) this.stream.pause()
      return
    }
    body.sent()
    if (!leg.write(chunk)) this.stream.pause()
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
    if (this.shadow !== null) this.shadow.end()
    if (this.buffering) return this.bodyBuffered() // the leg ends it once connected
    const { leg } = this
    if (leg !== null && leg.connected) leg.end() // else the leg ends it once connected
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
    if (this.leg !== null) this.leg.resume()
  }

  onClientError (err) {
    this.listener.log.debug(`HTTP/2 stream from ${this.clientAddress}: ${reasonOf(err)}`)
  }

  // The stream is gone (the client reset it, or the connection closed): drop the
  // backend side and release the count, as for an HTTP/1.1 client that left.
  onClientClose () {
    if (this.done) return
    this.abandonUpstream()
    this.releaseLease()
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    this.logged()
    this.session.exchangeDone(this)
    if (!this.responseStarted) this.session.clientReset(performance.now() - this.openedAt)
  }

  awaitingBackend () {
    return this.body.done && !this.responseStarted && !this.done
  }

  // The listener's sweep: the leg's backend silent for --timeout; a request body that
  // sent nothing for --body-timeout (not while lila holds the stream paused) is
  // answered 408, and its backend side dropped.
  onSweep (silentLimit, bodyLimit) {
    if (this.reading && !this.done && !this.stream.isPaused() && ++this.quietTicks >= bodyLimit) {
      this.buffering = false
      this.abandonUpstream()
      this.releaseLease()
      if (!this.responseStarted) return this.answer(408, 'request body timed out: no byte of it within --body-timeout')
      this.reset(NGHTTP2_PROTOCOL_ERROR)
      return this.finish()
    }
    if (this.leg !== null) this.leg.onSweep(silentLimit)
  }

  // The response, from the leg to the client's stream.

  // A 1xx from the backend: interim headers.
  interim (headers) {
    if (this.done || this.stream.destroyed) return
    try {
      this.stream.additionalHeaders(headers)
    } catch (err) {
      const from = this.attempt.backend.address
      this.listener.log.debug(`${headers[':status']} from ${from} not passed on: ${err.message}`)
    }
  }

  // The backend's final status: judged by the attempt. True when it is dropped, the
  // request retried elsewhere (the leg it came on is abandoned).
  answered (status, latencyMs) {
    const leg = this.leg
    const how = { replayable: this.body.canRepeat(), bytesIn: this.bytesIn, latencyMs }
    this.lastStatus = status
    if (!this.attempt.answered(status, how)) return false
    leg.abandon()
    return true
  }

  // The final head goes to the client. `bodyless`: it ends the stream; `trailers`: a
  // body whose trailers may come (the stream waits for them). False when it cannot
  // (the client left, or the head cannot be said in HTTP/2).
  respond (headers, { bodyless, trailers, headBytes }) {
    const { stream } = this
    if (stream.destroyed || stream.closed) { // reset by the client meanwhile
      this.onClientClose()
      return false
    }
    this.listener.protocol.sticky.headers(this, headers) // --sticky's Set-Cookie
    try {
      stream.respond(headers, { endStream: bodyless, waitForTrailers: trailers && !bodyless })
    } catch (err) {
      this.upstreamFailed(`sent a response HTTP/2 cannot carry (${err.message})`, 'invalid')
      return false
    }
    this.responseStarted = true
    this.backendAnswered = true
    this.responseStatus = headers[':status']
    if (this.shadow !== null) this.shadow.primaryStatus(this.responseStatus)
    this.bytesOut += headBytes
    return true
  }

  toClient (piece) {
    if (this.done) return
    this.bytesOut += piece.length
    if (this.shadow !== null) this.shadow.primaryBody(piece)
    if (!this.stream.write(piece) && this.leg !== null) this.leg.pause()
  }

  // The response is complete (the leg gave its connection back); `trailers`, an
  // HTTP/2 header object, or null.
  responseDone (trailers) {
    this.leg = null
    if (this.shadow !== null) this.shadow.primaryDone()
    this.releaseLease()
    const { stream } = this
    if (!stream.writableEnded && !stream.destroyed) { // not a bodyless response (endStream)
      this.responseTrailers = trailers
      stream.end() // then wantTrailers, when the stream waits for them
    }
    this.finish()
  }

  // The body is all sent: the trailers (or none) end the stream.
  onWantTrailers () {
    try {
      this.stream.sendTrailers(this.responseTrailers || {})
    } catch (err) {
      this.listener.log.debug(`trailers from ${this.attempt.lastBackend} not passed on: ${err.message}`)
      this.reset(NGHTTP2_INTERNAL_ERROR)
    }
  }

  // lila answers the request itself (error statuses).
  answer (status, detail, { retryAfter = 0, quiet = false, exhausted = false } = {}) {
    const { head, stream } = this
    if (status >= 500 && !quiet) {
      this.listener.log.warn(`${status} for ${head.method} ${this.path} from ${this.clientAddress}: ${detail}`)
    }
    this.responseStarted = true
    this.replied = status
    if (!stream.destroyed && !stream.headersSent) {
      const rules = this.listener.protocol.rewrite.response
      const options = { retryAfter, head: head.method === 'HEAD', grpc: this.grpc, exhausted, rules, ctx: this }
      const { headers, body } = replyOf(status, detail, options)
      try {
        // No body: the headers end the stream (a gRPC client reads them as trailers).
        stream.respond(headers, { endStream: body.length === 0 })
        if (body.length > 0) stream.end(body)
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
    if (this.deadline !== null) this.deadline.clear()
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
    protocol.stats.count(this.status, this.backendAnswered ? this.attempt.backend : null, ms)
    if (accessLog !== null) accessLog.log(requestRecord(this, ms))
  }

  get status () {
    if (this.backendAnswered) return this.responseStatus
    return this.replied || CLIENT_CLOSED
  }

  // What the access log (access-log.js) prints of this request, as Exchange#record.
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

module.exports = { StreamExchange, linger }
