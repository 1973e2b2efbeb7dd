'use strict'

const { performance } = require('perf_hooks')
const { recorded } = require('./request-record')
const { requestIdOf } = require('./request-id')
const { callType } = require('../message/grpc')
const { deadlineFor } = require('./deadline')
const { requestBody, BUFFER_FIRST } = require('./request-body')
const { ExchangeResponse } = require('./exchange-response')
const { admit, overSize } = require('./admission')
const { Forwarding } = require('./forwarding')

const CLIENT_CLOSED = 499 // the client went away before any response: nginx's "client closed request"

// One request and its response, whichever protocol the client and the backend speak:
// the one place that knows a request's life. It balances it (an Attempt: pick, queue,
// retry, blame), sends it on through a leg to the backend seated, and passes the
// response back; it answers itself where lila must (502, 503, 504, 429, ..., gRPC-shaped
// for calls), applies the limits, copies it for --mirror, sets the sticky cookie, and
// counts and logs it, once. Its client and its leg are the interfaces of interfaces.js.
// Before any backend, admission.js decides whether it goes on (admit); the way to a
// backend and what a failure there makes of it is forwarding.js's; the response's way
// back to the client is exchange-response.js's, the class it extends.
//
// An HTTP/1.1 connection's exchanges are one object, made new for each request (begin;
// docs/design.md says why), once the last one is over and holds nothing that could
// call it later (reusable); `generation` tells its requests apart.
class Exchange extends ExchangeResponse {
  // The fields begin sets, declared here so that V8 keeps them in the object itself:
  // set only by a method, they went to an array of their own (24 bytes more an
  // exchange; each waiting HTTP/2 stream holds one, bench/README.md).
  client; stream; listener; head; clientAddress; path; stickTo; requestId; headBytes
  grpc; deadline; body; clientTrailers; reading; buffering; continued; quietTicks
  shadow; route; pool; rules; sent; traceId; grant; plan; compressed; canary
  side; attempt; tunnel; res; responseStarted; cut; bytesOut; done; replied; openedAt
  trace

  constructor (client, head, headBytes, stream = null) {
    super()
    this.generation = 0 // its requests so far, less one (begin)
    this.forwarding = null
    this.begin(client, head, headBytes, stream)
  }

  // The request `head` (its head `headBytes` long) from `client`, in this exchange: a
  // new one, or one whose last request is over and that is reusable.
  begin (client, head, headBytes, stream = null) {
    if (this.forwarding !== null) this.generation++
    this.client = client
    this.stream = stream // the HTTP/2 stream it came on (wire/h2/stream.js), or null
    const listener = this.listener = client.listener
    const { protocol } = listener
    this.head = head
    this.clientAddress = client.clientAddress // ctx for ip-hash
    this.path = head.path // ctx for uri-hash
    this.stickTo = protocol.sticky.keys(head) // ctx for --sticky (upstream.js)
    const { idHeader } = protocol.rewrite
    this.requestId = idHeader === null ? null : requestIdOf(head, idHeader) // --request-id
    this.headBytes = headBytes
    this.grpc = callType(head, protocol.grpc) // a gRPC call: its content-type
    this.deadline = null // the call's grpc-timeout (deadline.js), once started
    // An HTTP/1.1 client's chunked body goes to an HTTP/1.1 backend as it came, its
    // framing checked, not taken apart.
    const framed = head.chunked && client.chunkedPieces && protocol.backendProtocol === 'h1'
    this.body = requestBody(head.method, head.bodyLength, head.bodyLength === 0, this.grpc !== null, framed)
    this.clientTrailers = null // the request's trailers: fields as in a head, or null
    this.reading = !this.body.done // the client's body (or a tunnel's bytes) still to come
    this.buffering = false // reading a small body before taking a backend (see start)
    this.continued = false // lila answered the client's Expect: 100-continue itself
    this.quietTicks = 0 // listener sweeps without a body byte from the client (--body-timeout)
    this.shadow = null // its copy for --mirror (proxy/http/mirror.js), or null

    // Where it goes.
    this.route = listener.routeFor(head) // null: no route matches (404)
    // The rules at the edge of the pool it goes to (edge/rules.js), or null: none.
    const pool = this.pool = this.route || listener.own
    this.rules = pool.rules
    this.sent = head // the head as it goes on: a copy a rule edited, or the client's
    this.traceId = null // --trace: the request's trace ID
    this.grant = null // --forward-auth's 2xx: the fields it lets the request in with (a Map), or null
    this.plan = null // what a rule does to the response: responseTransform's
    this.compressed = null // its body on the way compressed (edge-calls.js CompressedBody)
    this.canary = pool.canary // --canary (proxy/canary.js) beside the pool, or null; the side chosen
    this.side = this.canary === null ? null : this.canary.choose(head.fields)
    const upstream = this.side === null ? pool.upstream : this.canary.upstreamOf(this.side, pool.upstream)
    // Its attempt, and the leg on the backend seated.
    if (this.forwarding === null) this.forwarding = new Forwarding(this, upstream)
    else this.forwarding.renew(upstream)
    this.attempt = this.forwarding.attempt
    this.tunnel = null // a Tunnel (http1/tunnel.js), once an HTTP/1.1 backend switched protocols

    // What the client got.
    this.res = null // the backend's final response head, once passed on
    this.responseStarted = false // some byte of the final response is the client's
    this.cut = null // who cut the response after it started: 'backend', 'client' or 'lila'
    this.bytesOut = 0
    this.done = false
    this.replied = 0 // the status lila answered itself, if it did
    this.openedAt = performance.now() // for the request-time histogram and the access log
    // --otlp: its spans (exchange-trace.js), or null
    // Required here: the telemetry modules load only when tracing is on (ARCHITECTURE.md).
    const { tracer } = listener
    this.trace = tracer === null ? null : new (require('./exchange-trace').ExchangeTrace)(tracer, this)
    if (this.trace !== null) this.traceId = this.trace.traceId
    return this
  }

