'use strict'

const { clientAddress } = require('../origin')
const { Connection } = require('../../wire/h2/connection')
const { attach } = require('../../wire/h2/socket')
const { PROTOCOL_ERROR, INTERNAL_ERROR, ENHANCE_YOUR_CALM } = require('../../wire/h2/constants')
const { IGNORE, OPEN, HALF_CLOSED_LOCAL } = require('../../wire/h2/stream')
const { Lingering } = require('./linger')
const { LINGER_MS } = require('../../limits')
const { callType } = require('../message/grpc')
const { cutTrailers } = require('../message/replies')
const { refusalOf } = require('./request')
const { STREAM } = require('./stream-handler')
const { readInto, fed } = require('./client-reads')
const { responseList, trailerListOf, sizeOf } = require('./headers')
const { Fields, responseFields } = require('../message/rewrite')
const { answerList } = require('./replies')

const EMPTY = Buffer.alloc(0)
const CONTINUE = [':status', '100']
// What is known of a request whose head was too large to keep.
const OVERSIZED = Object.freeze({ method: 'GET', contentType: null, fields: Object.freeze([]) })
// The fields of the head being listed (message/rewrite.js): one array for all sessions.
const FIELDS = new Fields()

// What lila's HTTP/2 server side tells clients (RFC 9113 6.5.2) and the limits its
// codec keeps (wire/h2/connection.js DEFAULTS for the rest: windows, header list size,
// the floods it bounds; docs/http2.md). Streams per connection like HAProxy's 100 and
// nginx's 128 (more are refused, REFUSED_STREAM). Frames that do no work (PING,
// SETTINGS, empty DATA, WINDOW_UPDATE, PRIORITY) past 100 beyond what real traffic
// earns end the connection with ENHANCE_YOUR_CALM: a keep-alive PING every few
// seconds never comes near (each listener sweep halves the count), gRPC's BDP PINGs
// follow the DATA lila sends, and a flood of 300 is stopped before the first acks pile
// up (test/http2-floods.test.js).
const SERVER_OPTIONS = {
  maxConcurrentStreams: 128,
  maxGlitches: 100
}

// One HTTP/2 client connection: a Listener's session (see listener.js), made by the
// protocol for a TLS connection that agreed on h2 (http/protocol.js newSession), or
// when an HTTP/1.1 session found the connection preface in the clear (startHttp2).
// lila's own codec (wire/h2) frames it on the socket; each request becomes an exchange
// the protocol makes (newExchange: http/exchange.js) on its stream, and this is that
// exchange's client: what it answers goes out as HTTP/2 headers, DATA and
// trailers. It answers the listener too: its sweeps (an idle connection, the exchanges'
// timeouts, the codec's flood counters), a graceful close (drain: GOAWAY twice, the
// streams in flight finish) and the end (sessionDone, once).
class Http2Session {
  constructor (listener, socket) {
    this.listener = listener
    this.socket = socket
    this.clientAddress = clientAddress(socket)
    this.conn = new Connection(this, 'server', SERVER_OPTIONS)
    this.exchanges = new Set() // the streams being served
    this.idleTicks = 0 // listener sweeps since a stream moved a byte (--idle-timeout)
    this.ended = false
    this.draining = false // drain() was asked
    this.drainTimer = null // draining: the grace before the connection closes
    this.goingAway = false // draining, the first GOAWAY sent: the second waits for its PING
    this.heldEnds = null // meanwhile, the streams' last frames, held for the second (goAway)
    this.awaitingStream = false // draining, idle past the grace: a stream now gets GOAWAY twice
    this.lingering = null // a Lingering (linger.js): streams whose body comes after their response
  }

  // The connection's bytes from here on are the codec's, `buf` (what an HTTP/1.1
  // session read, or null) first: a preface that breaks off after "PRI * HTTP/2.0" is
  // the codec's to refuse (GOAWAY PROTOCOL_ERROR).
  start (buf = null) {
    const { socket } = this
    // A client's FIN ends an HTTP/2 connection (lila's listeners allow half-open TCP).
    socket.allowHalfOpen = false
    attach(socket, this.conn)
    readInto(this)
    if (buf !== null) this.conn.receive(buf)
    if (!socket.destroyed) socket.resume()
  }

