'use strict'

// One HTTP/2 connection (RFC 9113), either side of it, as a state machine without I/O:
// bytes in (receive), frames out into one output buffer (output.take()), and plain
// method calls on an owner and on each stream's handler. Its transport (socket.js
// joins it to a socket; the tests use a fake) is told when output waits (flushSoon),
// when the connection is over (close: write what waits, then end), and tells it in
// return when it cannot take more for now (setCongested).
//
// Server side (role 'server'): the client's preface and SETTINGS, then each request
// is handed to owner.onStream(conn, stream, head, endStream), which returns the
// stream's handler. Client side (role 'client'): lila's preface and SETTINGS, then
// request(handler, list, endStream) opens a stream while canOpen() says so (the
// peer's SETTINGS_MAX_CONCURRENT_STREAMS, its GOAWAY, the ids left).
//
// The owner (one object may own many connections):
//   onStream(conn, stream, head, endStream) -> handler   a request (server side)
//   onOversized(conn, stream) -> handler   (optional) a request past the header limits,
//                             no head kept: the owner answers 431 (else the codec does)
//   onSettings(conn)          the peer's SETTINGS took effect (capacity may change)
//   onGoaway(conn, lastStreamId, code)   the peer goes away; streams above lastStreamId
//                             were reset (REFUSED_STREAM: not processed, safe to retry)
//   onStreamClosed(conn, stream)   a stream left the table (a slot is free)
//   onPingAck(conn)           the peer answered lila's PING
//   onClose(conn, code, reason)    the connection is over (its transport closes)
// A stream's handler:
//   onHead(stream, head, endStream)   a response head, 1xx or final (client side)
//   onData(stream, chunk, endStream)  body bytes: a view, valid during the call only when
//                                     the transport reads into its buffer again (an
//                                     owner's, as proxy/http2/client-reads.js does)
//   onTrailers(stream, fields)        the trailer section, which ends the body
//   onReset(stream, code)             the stream is gone: the peer's RST_STREAM, an error
//                                     on it, REFUSED_STREAM (the peer's GOAWAY did not
//                                     process it), CLOSED (-1): the connection ended
//   onDrain(stream)                   write() said false; there is room again
// Flow control: what the peer sends is given back (WINDOW_UPDATE) as the handler takes
// it, unless the stream is paused (pause/resume): then the peer can send at most the
// stream's window, all lila ever holds for it. drop(s): what still comes on s goes
// nowhere, its window given back as it comes.
//
// The connection owns its parts, each writing its own state: an Inbound (inbound.js)
// cuts what comes into frames and takes DATA and header blocks, handing the frames
// below back here; an Outbound (outbound.js) sends heads and DATA under the peer's flow
// control; a Flood (flood.js) counts what does no work. Here: the stream table (the
// states: stream.js), starting and ending; the connection's own frames (SETTINGS,
// PING, GOAWAY, WINDOW_UPDATE, RST_STREAM, PRIORITY) are its methods too, kept in
// control-frames.js.

const { Output } = require('./output')
const { Inbound } = require('./inbound')
const { Outbound } = require('./outbound')
const { Flood } = require('./flood')
const { RecentStreams, CLOSED: CLOSED_STATE } = require('./stream')
const { controlFrames } = require('./control-frames')
const C = require('./constants')

// A stream the connection ended under (onReset's code).
const CLOSED = -1

// The limits and windows each connection keeps (the floods they bound: docs/http2.md).
const DEFAULTS = {
  maxConcurrentStreams: 128, // streams the peer may open (server side)
  initialWindowSize: 256 * 1024, // each stream's receive window
  connectionWindow: 1024 * 1024, // the connection's receive window
  maxHeaderListSize: 64 * 1024, // decoded, as RFC 9113 counts it
  maxFields: 128, // fields in one header list, pseudo-headers included
  headerTableSize: 4096, // the HPACK table the peer may keep for lila
  maxGlitches: 1000, // frames that do no work (PING, SETTINGS, empty DATA, ...) beyond those work earns
  maxRapidResets: 100, // streams the peer reset before their response, when most of them
  maxRefused: 100, // streams refused over the limit, between sweeps
  maxControlBacklog: 10000, // answers (acks, resets) waiting on a peer that does not read
  maxPings: 10, // lila's PINGs awaiting their ack
  assumedMaxStreams: 100, // the peer's SETTINGS_MAX_CONCURRENT_STREAMS until it says (client side)
  maxStreamId: C.MAX_STREAM_ID // the last id lila opens (client side; tests lower it)
}