  // Over, and nothing of it left that could call it later: a backend answered (so no
  // check at the edge is pending), its leg gave its connection back, its deadline and
  // any fault's hold were cleared (ended, attempt.release), and it had no copy for
  // --mirror, no span, no compressor and no tunnel, whose events come when they will.
  get reusable () {
    return this.done && this.res !== null && this.forwarding.leg === null && this.shadow === null &&
      this.trace === null && this.compressed === null && this.tunnel === null && this.attempt.waiter === null
  }

  // Kept for the connection's next request (reusable): the bytes it held of this one's
  // body, for a replay no longer possible, go now, not when the next request comes.
  shelve () {
    if (this.body.heldBytes > 0) this.body = requestBody('GET', 0, true)
    return this
  }

  // Its pool's --max-body-size (bytes; Infinity: none): read there, as a copy would be
  // a number boxed for each exchange (16 bytes; an Infinity is not a small integer).
  get maxBody () {
    return this.pool.maxBody
  }

  // The request on the backend seated (forwarding.js), or null.
  get leg () {
    return this.forwarding.leg
  }

  get bytesIn () {
    return this.headBytes + this.body.received
  }

  start () {
    admit(this)
  }

  // Admission (admission.js) edited the head the backend gets; `traceId`: --trace's.
  edited (sent, traceId) {
    this.sent = sent
    if (this.trace === null) this.traceId = traceId
  }

  granted (pass) { this.grant = pass } // --forward-auth's fields, for message/rewrite.js

  // Admitted, not refused: a backend, or the body first. A small body is read whole
  // before a backend is taken, as nginx does: a client that sends it slowly then holds
  // nothing but its own connection, never a backend's. Only one whose length says it is
  // small: a chunked body may be a stream the client interleaves with the response,
  // which waiting for its end would deadlock, and a larger one streams to the backend
  // as it comes. A client that waits for 100 Continue before sending gets it from lila
  // (the backend is then not sent the Expect).
  proceed () {
    const { head, body, listener } = this
    this.deadline = deadlineFor(this)
    if (listener.mirror !== null) {
      this.shadow = this.trace === null
        ? listener.mirror.start(this.sent, this, body.done)
        : this.trace.mirror(this, listener.mirror, body.done)
    }
    if (body.done || head.asksUpgrade || !body.fitsIn(BUFFER_FIRST)) return this.attempt.start()
    this.buffering = true
    if (head.expect === '100-continue') this.continued = this.client.sendContinue(this)
  }

  // The body is read, or more of it than is worth holding: now a backend.
  bodyBuffered () {
    this.buffering = false
    this.attempt.start()
  }

  // The backend side (forwarding.js) reports: a leg failed, or lila was short of
  // descriptors for one.
  upstreamFailed (reason, cause, reused = false) {
    this.forwarding.failed(reason, cause, reused)
  }

  shortOf (err) {
    this.forwarding.shortOf(err)
  }

  // The response is cut after it started (`who`: 'backend', 'client' or 'lila'): the
  // client must not take what it got for the whole of it.
  cutOff (who, why) {
    this.cut = who
    this.client.cut(this, why)
    this.finish(false)
  }

  // The leg is connected and sent what was held, or the backend took what it was sent:
  // the client's body flows again.
  legConnected () {
    if (this.reading) this.client.resumeBody(this)
  }

  legDrained () {
    if (this.reading) this.client.resumeBody(this)
  }

