'use strict'

const { clientAddress } = require('../bind')
const { reasonOf, HttpError } = require('../../errors')
const { handlers, addListeners } = require('../socket-events')
const { requestFromHeaders } = require('./request')
const { StreamExchange, linger } = require('./exchange')
const { replyOf } = require('./replies')
const { isGrpcType, callType } = require('../grpc')

// Node's ServerHttp2Session handlers shared by every session (socket-events.js): `this`
// is Node's session, which carries ours as `owner`.
const H2 = handlers({
  stream (stream, headers, flags, rawHeaders) { this.owner.onStream(stream, rawHeaders) },
  ping () { this.owner.onControlFrame('PING') },
  remoteSettings () { this.owner.onControlFrame('SETTINGS') },
  error (err) { this.owner.onError(err) },
  close () { this.owner.onClose() }
})

const { NGHTTP2_NO_ERROR: NO_ERROR } = require('http2').constants
const LAST_STREAM_ID = 2 ** 31 - 1

// Refused streams' late errors (a reset after the answer) go nowhere.
function ignore () {}

// Rapid reset (CVE-2023-44487): a client that opens streams and resets them at once
// costs lila (and backends) a request each while it holds nothing. A stream the client
// resets before its response and within PREMATURE_MS of opening it is premature; once
// PREMATURE_MIN of them make more than half of the connection's streams, the connection
// is closed (Envoy's rule). Clients that cancel calls (gRPC deadlines) rarely do so
// within a second, or for most of their streams.
const PREMATURE_MIN = 100
const PREMATURE_MS = 1000

// SETTINGS and PING floods: each costs lila an acknowledgement and the client nothing.
// nghttp2 stops them only when its queue of acknowledgements outgrows 1,000, which
// depends on how fast the socket drains: a flood that never outruns the socket was
// never stopped (100,000 frames long, on a busy machine). So lila meters them: a
// bucket of CONTROL_BURST, refilled at CONTROL_RATE a second and whole when a stream
// opens or moves a byte; a frame that finds it empty closes the connection with
// GOAWAY ENHANCE_YOUR_CALM. Keep-alive PINGs (one every few seconds) never empty it,
// nor do PINGs that come with DATA (gRPC's window probes).
const CONTROL_BURST = 100
const CONTROL_RATE = 10
const ENHANCE_YOUR_CALM = 0xb

// One HTTP/2 client connection: a Listener's session (see listener.js), made when an
// HTTP/1.1 session found its client speaks HTTP/2 (protocol.js startHttp2). Node's
// http2 module does the framing, flow control and HPACK on the socket; this turns each
// stream into a StreamExchange (exchange.js) balanced on its own, and answers the
// listener: its sweeps (idle connection, silent backends), a graceful close (GOAWAY,
// in-flight streams finish) and the end (sessionDone, once).
class Http2Session {
  constructor (listener, socket) {
    this.listener = listener
    this.socket = socket
    this.clientAddress = clientAddress(socket)
    this.h2 = null // Node's ServerHttp2Session, once attached
    this.exchanges = new Set() // the streams being served
    this.idleTicks = 0 // listener sweeps since a stream moved a byte (--idle-timeout)
    this.ended = false
    this.closing = false // a graceful close was asked
    this.drainTimer = null // draining: the grace before the connection closes (goAway)
    this.heldEnds = null // draining, the first GOAWAY sent: the ends of bodies waiting for its PING
    this.awaitingStream = false // draining, idle past the grace: a stream now gets GOAWAY twice
    this.streams = 0 // streams opened
    this.prematureResets = 0 // of them, reset by the client at once (see PREMATURE_MIN)
    this.controlTokens = CONTROL_BURST // PING and SETTINGS frames allowed now (CONTROL_BURST)
    this.controlAt = 0 // when the bucket was last filled (ms)
  }

  // Node's http2 made its session for the socket.
  attach (h2) {
    this.h2 = h2
    h2.owner = this
    addListeners(h2, H2)
    if (this.closing) this.startDrain()
  }

  start () {}

  onStream (stream, rawHeaders) {
    this.idleTicks = 0
    this.controlTokens = CONTROL_BURST
    this.streams++
    let head
    try {
      head = requestFromHeaders(rawHeaders, stream.endAfterHeaders)
    } catch (err) {
      if (!(err instanceof HttpError)) throw err
      return this.refuse(stream, err.status, err.message, callTypeOf(rawHeaders, this.listener.protocol.grpc))
    }
    if (this.heldEnds !== null) this.holdEnd(stream)
    const exchange = new StreamExchange(this, stream, head)
    this.exchanges.add(exchange)
    exchange.start()
    if (this.awaitingStream) { // draining, idle past the grace: this one is served, as when busy
      this.awaitingStream = false
      clearTimeout(this.drainTimer)
      this.goAway()
    }
  }

  // A request lila will not forward (malformed, CONNECT, too large): answered on its
  // stream; the connection and its other streams go on.
  // `grpc`: a gRPC call's content-type, for a gRPC-shaped answer (grpc.js), or null.
  refuse (stream, status, detail, grpc = null) {
    this.listener.log.debug(`${status} to ${this.clientAddress} (HTTP/2): ${detail}`)
    this.listener.protocol.stats.refused(status)
    stream.on('error', ignore)
    if (stream.destroyed || stream.closed) return
    const { headers, body } = replyOf(status, detail, { grpc })
    stream.respond(headers, { endStream: body.length === 0 })
    if (body.length > 0) stream.end(body)
    if (!stream.endAfterHeaders) linger(stream) // its body is not wanted
  }