const PING_PAYLOAD = Buffer.from('lila-h2!', 'latin1')

class Connection {
  constructor (owner, role, options = {}) {
    this.owner = owner
    this.transport = null // { flushSoon(), close() }: whoever carries the bytes (start)
    this.server = role === 'server'
    this.options = { ...DEFAULTS, ...options }
    this.output = new Output()
    this.flood = new Flood(this.options)
    this.streams = new Map()
    this.recent = new RecentStreams()
    this.inbound = new Inbound(this)
    this.outbound = new Outbound(this)
    this.closed = false
    this.closing = false // a GOAWAY of lila's was sent: no new streams
    this.goneAway = false // the peer's GOAWAY came
    this.peerLastId = C.MAX_STREAM_ID // the last stream of lila's the peer's GOAWAY processes
    // The peer's SETTINGS_MAX_CONCURRENT_STREAMS; until it says, assumedMaxStreams
    // (RFC 9113 leaves it unlimited; peers rarely allow more).
    this.peerMaxStreams = this.options.assumedMaxStreams
    this.settingsSeen = false // the peer's first SETTINGS came (it spoke)
    this.reads = 0 // receive() calls: a peer heard from (pool.js counts sweeps without)
    this.pings = 0 // lila's PINGs awaiting their ack
  }

  // --- Starting, ending ---

  // Carried by `transport` from now on: lila's preface (client side) and SETTINGS, and
  // the connection's window raised.
  start (transport) {
    this.transport = transport
    const o = this.options
    if (!this.server) this.output.raw(C.PREFACE)
    const settings = [
      C.SETTINGS_INITIAL_WINDOW_SIZE, o.initialWindowSize,
      C.SETTINGS_MAX_HEADER_LIST_SIZE, o.maxHeaderListSize
    ]
    if (this.server) settings.push(C.SETTINGS_MAX_CONCURRENT_STREAMS, o.maxConcurrentStreams)
    else settings.push(C.SETTINGS_ENABLE_PUSH, 0)
    if (o.headerTableSize !== 4096) settings.push(C.SETTINGS_HEADER_TABLE_SIZE, o.headerTableSize)
    this.output.settings(settings)
    this.inbound.openWindow()
    this.wrote()
  }

  // A graceful end: GOAWAY, the streams open finish, then onClose. The server side
  // names the last stream it took; streams the peer opens later are ignored.
  shutdown () {
    if (this.closed || this.closing) return
    this.closing = true
    this.output.goaway(this.inbound.lastPeerId, C.NO_ERROR, '')
    this.wrote()
    if (this.streams.size === 0) this.finish(C.NO_ERROR, 'done')
  }

  // The first of a graceful end's two GOAWAYs (RFC 9113 6.8): the highest stream id,
  // so the peer opens no more while the streams it opened meanwhile are still taken;
  // then a PING, whose ack (owner.onPingAck) says the peer read it, and shutdown() may
  // follow. False when no PING could go (or the connection is ending already).
  announceShutdown () {
    if (this.closed || this.closing) return false
    this.output.goaway(C.MAX_STREAM_ID, C.NO_ERROR, '')
    return this.ping()
  }

  // The transport is gone (or lila drops it): every stream ends with CLOSED.
  destroy (reason = 'the connection closed') {
    if (this.closed) return
    this.finish(CLOSED, reason)
  }

  // Decay the flood counters, and let an idle output buffer go: the owner calls it now
  // and then (a listener's sweep).
  sweep () {
    this.flood.sweep()
    this.output.sweep()
  }

  // A connection error: GOAWAY with its code, then every stream ends.
  fail (code, reason) {
    if (this.closed) return
    this.output.goaway(this.inbound.lastPeerId, code, reason.slice(0, 64))
    this.wrote()
    this.finish(code, reason)
  }

