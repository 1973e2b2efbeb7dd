'use strict'

const { performance } = require('perf_hooks')
const { reasonOf } = require('../../errors')
const { Attempt } = require('../../upstream/attempt')
const { requestRecord } = require('./request-record')
const { requestIdOf } = require('./request-id')
const { callType } = require('../message/grpc')
const { deadlineFor } = require('./deadline')
const { RequestBody, BUFFER_FIRST } = require('./request-body')
const { fieldOf, editedRequest, editedResponse, CompressedBody } = require('./edge-calls')
const { originForm } = require('../message/rewrite')
const { challengeAnswer } = require('../../tls/http01')
const { ExchangeTrace } = require('./exchange-trace')
const { MAINTENANCE_RETRY_AFTER } = require('../maintenance')
const { responseBody } = require('../message/response-body')

// The access log's status when the client went away before any of its response
// (nginx's "client closed request").
const CLIENT_CLOSED = 499
// Retry-After (seconds) on lila's own 503s: no backend could take the request, or lila
// was short of descriptors or memory.
const UNAVAILABLE_RETRY_AFTER = 5

// What a compressed body is to the client's codec: lila frames it (respond's `how`).
const UNFRAMED = responseBody(false, false, false)

// lila's words for a request body over --max-body-size.
const overSize = max => `the request body is over --max-body-size (${max} bytes)`

// What the exchange knows of protocols is two interfaces, each served by a codec; as
// lists, so that a third codec (or a test's double) knows what to provide, and
// test/exchange-interfaces.test.js holds every session and leg to them:
//
// - its `client`, the session the request came on (http1/session.js: one HTTP/1.1
//   connection, or http2/session.js: HTTP/2, where `stream` is the request's stream).
//   The session has the protocol make the exchange (newExchange(session, head,
//   headBytes, stream)), calls `start`, then hands it the body as pieces (onBody,
//   onBodyEnd with the trailers, clientBodyFailed) and what its client does
//   (onClientDrain, onClientClose, onSweep, awaitingBackend), and asks for the page of
//   an answer of its own (errorPage); it hears back, with the
//   exchange as the first argument, CLIENT_SESSION's methods.
// - its `leg` on the backend seated (http1/leg.js over a pooled HTTP/1.1 connection,
//   http2/leg.js as a stream of a pooled HTTP/2 session), made as
//   `new protocol.Leg(exchange, backend, fresh)`: LEG's methods and properties. A leg
//   reports with LEG_REPORTS.
const CLIENT_SESSION = Object.freeze({
  methods: Object.freeze([
    'sendContinue', 'interim', 'respond', 'flushHead', 'send', 'finishResponse', 'tunnelHead', 'answer',
    'refuseBody', 'pauseBody', 'resumeBody', 'bodyPaused', 'cut', 'reset', 'takesChunked', 'holdsWrites', 'touch',
    'exchangeDone'
  ]),
  // listener, clientAddress: the connection's; socket: the client's (a TLSSocket's
  // certificate, client-cert.js); chunkedPieces: its body's pieces carry HTTP/1.1
  // chunked framing; holdsHead: a response head waits for the body bytes read with it
  properties: Object.freeze(['listener', 'clientAddress', 'socket', 'chunkedPieces', 'holdsHead'])
})
const LEG = Object.freeze({
  methods: Object.freeze(['start', 'write', 'end', 'pause', 'resume', 'abandon', 'again', 'onSweep']),
  // connected: it can take the body now; gotBytes: some of the response came (no replay)
  properties: Object.freeze(['connected', 'gotBytes'])
})
const LEG_REPORTS = Object.freeze([
  'legConnected', 'legDrained', 'interim', 'answered', 'respond', 'toClient', 'flushHead', 'responseDone',
  'upstreamFailed', 'shortOf', 'startTunnel', 'tunnelClosed'
])
const SESSION_REPORTS = Object.freeze([
  'start', 'onBody', 'onBodyEnd', 'clientBodyFailed', 'onClientDrain', 'onClientClose', 'onSweep', 'awaitingBackend',
  'errorPage'
])