  // A per-client limit turned the client away (listener.js admit) before any stream:
  // GOAWAY ENHANCE_YOUR_CALM, the reason as its debug data, and the connection closed.
  turnAway ({ detail }) {
    this.start(null)
    this.conn.fail(ENHANCE_YOUR_CALM, detail)
  }

  // A body's pieces are bare DATA: an HTTP/1.1 backend gets them in chunks of lila's.
  get chunkedPieces () {
    return false
  }

  // A response head goes into the codec's output at once (it leaves with the DATA of
  // the same turn of the event loop anyway).
  get holdsHead () {
    return false
  }

  // --- The connection's owner (wire/h2/connection.js) ---

  onStream (conn, s, head, endStream) {
    this.idleTicks = 0
    const refused = refusalOf(head)
    if (refused !== null) return this.refuse(s, head, refused[0], refused[1])
    const x = this.listener.protocol.newExchange(this, head, head.size, s)
    s.user = x
    this.exchanges.add(x)
    x.start()
    if (this.awaitingStream) { // draining, idle past the grace: this one is served, as when busy
      this.awaitingStream = false
      this.goAway()
    }
    return STREAM
  }

  // A request whose header list is past the codec's limit (64 KiB): 431, with
  // --error-page's page as HTTP/1.1 clients get it; nothing of its head was kept.
  onOversized (conn, s) {
    this.idleTicks = 0
    return this.refuse(s, OVERSIZED, 431, 'request head too large')
  }

  onSettings () {}
  onGoaway () {}
  onStreamClosed () {}
  onPingAck () {
    if (this.goingAway) this.closeNow() // the client read the first GOAWAY
  }

  // The connection is over: every stream heard CLOSED first.
  onClose () {
    if (this.ended) return
    this.ended = true
    clearTimeout(this.drainTimer)
    this.heldEnds = null // nothing left to write them to
    this.lingering = null
    for (const x of [...this.exchanges]) this.streamGone(x)
    this.listener.sessionDone(this)
  }

  // A request lila will not forward (CONNECT, too large, Host against :authority):
  // answered on its stream; the connection and its other streams go on.
  refuse (s, head, status, detail) {
    const { listener } = this
    listener.log.debug(`${status} to ${this.clientAddress} (HTTP/2): ${detail}`)
    listener.protocol.stats.refused(status)
    const grpc = callType(head, listener.protocol.grpc)
    const page = listener.errorPage(status) // --error-page
    const { list, body } = answerList(status, detail, { grpc, head: head.method === 'HEAD', page })
    if (this.heldEnds !== null) this.heldEnds.push(() => this.whole(s, list, body))
    else this.whole(s, list, body)
    return IGNORE
  }

  // The client reset the stream, or the connection ended under it.
  streamGone (x) {
    this.exchanges.delete(x)
    x.onClientClose()
  }

  // --- The exchange's client (see http/exchange.js) ---

  sendContinue (x) {
    this.conn.headers(x.stream, CONTINUE, false)
    return true
  }

  interim (x, res) {
    if (res.status === 101) return
    responseFields(res, false, null, x, null, FIELDS)
    this.conn.headers(x.stream, responseList(res.status, FIELDS, -1), false)
  }

  takesChunked () {
    return false
  }

  // The final head, as a header list; -1 when the stream is gone. Its size counts as
  // HTTP/1.1 would write it.
  respond (x, res, how, cookie) {
    const s = x.stream
    if (!s.writable) return -1
    const rules = this.listener.protocol.rewrite.response
    // The Trailer field stays when its trailers can follow: an HTTP/2 or chunked body.
    responseFields(res, res.chunked || res.version === 2, rules, x, cookie, FIELDS)
    const list = responseList(res.status, FIELDS, res.contentLength)
    if (how.bodyless && this.heldEnds !== null) this.heldEnds.push(() => this.conn.headers(s, list, true))
    else this.conn.headers(s, list, how.bodyless)
    return sizeOf(list)
  }