  finish (code, reason) {
    this.closed = true
    const streams = [...this.streams.values()]
    this.streams.clear()
    this.outbound.clear()
    for (const s of streams) {
      s.close()
      s.handler.onReset(s, CLOSED)
    }
    if (this.transport !== null) this.transport.close()
    this.owner.onClose(this, code, reason)
  }

  // --- What the owner and the streams' handlers call ---

  receive (chunk) {
    if (this.closed) return
    this.reads++
    this.inbound.receive(chunk)
  }

  // Can a new stream be opened (client side)?
  canOpen () {
    return !this.closed && !this.closing && !this.goneAway && this.streams.size < this.peerMaxStreams &&
      this.outbound.nextId <= this.options.maxStreamId
  }

  // Are lila's stream ids spent (client side)? Then only a new connection opens more.
  spent () { return this.outbound.nextId > this.options.maxStreamId }

  // Open a stream with a request's header list (client side); null if it cannot.
  request (handler, list, endStream) {
    if (!this.canOpen()) return null
    const s = this.outbound.open(handler, list, endStream, this.options.initialWindowSize)
    this.add(s)
    this.wrote()
    return s
  }

  headers (s, list, endStream) { this.outbound.headers(s, list, endStream) }
  write (s, chunk, endStream) { return this.outbound.write(s, chunk, endStream) }
  pause (s) { s.paused = true }
  resume (s) { this.inbound.resume(s) }
  drop (s) { this.inbound.drop(s) }

  // Reset s (CANCEL unless said): its handler hears nothing more.
  reset (s, code = C.CANCEL) {
    if (s.closed) return
    this.remove(s)
    this.rst(s.id, code)
  }

  // A PING of lila's (to find a dead peer); false when too many are unanswered.
  ping () {
    if (this.closed || this.pings >= this.options.maxPings) return false
    this.pings++
    this.output.ping(false, PING_PAYLOAD, 0)
    this.wrote()
    return true
  }

  // The transport: it could not take everything (congested), or took it all.
  setCongested (congested) {
    if (!congested) this.flood.drained()
    this.outbound.setCongested(congested)
  }

  // --- The stream table ---

  add (s) {
    this.streams.set(s.id, s)
    this.flood.streamOpened()
  }

  // A stream over SETTINGS_MAX_CONCURRENT_STREAMS (server side).
  refuse (id) {
    this.flood.refuse()
    this.streamErrorId(id, C.REFUSED_STREAM, 'over SETTINGS_MAX_CONCURRENT_STREAMS')
  }

  // lila sent END_STREAM on s.
  sent (s) {
    s.endLocal()
    this.settle(s)
  }

  // s closed by its END_STREAMs: it leaves the table, once its handler heard the last.
  settle (s) {
    if (s.state === CLOSED_STATE && this.streams.get(s.id) === s) {
      this.remove(s)
      if (this.closing && this.streams.size === 0) this.finish(C.NO_ERROR, 'done')
    }
  }

  remove (s) {
    this.outbound.forget(s)
    s.close()
    this.streams.delete(s.id)
    this.recent.add(s.id, false)
    this.owner.onStreamClosed(this, s)
    if (this.goneAway && this.streams.size === 0 && !this.closed) this.finish(C.NO_ERROR, 'the peer went away')
  }

  // Was stream `id` never opened? (Neither by lila nor by the peer, so far.)
  idle (id) {
    return (id & 1) === (this.server ? 0 : 1) ? id >= this.outbound.nextId : id > this.inbound.lastPeerId
  }

  // An answer the peer's frames asked for (flood.js counts those that pile up).
  control () {
    this.wrote()
    this.flood.answered(this.outbound.congested)
  }

  // A stream error: RST_STREAM, and its handler told.
  streamError (s, code, reason) {
    this.remove(s)
    this.rst(s.id, code)
    s.handler.onReset(s, code, reason)
  }

  streamErrorId (id, code, reason) {
    const s = this.streams.get(id)
    if (s !== undefined) return this.streamError(s, code, reason)
    this.rst(id, code)
  }

  rst (id, code) {
    this.output.rstStream(id, code)
    this.recent.add(id, true)
    this.control()
  }

  wrote () {
    if (this.output.length > 0 && this.transport !== null) this.transport.flushSoon()
  }
}

Object.assign(Connection.prototype, controlFrames)

module.exports = { Connection, DEFAULTS, CLOSED }