// One request and its response, whichever protocol the client and the backend speak:
// the one place that knows a request's life. It balances it (an Attempt: pick, queue,
// retry, blame), sends it on through a leg to the backend seated, and passes the
// response back; it answers itself where lila must (502, 503, 504, 429, ..., gRPC-shaped
// for calls), applies the limits, copies it for --mirror, sets the sticky cookie, and
// counts and logs it, once. Its client and its leg are the interfaces above.
//
// A failure before the backend answered is retried where that is safe (upstreamFailed)
// on a fresh connection or another backend; otherwise answered 502/503/504. After the
// response started, a failure cuts the client (an HTTP/1.1 connection, an HTTP/2
// stream; a gRPC call's ends UNAVAILABLE): a truncated response must not look complete.
class Exchange {
  constructor (client, head, headBytes, stream = null) {
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
    this.body = new RequestBody(head.method, head.bodyLength, head.bodyLength === 0, this.grpc !== null, framed)
    this.clientTrailers = null // the request's trailers: fields as in a head, or null
    this.reading = !this.body.done // the client's body (or a tunnel's bytes) still to come
    this.buffering = false // reading a small body before taking a backend (see start)
    this.continued = false // lila answered the client's Expect: 100-continue itself
    this.quietTicks = 0 // listener sweeps without a body byte from the client (--body-timeout)
    this.shadow = null // its copy for --mirror (proxy/http/mirror.js), or null

    // Where it goes.
    this.route = listener.routeFor(head) // null: no route matches (404)
    // The rules at the edge of the pool it goes to (edge/rules.js), or null: none; and
    // its --max-body-size (bytes; Infinity: none).
    const pool = this.pool = this.route || listener.own
    this.rules = pool.rules
    this.maxBody = pool.maxBody
    this.sent = head // the head as it goes on: a copy a rule edited, or the client's
    this.traceId = null // --trace: the request's trace ID
    this.grant = null // --forward-auth's 2xx: the fields it lets the request in with (a Map), or null
    this.clientSpan = null // --otlp: the attempt's CLIENT span, the backend's parent (message/rewrite.js)
    this.interceptedBy = null // --intercept-errors: the Backend whose answer was replaced by a page
    this.plan = null // what a rule does to the response: responseTransform's
    this.compressed = null // its body on the way compressed (edge-calls.js CompressedBody)
    this.canary = pool.canary // --canary (proxy/canary.js) beside the pool, or null; the side chosen
    this.side = this.canary === null ? null : this.canary.choose(head.fields)
    const upstream = this.side === null ? pool.upstream : this.canary.upstreamOf(this.side, pool.upstream)
    this.attempt = new Attempt(upstream, this, this, { perRequest: true })
    this.leg = null // the request on the backend seated
    this.lastStatus = 502 // what the last failure answers when no backend is left
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
    this.trace = listener.tracer === null ? null : new ExchangeTrace(listener.tracer, this)
    if (this.trace !== null) this.traceId = this.trace.traceId
  }

  get bytesIn () {
    return this.headBytes + this.body.received
  }

  // A small body is read whole before a backend is taken, as nginx does: a client that
  // sends it slowly then holds nothing but its own connection, never a backend's. Only
  // one whose length says it is small: a chunked body may be a stream the client
  // interleaves with the response, which waiting for its end would deadlock, and a
  // larger one streams to the backend as it comes. A client that waits for 100
  // Continue before sending gets it from lila (the backend is then not sent the Expect).
  start () {
    const { acme } = this.listener
    if (acme !== null && acme.http.size > 0 && this.answeredChallenge(acme.http)) return
    const looped = this.listener.protocol.looped(this)
    if (looped !== null) return this.answer(...looped)
    if (this.listener.maintenance.active && this.underMaintenance()) return
    const { rules } = this
    if (rules !== null) {
      const authorization = fieldOf(this.head.fields, 'authorization')
      const proto = this.listener.tls === null ? 'http' : 'https' // --forward-auth's X-Forwarded-Proto
      const verdict = rules.admit(this.clientAddress, authorization, this.grpc !== null, this.head, proto)
      if (verdict !== null) return this.judged(verdict)
    }
    this.admitted()
  }

  // --maintenance, POST /maintenance (proxy/maintenance.js): 503 with its page, unless
  // the client is on --maintenance-allow. True when answered.
  underMaintenance () {
    const held = this.listener.maintenance.holds(this.pool.name, this.clientAddress)
    if (held === null) return false
    this.listener.edgeStats.refused('maintenance', this.clientAddress)
    const page = held.page === null ? this.errorPage(503) : held.page
    this.answer(503, 'under maintenance; try again later', { retryAfter: MAINTENANCE_RETRY_AFTER, quiet: true, page })
    return true
  }