  // The request body from the client's codec: pieces as it framed them (RequestBody's
  // `framed`; `payload`: the bytes less any chunked framing), then its end and trailers.
  onBody (piece, payload = piece.length) {
    if (this.done) return
    this.quietTicks = 0
    const { body, leg } = this
    if (body.payload + payload > this.maxBody) return this.clientBodyFailed(overSize(this.maxBody), 413)
    if (this.shadow !== null) this.shadow.body(piece)
    const holdingEnough = body.add(piece, payload)
    if (leg === null || !leg.connected) {
      // Still reading a small body, connecting or queued: held, and the client paused
      // once holding enough.
      if (this.buffering && holdingEnough) this.bodyBuffered()
      if (holdingEnough) this.client.pauseBody(this)
      return
    }
    body.sent()
    if (!leg.write(piece)) this.client.pauseBody(this)
  }

  onBodyEnd (trailers) {
    if (this.done || !this.reading) return
    this.reading = false
    this.quietTicks = 0
    if (!this.body.end()) return this.clientBodyFailed('the body ended short of its Content-Length')
    this.clientTrailers = trailers
    if (this.shadow !== null) this.shadow.end()
    if (this.buffering) return this.bodyBuffered() // the leg ends it once connected
    const { leg } = this
    if (leg !== null && leg.connected) leg.end() // else the leg ends it once connected
  }

  // The client's request body broke its framing (400), or stopped coming (408). The
  // backend side, if any, goes with it: it holds part of a request.
  clientBodyFailed (detail, status = 400) {
    if (this.done) return
    this.reading = false
    this.buffering = false
    this.forwarding.drop()
    if (this.responseStarted) return this.cutOff('client')
    this.replied = status
    this.responseStarted = true
    this.bytesOut += this.client.refuseBody(this, status, detail)
    this.finish(false)
  }

  onClientDrain () {
    if (this.compressed !== null) this.compressed.resume()
    if (this.leg !== null) this.leg.resume()
  }

  // The client went away (its connection closed, or it reset its stream): drop the
  // backend side (its response would have nowhere to go) and release the count.
  onClientClose () {
    if (this.done) return
    if (this.responseStarted && this.tunnel === null) this.cut = 'client'
    this.forwarding.drop()
    this.ended()
  }

  // Is the backend at work on it, the client having nothing left to say? (Its
  // connection is not idle then: the backend's --timeout applies.)
  awaitingBackend () {
    return this.tunnel === null && this.body.done && !this.responseStarted && !this.done
  }

  // The listener's sweep: a request body silent for `bodyLimit` sweeps (--body-timeout)
  // is answered 408, unless lila holds it paused (then the backend's silence counts); a
  // backend silent for `silentLimit` (--timeout) times out, not while the client still
  // sends its body (that silence is the client's). A tunnel has --idle-timeout only.
  onSweep (silentLimit, bodyLimit) {
    if (this.done || this.tunnel !== null) return
    if (this.reading && !this.client.bodyPaused(this)) {
      if (++this.quietTicks < bodyLimit) return
      return this.clientBodyFailed('request body timed out: no byte of it within --body-timeout', 408)
    }
    if (this.leg !== null) this.leg.onSweep(silentLimit)
  }

  // lila answers the request itself (error statuses).
  // `page`: the body's (--error-page's for the status, unless `exact` or given).
  answer (status, detail, {
    retryAfter = 0, quiet = false, exhausted = false, fields = null, exact = false,
    page = exact ? null : this.errorPage(status)
  } = {}) {
    if (status >= 500 && !quiet) {
      this.listener.log.warn(`${status} for ${this.head.method} ${this.path} from ${this.clientAddress}: ${detail}`)
    }
    if (this.trace !== null) this.trace.answeredByLila(status, detail)
    this.responseStarted = true
    this.replied = status
    this.bytesOut += this.client.answer(this, status, detail, { retryAfter, exhausted, fields, exact, page })
    this.finish(true)
  }

  // `ok`: the exchange ended as it should (a complete response, or lila's answer), so
  // the client's connection may serve another request as far as its codec allows.
  finish (ok) {
    if (this.done) return
    this.ended()
    this.client.exchangeDone(this, ok)
  }

  // Once: its timer and compressor go; counted and logged (request-record.js).
  ended () {
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    if (this.compressed !== null) this.compressed.destroy()
    recorded(this)
  }

  // The status the client was answered: the backend's, lila's own, 101 for a tunnel,
  // or 499 when the client left before any of its response.
  get status () {
    if (this.res !== null) return this.res.status
    if (this.tunnel !== null) return 101
    return this.replied || CLIENT_CLOSED
  }
}

module.exports = { Exchange }