  flushHead () {}

  send (x, piece) {
    return this.conn.write(x.stream, piece, false)
  }

  // The body is all sent: the trailers, or an empty DATA, end the stream.
  finishResponse (x, trailers) {
    const s = x.stream
    if (!s.writable) return 0
    if (this.heldEnds !== null) {
      this.heldEnds.push(() => this.finishResponse(x, trailers))
      return 0
    }
    const list = trailerListOf(trailers)
    if (list === null) this.conn.write(s, EMPTY, true)
    else this.conn.headers(s, list, true)
    return 0
  }

  tunnelHead () {
    return 0 // HTTP/2 requests never ask to switch protocols
  }

  // lila's own answer: headers, and a body unless empty (then the headers end the
  // stream: a gRPC client reads them as trailers). Returns the body's size.
  // `more`: answerOf's { retryAfter, exhausted, fields, exact, page }.
  answer (x, status, detail, more) {
    const s = x.stream
    if (!s.writable) return 0
    const rules = this.listener.protocol.rewrite.response
    const options = { ...more, head: x.head.method === 'HEAD', grpc: x.grpc, rules, ctx: x }
    const { list, body } = answerList(status, detail, options)
    if (this.heldEnds !== null) this.heldEnds.push(() => this.whole(s, list, body))
    else this.whole(s, list, body)
    return body.length
  }

  // An answer whole on `s`: headers, and a body unless empty; what still comes of the
  // request's body is not wanted (finishBody).
  whole (s, list, body) {
    this.conn.headers(s, list, body.length === 0)
    if (body.length > 0) this.conn.write(s, body, true)
    this.finishBody(s)
  }

  // The request's body stopped coming (408: answered), or its trailers cannot be
  // carried (the stream is malformed: reset).
  refuseBody (x, status, detail) {
    this.listener.log.debug(`HTTP/2 stream from ${this.clientAddress}: ${status} ${detail}`)
    if (status === 408 || status === 413) {
      return this.answer(x, status, detail, { retryAfter: 0, exhausted: false, page: x.errorPage(status) })
    }
    this.resetStream(x.stream, PROTOCOL_ERROR)
    return 0
  }

  pauseBody (x) {
    this.conn.pause(x.stream)
  }

  resumeBody (x) {
    this.conn.resume(x.stream)
  }

  bodyPaused (x) {
    return x.stream.paused
  }

  // A failure after the response started, or a fault's reset: this stream only, never
  // the connection other streams share. A gRPC call its backend failed (`why`) ends
  // with trailers saying UNAVAILABLE instead (message/replies.js cutTrailers). Either
  // is the stream's last frame: held while the ends are (goAway).
  cut (x, why = null) {
    const s = x.stream
    if (why !== null && x.grpc !== null && s.writable) {
      const trailers = cutTrailers(why)
      if (this.heldEnds !== null) this.heldEnds.push(() => this.conn.headers(s, trailers, true))
      else this.conn.headers(s, trailers, true)
      return
    }
    this.resetStream(s, INTERNAL_ERROR)
  }

  reset (x) {
    this.resetStream(x.stream, INTERNAL_ERROR)
  }

  // RST_STREAM, a stream's last frame too: held while the ends are (goAway).
  resetStream (s, code) {
    if (this.heldEnds !== null) this.heldEnds.push(() => this.conn.reset(s, code))
    else this.conn.reset(s, code)
  }

  // What the codec was given may wait in its output after the write that took it: a
  // read buffer is never said to be free (http1/connection-pool.js READ).
  holdsWrites () {
    return true
  }

  touch () {
    this.idleTicks = 0
  }

