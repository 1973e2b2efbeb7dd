'use strict'

const { performance } = require('perf_hooks')
const { isLocalShortage } = require('../../errors')
const { backendReason } = require('../../upstream/dial')
const { CLOSED } = require('../../wire/h2/connection')
const { REFUSED_STREAM, CANCEL, NO_ERROR, errorName } = require('../../wire/h2/constants')
const { requestList, trailerList } = require('./headers')
const { Fields, requestFields, trailerFields } = require('../message/rewrite')
const { failureOf } = require('./pool')
const { hold, letGo, HOLD_BYTES } = require('./hold')
const { responseBody } = require('../message/response-body')

const EMPTY = Buffer.alloc(0)
// The fields of the head being listed (message/rewrite.js): one array for every leg,
// as a head is listed at once.
const FIELDS = new Fields()

// A request on an HTTP/2 backend (--backend-protocol h2, --protocol grpc): the leg of
// an Exchange (http/exchange.js) on the backend it was seated on, as http1/leg.js is
// for HTTP/1.1 backends, with the same interface. Its stream is one of a pooled
// session's (pool.js, on lila's own codec); the head goes as a header list of the
// fields message/rewrite.js decides (headers.js requestList), the body as DATA as it
// comes, then the client's trailers; the response comes back as it is: 1xx, the head, DATA,
// trailers (a gRPC status among them), or a head alone. Back-pressure is HTTP/2's flow
// control both ways: a paused stream gives no window back.
//
// A stream the backend refused (REFUSED_STREAM, or past the last stream of its GOAWAY)
// was not processed: it is tried again on a fresh session, as the keep-alive race is
// for HTTP/1.1, then elsewhere. A session that ends before the backend said anything
// (a failed connect, a server that does not speak HTTP/2) did not process it either. A
// reset before the response is a failure after the request reached the backend; after
// the response started, the client's side is cut too. A response to a request that can
// be sent again is held until its stream's end (hold.js), so that a backend that dies
// before it is such a failure, not a cut.
class Http2Leg {
  constructor (exchange, backend, fresh) {
    this.x = exchange
    this.backend = backend
    this.fresh = fresh
    const { protocol } = exchange.listener
    this.pool = protocol.http2PoolFor(backend)
    this.scheme = protocol.backendTls === null ? 'http' : 'https'
    this.s = null // its stream
    this.gotBytes = false // the response started (then the request is not replayed)
    this.bodyBytes = 0 // of the response, passed on or held
    this.ended = false // the response is complete
    this.silentTicks = 0 // listener sweeps without a frame of its response (--timeout)
    this.sentAt = 0
    this.abandoned = false
    this.flush = null // a head held for the body read with it (an HTTP/1.1 client's)
    this.held = null // { head, pieces, bytes, whole }: a response held until its end (hold.js)
  }

  get connected () {
    return this.s !== null
  }

  // The stream opens at once (its session may still be connecting: what is written
  // waits), with the head, the body held so far, and its end if it came.
  start () {
    const x = this.x
    const { body } = x
    // A gRPC call's deadline, less the time it spent in lila (queued, connecting).
    const left = x.deadline === null ? null : x.deadline.left()
    const { rewrite } = x.listener.protocol
    requestFields(x.sent, x, this.backend.hostHeader, rewrite, left, x.forwarding.clientSpan, FIELDS)
    const list = requestList(x.sent, FIELDS, this.scheme)
    const endStream = body.done && body.heldBytes === 0 && trailerListOf(x.clientTrailers) === null
    const s = this.pool.request(LEG, list, endStream, this.fresh)
    if (s === null) return x.upstreamFailed('refused a new stream', 'connect', true)
    s.user = this
    this.s = s
    this.sentAt = performance.now()
    body.replay(this.writePiece, this)
    if (body.done && !endStream) this.end()
    x.legConnected()
  }

  writePiece (piece) {
    return this.s.conn.write(this.s, piece, false)
  }

  // A piece of the client's body; false: wait for legDrained.
  write (piece) {
    this.silentTicks = 0
    return this.writePiece(piece)
  }

  // May the session still hold pieces of the body (http1/client-reads.js)? It queues
  // them past the flow-control window: taken to.
  holdsBody () {
    return true
  }

  // The body's end, with the client's trailers.
  end () {
    const s = this.s
    const trailers = trailerListOf(this.x.clientTrailers)
    if (trailers === null) s.conn.write(s, EMPTY, true)
    else s.conn.headers(s, trailers, true)
  }

  pause () {
    if (this.s !== null) this.s.conn.pause(this.s)
  }

  resume () {
    if (this.s !== null) this.s.conn.resume(this.s)
  }

  // Given up: its stream reset (NO_ERROR once its response is whole: the rest of the
  // request body is not wanted).
  abandon () {
    if (this.abandoned) return
    this.abandoned = true
    const s = this.s
    if (s !== null && !s.closed) s.conn.reset(s, this.ended ? NO_ERROR : CANCEL)
    if (this.held !== null) this.drop()
  }

  // A refused stream: the same backend again, on a fresh session.
  again () {
    return new Http2Leg(this.x, this.backend, true)
  }

  // The exchange's next request, on `backend` (forwarding.js seated): a new leg (an
  // HTTP/2 leg's stream state is not worth reusing).
  renew (backend) {
    return new Http2Leg(this.x, backend, false)
  }

  // The listener's sweep: a backend silent for --timeout; not while lila holds the
  // stream paused for a client that does not read.
  onSweep (silentLimit) {
    const s = this.s
    if (s === null || s.paused || this.ended) return
    if (++this.silentTicks >= silentLimit) this.x.upstreamFailed('timed out', 'timeout')
  }