  // An ACME HTTP-01 validation of a token lila holds (tls/http01.js), on a plain-HTTP
  // listener while a certificate is being got: answered before any rule or route.
  // Other tokens go on (a backend may get its own certificates).
  answeredChallenge (http) {
    const challenge = challengeAnswer(http, this.head.method, this.head.path)
    if (challenge === null || challenge.keyAuthorization === undefined) return false
    this.listener.log.info(`ACME: answered an HTTP-01 validation from ${this.clientAddress}`)
    this.answer(200, challenge.keyAuthorization, { exact: true })
    return true
  }

  // A rule at the edge said no (answered as lila's own, never forwarded), or yes with
  // headers for the backend (--forward-auth's 2xx), or will say (a password checked for
  // the first time, bcrypt's cost paid in slices; an auth service asked): the request
  // waits, its body unread (held up to a window, then the client paused), and is
  // dropped if the client leaves meanwhile.
  judged (verdict) {
    if (typeof verdict.then !== 'function') {
      return verdict.pass === undefined ? this.refused(verdict) : this.admitted(verdict)
    }
    if (this.reading) this.client.pauseBody(this)
    verdict.then(later => {
      if (this.done) return
      if (later !== null && later.pass === undefined) return this.refused(later)
      if (this.reading) this.client.resumeBody(this)
      this.admitted(later)
    }, err => {
      if (!this.done) this.answer(503, `the check at the edge failed (${reasonOf(err)})`)
    })
  }

  // `page`: an auth service's answer's body (else --error-page's, or lila's words).
  refused ({ status, detail, fields, page }) {
    this.answer(status, detail, { fields, quiet: true, page }) // counted and logged by the rules
  }

  // `grant`: rules.admit's Grant (the headers --forward-auth lets the request in with), or null.
  admitted (grant = null) {
    const { head, body, listener, rules } = this
    // A body said to be too large is refused before any of it is read (and before a
    // client waiting for 100 Continue sends it); one of unknown length, as it comes (onBody).
    if (body.length > this.maxBody) return this.answer(413, overSize(this.maxBody))
    if (grant !== null) this.grant = grant.pass
    if (rules !== null) {
      const edits = rules.rewriteRequest(originForm(head), name => fieldOf(head.fields, name))
      if (edits !== null) {
        this.sent = editedRequest(head, edits)
        if (this.trace === null) this.traceId = edits.traceId
      }
    }
    const refused = listener.protocol.refusal(this)
    if (refused === null) return this.proceed()
    if (typeof refused.then !== 'function') return this.answer(...refused)
    // --fleet: the fleet decides --rate-limit (within a few ms, fleet/limits.js).
    if (this.reading) this.client.pauseBody(this)
    refused.then(later => {
      if (this.done) return
      if (this.reading) this.client.resumeBody(this)
      if (later !== null) return this.answer(...later)
      this.proceed()
    })
  }

