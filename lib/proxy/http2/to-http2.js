'use strict'

const { constants } = require('http2')
const { performance } = require('perf_hooks')
const { handlers, addListeners } = require('../socket-events')
const { backendRequestHeaders, relayedHeaders, relayedTrailers } = require('./headers')
const { isLocalShortage } = require('../../errors')

const { NGHTTP2_NO_ERROR, NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM, NGHTTP2_FLAG_END_STREAM } = constants

// Backend stream handlers shared by every leg (socket-events.js): `this` is the
// ClientHttp2Stream, which carries its leg.
const BACKEND_STREAM = handlers({
  headers (headers) { this.leg.onInterim(headers) },
  response (headers, flags) { this.leg.onResponse(headers, flags) },
  data (chunk) { this.leg.onData(chunk) },
  trailers (headers) { this.leg.onTrailers(headers) },
  end () { this.leg.onEnd() },
  drain () { this.leg.exchange.legDrained() },
  wantTrailers () { this.leg.onWantTrailers() },
  error (err) { this.leg.error = err },
  close () { this.leg.onClose() }
})

// A request on an HTTP/2 backend (--backend-protocol h2): one leg of an exchange, as
// to-http1.js is for HTTP/1.1 backends, with the same interface (see there). Its
// stream is one of a pooled session's (backend-pool.js); the head goes as HTTP/2
// headers with the rewriting of HTTP/1.1 (headers.js backendRequestHeaders), the body
// as DATA as it comes, then the client's trailers; the response comes back as it is:
// 1xx, headers, DATA, trailers (a gRPC status among them), or headers alone.
// Back-pressure is HTTP/2's flow control both ways: a paused stream is not read, so
// its window closes.
//
// A stream the backend refused (REFUSED_STREAM, or past the last stream of its GOAWAY)
// was not processed: it is tried again on a fresh session, as the keep-alive race is
// for HTTP/1.1. A reset before the response is a failure after the request reached
// the backend; after the response started, the client's stream is reset too.
class Http2Leg {
  constructor (exchange, backend, { fresh = false } = {}) {
    this.exchange = exchange
    this.backend = backend
    this.newSession = fresh
    const { protocol } = exchange.listener
    this.pool = protocol.nodeHttp2PoolFor(backend)
    this.scheme = protocol.backendTls === null ? 'http' : 'https'
    this.session = null
    this.stream = null
    this.gotBytes = false // the response started (then the request is not replayed)
    this.trailers = null
    this.error = null
    this.ended = false // the response is complete
    this.silentTicks = 0
    this.sentAt = 0
    this.abandoned = false
  }

  get connected () {
    return this.stream !== null
  }

  start () {
    this.pool.acquire(this, { fresh: this.newSession })
  }

  // A session with room for the stream: the headers, the body held so far, and its
  // end if it came.
  onSession (session) {
    this.session = session
    if (this.abandoned) return this.pool.streamDone(session)
    const { exchange } = this
    const { body } = exchange
    const { rewrite } = exchange.listener.protocol
    const headers = backendRequestHeaders(exchange.head, exchange, this.backend.hostHeader, rewrite, this.scheme)
    // A gRPC call's deadline, less the time it spent in lila (queued, connecting).
    if (exchange.deadline !== null) headers['grpc-timeout'] = exchange.deadline.left()
    const held = body.held()
    const endStream = body.done && held.length === 0 && exchange.clientTrailers === null
    let stream
    try {
      stream = session.request(headers, { endStream, waitForTrailers: !endStream })
    } catch (err) {
      this.pool.streamDone(session)
      return exchange.upstreamFailed(`refused a new stream (${err.code || err.message})`, 'connect', { reused: true })
    }
    this.stream = stream
    stream.leg = this
    addListeners(stream, BACKEND_STREAM)
    this.sentAt = performance.now()
    for (const piece of held) stream.write(piece)
    if (body.done && !endStream) stream.end() // then wantTrailers
    exchange.legConnected()
  }

  // The session could not be had. For want of descriptors, lila's own shortage: no
  // backend is blamed (the exchange answers 503), as to-http1.js does.
  onSessionFailed (reason, cause, err = null) {
    if (this.abandoned) return
    if (isLocalShortage(err)) {
      this.abandon()
      return this.exchange.shortOf(err)
    }
    this.exchange.upstreamFailed(reason, cause)
  }

  write (chunk) {
    this.silentTicks = 0
    return this.stream.write(chunk)
  }

  end () {
    this.stream.end() // then wantTrailers
  }

  onWantTrailers () {
    const trailers = this.exchange.clientTrailers
    const out = { __proto__: null }
    if (trailers !== null) {
      for (let i = 0; i < trailers.length; i += 2) {
        const had = out[trailers[i]]
        out[trailers[i]] = had === undefined ? trailers[i + 1] : [].concat(had, trailers[i + 1])
      }
    }
    try {
      this.stream.sendTrailers(out)
    } catch (err) {
      this.stream.close(NGHTTP2_CANCEL)
    }
  }