  heard () {
    this.silentTicks = 0
    this.x.client.touch()
  }

  onHead (head, endStream) {
    this.heard()
    const x = this.x
    if (head.status < 200) return x.interim(head) // 100 Continue, 103 Early Hints
    this.gotBytes = true
    if (x.answered(head.status, performance.now() - this.sentAt, head)) return // dropped: retried elsewhere
    if (!endStream && this.mayHold(head)) {
      const whole = head.contentLength === -1 ? Infinity : head.contentLength // its length, when said
      this.held = { head, pieces: [], bytes: 0, whole }
      return hold(this)
    }
    if (!x.respond(head, responseBody(endStream, false, false))) return
    if (endStream) return this.done(null)
    this.flushSoon()
  }

  // An HTTP/1.1 client's head waits for the DATA read with it, to leave in one write;
  // at the end of this read at the latest.
  flushSoon () {
    if (!this.x.client.holdsHead) return
    if (this.flush === null) this.flush = () => this.x.flushHead()
    queueMicrotask(this.flush)
  }

  // Is the response held until its end? Only where that can help: the request can be
  // sent again after an answer (idempotent, its body kept; any method with --retry-on
  // reset), the response is small, and says nothing of being a stream (Server-Sent
  // Events get their head at once).
  mayHold (head) {
    const length = head.contentLength
    return this.x.repeatable && length !== 0 && length <= HOLD_BYTES && head.contentType !== 'text/event-stream'
  }

  onData (chunk, endStream) {
    this.heard()
    this.bodyBytes += chunk.length
    const held = this.held
    if (held !== null) {
      if (chunk.length > 0) {
        held.pieces.push(chunk)
        held.bytes += chunk.length
      }
      if (!endStream && held.bytes < held.whole && held.bytes <= HOLD_BYTES) return
      if (!this.release()) return
    } else if (chunk.length > 0) {
      this.x.toClient(chunk)
    }
    if (endStream && !this.abandoned) this.done(null)
  }

  // The held response goes to the client: its end came, it grew past HOLD_BYTES, or
  // HOLD_MS passed (hold.js). False when the client left meanwhile.
  release () {
    const { head, pieces } = this.held
    this.drop()
    const x = this.x
    if (!x.respond(head, responseBody(false, false, false))) return false
    for (let i = 0; i < pieces.length && !this.abandoned; i++) x.toClient(pieces[i])
    this.flushSoon()
    return !this.abandoned
  }

  drop () {
    this.held = null
    letGo(this)
  }

  // The response is whole. The backend answered before the request's body was all
  // sent: the rest is not wanted.
  done (trailers) {
    if (this.held !== null && !this.release()) return
    this.ended = true
    const s = this.s
    if (s.writable) s.conn.reset(s, NO_ERROR)
    this.x.responseDone(trailers)
  }

  onReset (code) {
    if (this.ended) return
    const x = this.x
    const s = this.s
    if (code === REFUSED_STREAM && !this.gotBytes) return x.upstreamFailed('refused the stream', 'connect', true)
    // RFC 9113 8.1 has a server reset a stream NO_ERROR after its complete response, to
    // stop the rest of the request; Node's http2 server does it in place of the last
    // DATA's END_STREAM when its client's windows are large. A response whose length
    // was said and came whole (or was not said) is complete then. One whose length was
    // said and came whole is complete too when the connection ends before its
    // END_STREAM, which Node's server writes a turn of its event loop after the DATA.
    if (this.gotBytes && (code === NO_ERROR || code === CLOSED) && s.expected !== -1 && this.bodyBytes === s.expected) {
      return this.done(null)
    }
    if (code === NO_ERROR && this.gotBytes && s.expected === -1) return this.done(null)
    // What was held never reached the client: the request is sent again where it can be.
    if (this.held !== null) this.drop()
    if (code === CLOSED) {
      const failure = failureOf(s)
      if (!s.conn.settingsSeen) {
        // Nothing HTTP/2 ever came back: the request reached no HTTP/2 peer.
        if (failure instanceof Error && isLocalShortage(failure) && !x.responseStarted) {
          this.abandoned = true
          return x.shortOf(failure)
        }
        const reason = failure === null
          ? 'closed the connection without speaking HTTP/2 (is --backend-protocol right?)'
          : typeof failure === 'string' ? failure : backendReason(failure, this.pool.tls)
        return x.upstreamFailed(reason, 'connect')
      }
      const reason = failure === null || typeof failure === 'string'
        ? 'closed the connection'
        : backendReason(failure, this.pool.tls)
      return x.upstreamFailed(this.gotBytes ? `${reason} mid-response` : reason, 'reset')
    }
    const reason = `reset the stream (${errorName(code)})`
    x.upstreamFailed(this.gotBytes ? `${reason} mid-response` : reason, 'reset')
  }
}

// Trailer fields as they go on (message/rewrite.js), as a list; null: none.
function trailerListOf (fields) {
  trailerFields(fields, FIELDS)
  return trailerList(FIELDS)
}

// The stream handler every leg shares (wire/h2/connection.js): `s.user` is the leg.
const LEG = Object.freeze({
  onHead (s, head, endStream) { if (!s.user.abandoned) s.user.onHead(head, endStream) },
  onData (s, chunk, endStream) { if (!s.user.abandoned) s.user.onData(chunk, endStream) },
  onTrailers (s, fields) { if (!s.user.abandoned) s.user.done(fields) },
  onReset (s, code) { if (!s.user.abandoned) s.user.onReset(code) },
  // (A leg whose response ended sends no more: its exchange may serve another request.)
  onDrain (s) { if (!s.user.abandoned && !s.user.ended) s.user.x.legDrained() }
})

module.exports = { Http2Leg }