  // A stream moved a byte.
  touch () {
    this.idleTicks = 0
    this.controlTokens = CONTROL_BURST
  }

  exchangeDone (exchange) {
    this.exchanges.delete(exchange)
  }

  // The client reset a stream before its response, `ms` after opening it.
  clientReset (ms) {
    if (ms >= PREMATURE_MS || this.ended || this.h2.destroyed) return
    if (++this.prematureResets < PREMATURE_MIN || this.prematureResets * 2 <= this.streams) return
    this.listener.log.debug(`client ${this.clientAddress} (HTTP/2): ${this.prematureResets} of ${this.streams} ` +
      'streams reset at once (rapid reset); connection closed')
    this.destroy()
  }

  // A PING or SETTINGS frame from the client (see CONTROL_BURST).
  onControlFrame (type) {
    const now = Date.now()
    this.controlTokens = Math.min(CONTROL_BURST, this.controlTokens + (now - this.controlAt) * CONTROL_RATE / 1000)
    this.controlAt = now
    if (--this.controlTokens >= 0 || this.ended) return
    this.listener.log.debug(`client ${this.clientAddress} (HTTP/2): ${type} frames faster than ${CONTROL_RATE}/s ` +
      'without a request (a flood); connection closed')
    this.h2.destroy(undefined, ENHANCE_YOUR_CALM)
    this.socket.destroy()
  }

  // The listener's sweep, for each stream's --timeout and --body-timeout (see
  // StreamExchange#onSweep).
  onSweep (silentLimit, bodyLimit) {
    for (const exchange of this.exchanges) exchange.onSweep(silentLimit, bodyLimit)
  }

  // The listener's sweep: no stream moved a byte for --idle-timeout. While a backend
  // works on a request the client has nothing to say: the backend's timeout applies.
  // An idle connection is closed with a GOAWAY; one whose streams stall is cut.
  onIdleSweep (idleLimit) {
    if (++this.idleTicks < idleLimit || this.h2 === null) return
    for (const exchange of this.exchanges) if (exchange.awaitingBackend()) return
    if (this.exchanges.size === 0 && this.idleTicks < 2 * idleLimit) this.h2.close()
    else this.destroy()
  }

  onError (err) {
    this.listener.log.debug(`client ${this.clientAddress} (HTTP/2): ${reasonOf(err)}`)
  }

  // Node's session closed (or never came: the client left first).
  onClose () {
    if (this.ended) return
    this.ended = true
    clearTimeout(this.drainTimer)
    for (const exchange of [...this.exchanges]) exchange.onClientClose()
    this.listener.sessionDone(this)
  }

  destroy () {
    if (this.h2 !== null) this.h2.destroy()
    this.socket.destroy()
  }

  // Graceful close (a shutdown, an upgrade, a reload that removes the listener): none
  // of the client's streams is refused. For `graceMs` the connection is served as it
  // was: a client that ends it meanwhile needs no GOAWAY (one that gets it cannot open
  // the streams it meant to, which h2load counts as failures). Then a connection with
  // streams open gets GOAWAY twice (goAway); an idle one waits as long again for a
  // stream (then likewise) and is closed if none comes.
  drain (graceMs) {
    if (this.closing) return
    this.closing = true
    this.graceMs = graceMs
    if (this.h2 !== null) this.startDrain()
  }

  startDrain () {
    this.drainTimer = setTimeout(() => {
      this.drainTimer = null
      if (this.exchanges.size > 0) return this.goAway()
      this.awaitingStream = true
      this.drainTimer = setTimeout(() => this.closeNow(), this.graceMs)
    }, this.graceMs)
  }

  // GOAWAY twice, as RFC 9113 6.8 advises: first with the highest stream ID (open no
  // more), then, once a PING comes back (the client has read the first), with the last
  // stream taken, so that a stream the client opened meanwhile is served, not refused.
  // Node stops reading a connection that sent a GOAWAY as soon as no stream is open,
  // which would leave such a stream, and the PING's answer, unread: so the first goes
  // only while streams are open, and they stay open (their bodies' ends wait) until
  // the PING is back, or `graceMs` passed.
  goAway () {
    const h2 = this.h2
    if (h2.closed || h2.destroyed) return
    this.heldEnds = []
    for (const exchange of this.exchanges) this.holdEnd(exchange.stream)
    h2.goaway(NO_ERROR, LAST_STREAM_ID)
    this.drainTimer = setTimeout(() => this.closeNow(), this.graceMs)
    if (!h2.ping(() => this.closeNow())) this.closeNow()
  }

  // The last GOAWAY: the streams open finish, then the connection closes.
  closeNow () {
    clearTimeout(this.drainTimer)
    this.drainTimer = null
    const held = this.heldEnds || []
    this.heldEnds = null
    for (const end of held) end()
    if (!this.h2.closed && !this.h2.destroyed) this.h2.close()
  }

  // While the first GOAWAY waits for its PING, the end of a response body (END_STREAM)
  // waits too (a round trip; Writable's _final is where Node sends it).
  holdEnd (stream) {
    const final = stream._final
    stream._final = cb => {
      if (this.heldEnds === null) return final.call(stream, cb)
      this.heldEnds.push(() => final.call(stream, cb))
    }
  }
}

// A stream's header list lila could not read as a request: is it a gRPC call? (Its
// content-type says so, or the listener is --protocol grpc.)
function callTypeOf (rawHeaders, grpcListener) {
  let grpc = null
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i] === 'content-type' && isGrpcType(rawHeaders[i + 1])) grpc = rawHeaders[i + 1]
  }
  return callType({ grpc }, grpcListener)
}

module.exports = { Http2Session }