  pause () {
    if (this.stream !== null) this.stream.pause()
  }

  resume () {
    if (this.stream !== null) this.stream.resume()
  }

  abandon () {
    if (this.abandoned) return
    this.abandoned = true
    if (this.stream !== null) {
      if (!this.stream.destroyed) this.stream.close(this.ended ? NGHTTP2_NO_ERROR : NGHTTP2_CANCEL)
    } else if (this.session === null) {
      this.pool.cancel(this)
    }
  }

  // A refused stream: the same backend again, on a fresh session.
  again () {
    return new Http2Leg(this.exchange, this.backend, { fresh: true })
  }

  // The listener's sweep: a backend silent for --timeout; not while lila holds the
  // stream paused for a client that does not read.
  onSweep (silentLimit) {
    const stream = this.stream
    if (stream === null || stream.isPaused() || this.ended) return
    if (++this.silentTicks >= silentLimit) this.exchange.upstreamFailed('timed out', 'timeout')
  }

  heard () {
    this.silentTicks = 0
    this.session.heard()
    this.exchange.session.touch()
  }

  onInterim (headers) {
    this.heard()
    const status = headers[':status']
    if (status >= 100 && status < 200 && status !== 101) this.exchange.interim(relayedHeaders(headers))
  }

  onResponse (headers, flags) {
    if (this.abandoned) return
    this.heard()
    this.gotBytes = true
    const { exchange, stream } = this
    const status = headers[':status']
    if (exchange.answered(status, performance.now() - this.sentAt)) return // dropped: retried elsewhere
    // Headers that end the stream (gRPC's trailers-only answer): a client stream's
    // endAfterHeaders is not set by Node, the frame's END_STREAM flag says it.
    const bodyless = (flags & NGHTTP2_FLAG_END_STREAM) !== 0 || stream.endAfterHeaders
    const out = relayedHeaders(headers)
    const rules = exchange.listener.protocol.rewrite.response
    if (rules !== null) rules.apply(out, exchange) // --set-response-header, --request-id
    exchange.respond(out, { bodyless, trailers: !bodyless, headBytes: headSize(out) })
  }

  onData (chunk) {
    if (this.abandoned) return
    this.heard()
    this.exchange.toClient(chunk)
  }

  onTrailers (headers) {
    this.trailers = relayedTrailers(headers)
  }

  onEnd () {
    if (this.abandoned || !this.gotBytes) return
    this.ended = true
    this.exchange.responseDone(this.trailers)
    // The backend answered before the request's body was all sent: it is not wanted.
    if (!this.stream.writableFinished) this.stream.close(NGHTTP2_NO_ERROR)
  }

  onClose () {
    this.pool.streamDone(this.session)
    if (this.abandoned || this.ended) return
    const code = this.stream.rstCode
    if (!this.gotBytes && code === NGHTTP2_REFUSED_STREAM) {
      return this.exchange.upstreamFailed('refused the stream', 'connect', { reused: true })
    }
    // Nothing HTTP/2 ever came back on the session (an HTTP/1.1 server answers the
    // preface with an error and closes): the request reached no HTTP/2 peer.
    if (!this.session.settled) {
      const reason = 'closed the connection without speaking HTTP/2 (is --backend-protocol right?)'
      return this.exchange.upstreamFailed(reason, 'connect')
    }
    const reason = this.error !== null && this.error.code !== 'ERR_HTTP2_STREAM_ERROR'
      ? (this.error.code || this.error.message)
      : `reset the stream (${codeName(code)})`
    this.exchange.upstreamFailed(this.gotBytes ? `${reason} mid-response` : reason, 'reset')
  }
}

// RFC 9113 7: the error codes, by number.
const CODE_NAMES = [
  'NO_ERROR', 'PROTOCOL_ERROR', 'INTERNAL_ERROR', 'FLOW_CONTROL_ERROR', 'SETTINGS_TIMEOUT', 'STREAM_CLOSED',
  'FRAME_SIZE_ERROR', 'REFUSED_STREAM', 'CANCEL', 'COMPRESSION_ERROR', 'CONNECT_ERROR', 'ENHANCE_YOUR_CALM',
  'INADEQUATE_SECURITY', 'HTTP_1_1_REQUIRED'
]

function codeName (code) {
  return CODE_NAMES[code] || `code ${code}`
}

// The response head's size, as its fields' lengths (the access log counts it).
function headSize (headers) {
  let size = 12
  for (const name of Object.keys(headers)) size += name.length + String(headers[name]).length + 4
  return size
}

module.exports = { Http2Leg }