  // Admitted, not refused: a backend, or the body first.
  proceed () {
    const { head, body, listener } = this
    const { protocol } = listener
    if (head.isUpgrade && protocol.backendProtocol === 'h2') {
      return this.answer(502, `an upgrade to ${head.upgrade} cannot be carried to an HTTP/2 backend`)
    }
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

  // The attempt (lib/upstream/attempt.js) decides where the request goes, how often it
  // is tried and whom a failure blames; the exchange's leg connects, and says what failed.

  // Nothing could take the request: 503 if nothing was tried, else the failure seen.
  unserved (queueReason, exhausted) {
    const { attempt } = this
    if (attempt.attempts === 0) {
      this.listener.countUnserved()
      const detail = queueReason === null ? '' : ` (${queueReason})`
      return this.answer(503, `no backend available${detail}`, { retryAfter: UNAVAILABLE_RETRY_AFTER, exhausted })
    }
    this.answer(this.lastStatus, attempt.failure)
  }

  // A slot on a backend: a leg to it.
  seated (lease) {
    if (this.trace !== null) this.clientSpan = this.trace.seated(this, lease)
    this.leg = new this.listener.protocol.Leg(this, lease.backend, false)
    this.leg.start()
  }

  // A fault injected on the backend seated (attempt.js, upstream/fault.js): lila answers
  // `status` as that backend's answer (which the attempt judges, and may retry
  // elsewhere), or resets the client (its connection, or its HTTP/2 stream), blaming
  // nothing.
  injected ({ status = 0, reset = false }) {
    if (reset) {
      this.releaseLease()
      this.client.reset(this)
      return this.finish(false)
    }
    this.lastStatus = status
    if (this.attempt.answered(status, { replayable: this.body.canRepeat(), bytesIn: this.bytesIn })) return
    this.releaseLease()
    this.answer(status, `a fault injected on backend ${this.attempt.backend.address}`, { quiet: true })
  }

  // The leg failed: `cause` says how (see Backend.failed; 'connect': before the request
  // went out). Before any response byte, the attempt retries where safe; `reused`: on a
  // connection that had served before, which may be the keep-alive race, tried once
  // more on a fresh one to the same backend. After the response started, the client
  // is cut so that it cannot mistake the rest for complete.
  upstreamFailed (reason, cause, reused = false) {
    const leg = this.leg
    if (this.done || leg === null) return
    this.leg = null
    leg.abandon()
    const { attempt } = this
    const backend = attempt.backend
    const status = cause === 'timeout' ? 504 : 502
    const { log } = this.listener
    if (this.responseStarted) {
      const request = `${this.head.method} ${this.path} from ${this.clientAddress}`
      log.warn(`${request}: backend ${backend.address} ${reason}; response cut`)
      attempt.blame(reason, cause)
      if (this.trace !== null) this.trace.failed(reason)
      this.releaseLease()
      this.cut = 'backend'
      this.client.cut(this, `backend ${backend.address} ${reason}; the answer was cut`)
      this.finish(false)
      return
    }
    // Safe to send again: nothing of the response came back, and the body allows it
    // (request-body.js: all of it held; not sent at all ('connect'), or idempotent, or
    // none of it sent yet); or the backend began an answer none of which reached the
    // client (http2/leg.js holds a small one until its end), and the request is one
    // that may be repeated. Or any request all of whose body is held, after a reset,
    // when --retry-on says reset (attempt.js resendsAfter).
    const replayable = (leg.gotBytes
      ? this.body.canRepeat()
      : cause === 'connect' ? this.body.kept : this.body.canReplay()) || (this.body.kept && attempt.resendsAfter(cause))
    if (reused && cause !== 'timeout' && replayable && attempt.retryFresh()) {
      log.debug(`${backend.address}: reused connection ${reason}; retrying on a fresh one`)
      this.leg = leg.again()
      return this.leg.start()
    }
    this.lastStatus = status
    const sent = cause !== 'connect'
    if (this.trace !== null) this.trace.failed(reason)
    const retried = attempt.failed(reason, { cause, sent, replayable, bytesIn: this.bytesIn })
    if (this.trace !== null) this.trace.judged(this, reason, retried)
    if (retried) log.debug(`${backend.address} ${reason}; retrying ${this.head.method} ${this.path} elsewhere`)
    else this.answer(status, attempt.failure)
  }

  // lila itself could not open a backend connection (out of descriptors): the backend
  // is not blamed, and another would fare no better: 503, to try again later. The leg
  // let its connection go.
  shortOf (err) {
    this.leg = null
    if (this.trace !== null) this.trace.failed(`lila is short of resources (${reasonOf(err)})`)
    this.attempt.shortage(this.bytesIn)
    this.listener.short(err, 'cannot open a backend connection')
    const retryAfter = UNAVAILABLE_RETRY_AFTER
    this.answer(503, `lila is short of resources (${reasonOf(err)})`, { retryAfter, quiet: true })
  }

  // The request will not be sent: its leg is dropped (a connection being opened for it
  // closed), and its slot or place in the queue let go.
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
    if (this.reading) this.client.resumeBody(this)
  }

  // The backend took what it was sent: read the client on.
  legDrained () {
    if (this.reading) this.client.resumeBody(this)
  }

  // The request body, from the client's codec: pieces as it framed them (see
  // RequestBody's `framed`), then its end with the trailers (fields as in a head).