  // DATA of the client's went to x (client-reads.js notes who holds a read's bytes).
  bodyRead (x) {
    this.idleTicks = 0
    fed(this.socket, x)
  }

  exchangeDone (x) {
    this.exchanges.delete(x)
    const s = x.stream
    if (this.heldEnds !== null) this.heldEnds.push(() => this.finishBody(s)) // after its end
    else this.finishBody(s)
  }

  // A response whole before the request's body ended (a refusal, a 401): what still
  // comes is dropped, and the stream reset NO_ERROR after LINGER_MS (linger.js).
  finishBody (s) {
    if (s.state !== HALF_CLOSED_LOCAL && !(s.state === OPEN && s.endQueued)) return
    this.conn.drop(s)
    if (this.lingering === null) this.lingering = new Lingering(this.conn, this.listener.ticksFor(LINGER_MS))
    this.lingering.add(s)
  }

  // --- The listener's session (listener.js) ---

  // The listener's sweep: the codec's flood counters decay, and each stream's
  // --timeout and --body-timeout (Exchange#onSweep).
  onSweep (silentLimit, bodyLimit) {
    this.conn.sweep()
    for (const x of this.exchanges) x.onSweep(silentLimit, bodyLimit)
  }

  // No stream moved a byte for --idle-timeout. While a backend works on a request the
  // client has nothing to say: the backend's timeout applies. An idle connection is
  // closed with a GOAWAY; one whose streams stall is cut.
  onIdleSweep (idleLimit) {
    if (this.lingering !== null && this.lingering.sweep()) this.lingering = null
    if (++this.idleTicks < idleLimit) return
    for (const x of this.exchanges) if (x.awaitingBackend()) return
    if (this.exchanges.size === 0 && this.idleTicks < 2 * idleLimit) this.conn.shutdown()
    else this.destroy()
  }

  destroy () {
    this.socket.destroy()
    this.conn.destroy('lila closed the connection')
  }

  // Graceful close (a shutdown, an upgrade, a reload that removes the listener): none
  // of the client's streams is refused. For `graceMs` the connection is served as it
  // was: a client that ends it meanwhile needs no GOAWAY (one that gets it cannot open
  // the streams it meant to, which h2load counts as failures). Then a connection with
  // streams open gets GOAWAY twice (goAway); an idle one waits as long again for a
  // stream (then likewise) and is closed if none comes.
  drain (graceMs) {
    if (this.draining) return
    this.draining = true
    this.graceMs = graceMs
    this.drainTimer = setTimeout(() => {
      this.drainTimer = null
      if (this.exchanges.size > 0) return this.goAway()
      this.awaitingStream = true
      this.drainTimer = setTimeout(() => this.closeNow(), graceMs)
    }, graceMs)
  }

  // GOAWAY twice, as RFC 9113 6.8 advises: first with the highest stream id (open no
  // more), then, once a PING comes back (the client has read the first) or `graceMs`
  // passed, with the last stream taken (closeNow), so that a stream the client opened
  // meanwhile is served, not refused. Meanwhile the streams' last frames are held
  // (heldEnds): a client that read the first GOAWAY may close as soon as its last stream
  // ends (Node's does), and an end that overtook the PING's answer left it closed
  // before the last GOAWAY came. Their DATA goes on; only the end waits, one round trip.
  goAway () {
    clearTimeout(this.drainTimer)
    this.goingAway = true
    if (!this.conn.announceShutdown()) return this.closeNow()
    this.heldEnds = []
    this.drainTimer = setTimeout(() => this.closeNow(), this.graceMs)
  }

  // The last GOAWAY, then the ends held for it: the streams open finish, then the
  // connection closes.
  closeNow () {
    clearTimeout(this.drainTimer)
    this.drainTimer = null
    this.goingAway = false
    this.awaitingStream = false
    this.conn.shutdown()
    const held = this.heldEnds
    this.heldEnds = null
    if (held !== null) for (const end of held) end()
  }
}

module.exports = { Http2Session }