  // `payload`: the piece's bytes less any chunked framing it carries.
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
    this.abandonUpstream()
    this.releaseLease()
    if (this.responseStarted) {
      this.cut = 'client'
      this.client.cut(this)
      return this.finish(false)
    }
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
    this.abandonUpstream()
    this.releaseLease()
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    if (this.compressed !== null) this.compressed.destroy()
    this.logged()
  }

  // Is the backend at work on it, the client having nothing left to say? (Its
  // connection is not idle then: the backend's --timeout applies.)
  awaitingBackend () {
    return this.tunnel === null && this.body.done && !this.responseStarted && !this.done
  }

  // The listener's sweep: a client whose request body sends nothing for `bodyLimit`
  // sweeps (--body-timeout) is answered 408, not while lila holds it paused (a backend
  // slow to take the body, or none yet: then the backend's silence counts); the leg's
  // backend silent for `silentLimit` (--timeout) times out, not while the client is
  // still sending its body on its own time (that silence is the client's). Not in a
  // tunnel: idle both ways is --idle-timeout's.
  onSweep (silentLimit, bodyLimit) {
    if (this.done || this.tunnel !== null) return
    if (this.reading && !this.client.bodyPaused(this)) {
      if (++this.quietTicks < bodyLimit) return
      return this.clientBodyFailed('request body timed out: no byte of it within --body-timeout', 408)
    }
    if (this.leg !== null) this.leg.onSweep(silentLimit)
  }

  // The response, from the leg to the client.

  // A 1xx (100 Continue, 103 Early Hints) passed on.
  interim (res) {
    if (!this.done) this.client.interim(this, res)
  }

  // The backend's final head `res`: its status judged by the attempt. True when it is
  // dropped, the request retried elsewhere (the leg it came on is abandoned). Kept, it
  // is shown to the rules at the edge, whose plan (compressing its body, say) the leg
  // may need to know before it reads on (`compressing`).
  answered (status, latencyMs, res) {
    const leg = this.leg
    const how = { replayable: this.body.canRepeat(), bytesIn: this.bytesIn, latencyMs }
    this.lastStatus = status // what the client gets if no other backend answers
    if (this.trace !== null) this.trace.answered(status)
    const retried = this.attempt.answered(status, how)
    if (this.trace !== null) this.trace.judged(this, `answered ${status}`, retried)
    if (!retried) {
      const { intercept } = this.pool // --intercept-errors: a page for the backend's status
      if (intercept !== null && this.grpc === null && intercept.get(status) !== undefined) {
        return this.intercepted(status, res, intercept.get(status))
      }
      const { rules, head } = this
      if (rules !== null) {
        const accepts = fieldOf(head.fields, 'accept-encoding')
        this.plan = rules.responseTransform(head.method, accepts, status, name => fieldOf(res.fields, name))
      }
      return false
    }
    leg.abandon()
    return true
  }

  // --intercept-errors: the backend's answer is dropped (its leg abandoned) for the
  // --error-page of its status, its Retry-After kept. It counts as the backend's answer
  // (the status is), as HAProxy's and nginx's count what the server said.
  intercepted (status, res, page) {
    this.interceptedBy = this.attempt.backend
    this.leg.abandon()
    this.leg = null
    this.releaseLease()
    const retryAfter = fieldOf(res.fields, 'retry-after')
    const fields = retryAfter === undefined ? null : [['retry-after', retryAfter]]
    this.answer(status, `the backend answered ${status}`, { quiet: true, page, fields })
    return true
  }

  // --error-page's page for `status` on this request's pool (the listener's, or its
  // route's over them), or null.
  errorPage (status) {
    const { pages } = this.pool
    return pages === null ? null : pages.get(status) || null
  }

  // Could the request be sent again if its backend died before its answer's end?
  // Idempotent with its body held, or any held one with --retry-on reset (http2/leg.js
  // holds a small answer until its end when it could).
  get repeatable () {
    return this.body.canRepeat() || (this.body.kept && this.attempt.resendsAfter('reset'))
  }

  // Will the response's body go on compressed? Then the leg gives it unframed.
  get compressing () {
    return this.plan !== null && this.plan.encoding !== null
  }

  // The final head goes to the client (the leg's `how`, message/response-body.js:
  // { bodyless, framed: its body pieces carry HTTP/1.1 chunked framing, untilClose: its
  // end is the backend's close }). False when it cannot: the client left meanwhile.
  respond (res, how) {
    if (this.done) return false
    const { plan } = this
    let sent = res
    if (plan !== null && !how.bodyless) {
      sent = editedResponse(res, plan.fields, plan.encoding !== null)
      if (plan.encoding !== null) how = UNFRAMED // lila frames what it compresses
    }
    const size = this.client.respond(this, sent, how, this.cookies())
    if (size < 0) {
      this.onClientClose()
      return false
    }
    if (sent !== res && plan.encoding !== null) this.compressed = new CompressedBody(this, this.rules, plan.encoding)
    this.res = sent
    this.responseStarted = true
    this.bytesOut += size
    if (this.shadow !== null) this.shadow.primaryStatus(res.status, how.framed)
    return true
  }

  // The body bytes read with the head went (or there were none): the head leaves now if
  // it waited for them.
  flushHead () {
    if (!this.done) this.client.flushHead(this)
  }

  toClient (piece) {
    if (this.done) return
    if (this.shadow !== null) this.shadow.primaryBody(piece)
    if (this.compressed !== null) {
      if (!this.compressed.write(piece) && this.leg !== null) this.leg.pause()
      return
    }
    this.bytesOut += piece.length
    if (!this.client.send(this, piece) && this.leg !== null) this.leg.pause()
  }

  // The response is complete (the leg gave its connection back); `trailers`: fields as
  // in a head, or null. A compressed body ends when its last bytes are out.
  responseDone (trailers) {
    this.leg = null
    if (this.done) return
    if (this.shadow !== null) this.shadow.primaryDone()
    this.releaseLease()
    if (this.compressed !== null) return this.compressed.end(trailers)
    this.bytesOut += this.client.finishResponse(this, trailers)
    this.finish(true)
  }

  // A compressed body (edge-calls.js CompressedBody): its bytes to the client (false:
  // the client is full), the backend read on once the compressor drained, the end.
  sendCompressed (chunk) {
    if (this.done) return true
    this.bytesOut += chunk.length
    return this.client.send(this, chunk)
  }

  compressorDrained () {
    if (this.leg !== null) this.leg.resume()
  }

  compressedDone (trailers) {
    if (this.done) return
    this.bytesOut += this.client.finishResponse(this, trailers)
    this.finish(true)
  }

  compressFailed (err) {
    if (this.done) return
    const request = `${this.head.method} ${this.path} from ${this.clientAddress}`
    this.listener.log.warn(`${request}: compressing failed (${reasonOf(err)}); response cut`)
    this.abandonUpstream()
    this.releaseLease()
    this.cut = 'lila'
    this.client.cut(this)
    this.finish(false)
  }

  // A 101 from an HTTP/1.1 backend (http1/leg.js): the connection becomes a Tunnel
  // (http1/tunnel.js), raw bytes both ways.
  startTunnel (tunnel, res) {
    this.attempt.succeeded()
    this.tunnel = tunnel
    this.responseStarted = true
    this.reading = true
    this.bytesOut += this.client.tunnelHead(this, res, this.cookies())
  }

  // The Set-Cookie values a backend's response gets: --sticky's and --canary's (null,
  // one, or a list of both).
  cookies () {
    const sticky = this.listener.protocol.sticky.cookieFor(this)
    return this.side === null ? sticky : this.canary.cookies(this.side, sticky)
  }

  // The tunnel's backend side closed.
  tunnelClosed () {
    this.leg = null
    this.releaseLease()
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
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    if (this.compressed !== null) this.compressed.destroy()
    this.logged()
    this.client.exchangeDone(this, ok)
  }

  // Once per exchange: counted (response-stats.js), and written to the access log.
  logged () {
    const { accessLog, protocol } = this.listener
    const ms = performance.now() - this.openedAt
    const answered = this.res !== null || this.tunnel !== null // by a backend, not lila
    protocol.stats.count(this.status, answered ? this.attempt.backend : this.interceptedBy, ms)
    if (this.canary !== null) this.canary.count(this.side, this.status, ms)
    if (accessLog !== null) accessLog.log(requestRecord(this, ms))
    if (this.trace !== null) this.trace.ended(this)
  }

  // The status the client was answered: the backend's, lila's own, 101 for a tunnel,
  // or 499 when the client left before any of its response.
  get status () {
    if (this.res !== null) return this.res.status
    if (this.tunnel !== null) return 101
    return this.replied || CLIENT_CLOSED
  }
}

module.exports = { Exchange, CLIENT_SESSION, LEG, LEG_REPORTS, SESSION_REPORTS }
