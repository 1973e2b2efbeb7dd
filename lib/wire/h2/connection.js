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
//   onOversized(conn, stream) -> handler   (optional) a request whose header list is
//                             past the limits, its head not kept: the owner answers it
//                             (431) on the stream; without, the connection says 431
//   onSettings(conn)          the peer's SETTINGS took effect (capacity may change)
//   onGoaway(conn, lastStreamId, code)   the peer goes away; streams above lastStreamId
//                             were reset (REFUSED_STREAM: not processed, safe to retry)
//   onStreamClosed(conn, stream)   a stream left the table (a slot is free)
//   onPingAck(conn)           the peer answered lila's PING
//   onClose(conn, code, reason)    the connection is over (its transport closes)
// A stream's handler:
//   onHead(stream, head, endStream)   a response head, 1xx or final (client side)
//   onData(stream, chunk, endStream)  body bytes: a view valid during the call only
//                                     when the transport reuses its buffer (not
//                                     socket.js's); chunk may be empty when ending
//   onTrailers(stream, fields)        the trailer section, which ends the body
//   onReset(stream, code)             the stream is gone: the peer's RST_STREAM, a
//                                     protocol error on it, REFUSED_STREAM for a stream
//                                     the peer's GOAWAY did not process, CLOSED (-1) when
//                                     the connection ended under it
//   onDrain(stream)                   write() said false; there is room again
// Flow control: what the peer sends is given back (WINDOW_UPDATE) as the handler takes
// it, unless the stream is paused (pause/resume): then the peer can send at most the
// stream's window, which is all lila ever holds for it. drop(s): what still comes on
// s goes nowhere, its window given back as it comes.

const { Output } = require('./output')
const { HpackDecoder } = require('./hpack')
const { Inbound } = require('./inbound')
const { Outbound } = require('./outbound')
const C = require('./constants')

const { FRAME_HEADER, ProtocolError, connectionError } = C

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

const RECENT = 128 // closed streams remembered: those lila reset have their late frames ignored

class Connection {
  constructor (owner, role, options = {}) {
    this.owner = owner
    this.transport = null // { flushSoon(), close() }: whoever carries the bytes (start)
    this.server = role === 'server'
    const o = this.options = { ...DEFAULTS, ...options }
    this.output = new Output()
    this.decoder = new HpackDecoder(o.headerTableSize)
    this.streams = new Map()
    this.closed = false
    this.closing = false // a GOAWAY of lila's was sent: no new streams
    this.goneAway = false // the peer's GOAWAY came
    this.peerLastId = C.MAX_STREAM_ID // the last stream of lila's the peer's GOAWAY processes
    this.lastPeerId = 0 // the highest stream id the peer opened
    this.nextId = this.server ? 2 : 1 // lila's next stream (client side)
    this.recentIds = new Int32Array(RECENT) // streams closed lately, a ring
    this.recentReset = new Uint8Array(RECENT) // 1: lila reset it
    this.recentAt = 0
    // What the peer allows (its SETTINGS); until they come, the defaults, and
    // assumedMaxStreams streams (RFC 9113 leaves it unlimited; peers rarely allow more).
    this.peerMaxStreams = o.assumedMaxStreams
    this.peerWindow = C.DEFAULT_WINDOW
    this.peerFrameSize = C.DEFAULT_FRAME_SIZE
    this.sendWindow = C.DEFAULT_WINDOW // connection-level, lila -> peer
    this.recvWindow = C.DEFAULT_WINDOW // connection-level, peer -> lila (raised at start)
    this.recvUnacked = 0
    this.streamUpdateAt = o.initialWindowSize >>> 1
    this.connUpdateAt = o.connectionWindow >>> 1
    this.settingsSeen = false // the peer's first SETTINGS came (it spoke)
    this.reads = 0 // receive() calls: a peer heard from (pool.js counts sweeps without)
    this.blocked = [] // streams with DATA waiting for window
    this.waiting = [] // streams told to wait (write() said false)
    this.congested = false // the transport holds more than it wants
    // Input state.
    this.pending = null // a frame not yet whole
    this.prefaceLeft = this.server ? C.PREFACE.length : 0
    this.dataStream = null // a DATA frame being read: its stream, or null to skip
    this.dataLeft = 0 // its payload bytes still to come
    this.padLeft = 0 // then its padding
    this.dataEnd = false // then END_STREAM
    this.blockId = 0 // a header block awaiting CONTINUATION: its stream
    this.blockFlags = 0
    this.blockParts = null
    this.blockLength = 0
    this.blockPriority = -1 // the stream its HEADERS said it depends on
    // Flood accounting (sweep() decays it).
    this.glitches = 0
    this.refused = 0
    this.opened = 0
    this.earlyResets = 0
    this.controlBacklog = 0
    this.pings = 0
    this.work = 0 // frames of real work (requests in, heads and DATA out), two each
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
    if (o.connectionWindow > C.DEFAULT_WINDOW) {
      this.output.windowUpdate(0, o.connectionWindow - C.DEFAULT_WINDOW)
      this.recvWindow = o.connectionWindow
    }
    this.wrote()
  }

  // A graceful end: GOAWAY, the streams open finish, then onClose. The server side
  // names the last stream it took; streams the peer opens later are ignored.
  shutdown () {
    if (this.closed || this.closing) return
    this.closing = true
    this.output.goaway(this.lastPeerId, C.NO_ERROR, '')
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

  // Decay the flood counters: the owner calls it now and then (a listener's sweep).
  sweep () {
    this.glitches >>>= 1
    this.refused >>>= 1
    this.earlyResets >>>= 1
    this.opened >>>= 1
    this.work >>>= 1
  }

  // A connection error: GOAWAY with its code, then every stream ends.
  fail (code, reason) {
    if (this.closed) return
    this.output.goaway(this.lastPeerId, code, reason.slice(0, 64))
    this.wrote()
    this.finish(code, reason)
  }

  finish (code, reason) {
    this.closed = true
    this.pending = null
    const streams = [...this.streams.values()]
    this.streams.clear()
    this.blocked = []
    this.waiting = []
    for (const s of streams) {
      s.closed = true
      s.queue = null
      s.handler.onReset(s, CLOSED)
    }
    if (this.transport !== null) this.transport.close()
    this.owner.onClose(this, code, reason)
  }

  // --- Input ---

  receive (chunk) {
    if (this.closed) return
    this.reads++
    let buf = chunk
    if (this.pending !== null) {
      buf = Buffer.concat([this.pending, chunk])
      this.pending = null
    }
    let at = 0
    try {
      if (this.prefaceLeft > 0) {
        at = this.preface(buf)
        if (this.prefaceLeft > 0) return
      }
      const end = buf.length
      while (at < end && !this.closed) {
        if (this.dataLeft + this.padLeft > 0 || this.dataStream !== null) {
          at = this.dataPayload(buf, at)
          continue
        }
        if (end - at < FRAME_HEADER) break
        const length = (buf[at] << 16) | (buf[at + 1] << 8) | buf[at + 2]
        const type = buf[at + 3]
        const flags = buf[at + 4]
        const id = ((buf[at + 5] & 0x7f) << 24 | (buf[at + 6] << 16) | (buf[at + 7] << 8) | buf[at + 8]) >>> 0
        if (length > C.DEFAULT_FRAME_SIZE) throw connectionError(C.FRAME_SIZE_ERROR, `a frame of ${length} bytes`)
        if (!this.settingsSeen && type !== C.SETTINGS) throw connectionError(C.PROTOCOL_ERROR, 'no SETTINGS first')
        if (this.blockId !== 0 && type !== C.CONTINUATION) {
          throw connectionError(C.PROTOCOL_ERROR, 'a frame inside a header block')
        }
        if (type === C.DATA) {
          // DATA is passed on as it arrives, not held until whole: its header (and pad
          // length) is all it needs.
          const padded = (flags & C.PADDED) !== 0
          if (padded && length === 0) throw connectionError(C.FRAME_SIZE_ERROR, 'padded DATA without its pad length')
          if (end - at < FRAME_HEADER + (padded ? 1 : 0)) break
          this.dataFrame(id, flags, length, padded ? buf[at + FRAME_HEADER] : -1)
          at += FRAME_HEADER + (padded ? 1 : 0)
          continue
        }
        if (end - at < FRAME_HEADER + length) break
        this.frame(type, flags, id, buf, at + FRAME_HEADER, at + FRAME_HEADER + length)
        at += FRAME_HEADER + length
      }
      if (at < end && !this.closed) this.pending = buf.subarray(at)
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err
      this.fail(err.code, err.message)
    }
  }

  preface (buf) {
    const n = Math.min(buf.length, this.prefaceLeft)
    const from = C.PREFACE.length - this.prefaceLeft
    for (let i = 0; i < n; i++) {
      if (buf[i] !== C.PREFACE[from + i]) throw connectionError(C.PROTOCOL_ERROR, 'an invalid connection preface')
    }
    this.prefaceLeft -= n
    return n
  }

  frame (type, flags, id, buf, start, end) {
    switch (type) {
      case C.HEADERS: return this.headersFrame(id, flags, buf, start, end)
      case C.CONTINUATION: return this.continuationFrame(id, flags, buf, start, end)
      case C.SETTINGS: return this.settingsFrame(id, flags, buf, start, end)
      case C.WINDOW_UPDATE: return this.windowUpdateFrame(id, buf, start, end)
      case C.RST_STREAM: return this.rstStreamFrame(id, buf, start, end)
      case C.PING: return this.pingFrame(id, flags, buf, start, end)
      case C.GOAWAY: return this.goawayFrame(id, buf, start, end)
      case C.PRIORITY: return this.priorityFrame(id, buf, start, end)
      case C.PUSH_PROMISE: throw connectionError(C.PROTOCOL_ERROR, 'PUSH_PROMISE') // push is off both ways
      default: // unknown types are ignored (5.5)
    }
  }

  // Was stream `id` never opened? (Neither by lila nor by the peer, so far.)
  idle (id) {
    return (id & 1) === (this.server ? 0 : 1) ? id >= this.nextId : id > this.lastPeerId
  }

  // --- Control frames ---

  settingsFrame (id, flags, buf, start, end) {
    if (id !== 0) throw connectionError(C.PROTOCOL_ERROR, 'SETTINGS on a stream')
    if ((flags & C.ACK) !== 0) {
      if (end !== start) throw connectionError(C.FRAME_SIZE_ERROR, 'a SETTINGS ack with a payload')
      return
    }
    if ((end - start) % 6 !== 0) throw connectionError(C.FRAME_SIZE_ERROR, 'SETTINGS not in 6-byte entries')
    if (this.settingsSeen) this.glitch()
    this.settingsSeen = true
    for (let at = start; at < end; at += 6) {
      const key = buf.readUInt16BE(at)
      const value = buf.readUInt32BE(at + 2)
      switch (key) {
        case C.SETTINGS_ENABLE_PUSH:
          if (value > 1 || (value === 1 && !this.server)) {
            throw connectionError(C.PROTOCOL_ERROR, `ENABLE_PUSH ${value}`)
          }
          break
        case C.SETTINGS_MAX_CONCURRENT_STREAMS:
          this.peerMaxStreams = value
          break
        case C.SETTINGS_INITIAL_WINDOW_SIZE:
          if (value > C.MAX_WINDOW) throw connectionError(C.FLOW_CONTROL_ERROR, `INITIAL_WINDOW_SIZE ${value}`)
          this.newPeerWindow(value)
          break
        case C.SETTINGS_MAX_FRAME_SIZE:
          if (value < C.DEFAULT_FRAME_SIZE || value > C.MAX_FRAME_SIZE_LIMIT) {
            throw connectionError(C.PROTOCOL_ERROR, `MAX_FRAME_SIZE ${value}`)
          }
          this.peerFrameSize = value
          break
        // HEADER_TABLE_SIZE: lila's encoder keeps no table. MAX_HEADER_LIST_SIZE: advice.
      }
    }
    this.output.settingsAck()
    this.control()
    this.owner.onSettings(this)
    this.unblock()
  }

  // SETTINGS_INITIAL_WINDOW_SIZE changed: every stream's window moves by the difference
  // (6.9.2), past 2^31-1 a connection error.
  newPeerWindow (value) {
    const delta = value - this.peerWindow
    this.peerWindow = value
    for (const s of this.streams.values()) {
      s.sendWindow += delta
      if (s.sendWindow > C.MAX_WINDOW) throw connectionError(C.FLOW_CONTROL_ERROR, 'a stream window past 2^31-1')
    }
  }

  windowUpdateFrame (id, buf, start, end) {
    if (end - start !== 4) throw connectionError(C.FRAME_SIZE_ERROR, 'WINDOW_UPDATE of another size than 4')
    const increment = buf.readUInt32BE(start) & 0x7fffffff
    this.glitch()
    if (id === 0) {
      if (increment === 0) throw connectionError(C.PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0')
      this.sendWindow += increment
      if (this.sendWindow > C.MAX_WINDOW) {
        throw connectionError(C.FLOW_CONTROL_ERROR, 'the connection window past 2^31-1')
      }
      return this.unblock()
    }
    const s = this.streams.get(id)
    if (s === undefined) {
      if (this.idle(id)) throw connectionError(C.PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${id}`)
      return // a closed stream: the peer may not know yet
    }
    if (increment === 0) return this.streamError(s, C.PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0')
    s.sendWindow += increment
    if (s.sendWindow > C.MAX_WINDOW) return this.streamError(s, C.FLOW_CONTROL_ERROR, 'a stream window past 2^31-1')
    if (s.queue !== null) {
      this.sendQueued(s)
      this.wrote()
    }
  }

  rstStreamFrame (id, buf, start, end) {
    if (end - start !== 4) throw connectionError(C.FRAME_SIZE_ERROR, 'RST_STREAM of another size than 4')
    if (id === 0) throw connectionError(C.PROTOCOL_ERROR, 'RST_STREAM on stream 0')
    const code = buf.readUInt32BE(start)
    const s = this.streams.get(id)
    if (s === undefined) {
      if (this.idle(id)) throw connectionError(C.PROTOCOL_ERROR, `RST_STREAM on idle stream ${id}`)
      return this.glitch()
    }
    // CVE-2023-44487: streams opened and reset before their answer, most of a
    // connection's streams, end it (Envoy's rule).
    if (this.server && !s.endSent) {
      this.earlyResets++
      if (this.earlyResets >= this.options.maxRapidResets && this.earlyResets * 2 > this.opened) {
        throw connectionError(C.ENHANCE_YOUR_CALM, 'streams reset as they open')
      }
    }
    this.remove(s)
    s.handler.onReset(s, code)
  }

  pingFrame (id, flags, buf, start, end) {
    if (id !== 0) throw connectionError(C.PROTOCOL_ERROR, 'PING on a stream')
    if (end - start !== 8) throw connectionError(C.FRAME_SIZE_ERROR, 'PING of another size than 8')
    if ((flags & C.ACK) !== 0) {
      if (this.pings > 0) {
        this.pings--
        this.owner.onPingAck(this)
      }
      return
    }
    this.glitch()
    this.output.ping(true, buf, start)
    this.control()
  }

  goawayFrame (id, buf, start, end) {
    if (id !== 0) throw connectionError(C.PROTOCOL_ERROR, 'GOAWAY on a stream')
    if (end - start < 8) throw connectionError(C.FRAME_SIZE_ERROR, 'GOAWAY under 8 bytes')
    const last = buf.readUInt32BE(start) & 0x7fffffff
    const code = buf.readUInt32BE(start + 4)
    this.goneAway = true
    this.peerLastId = Math.min(this.peerLastId, last)
    // lila's streams above `last` were not processed: they may be tried elsewhere.
    const ours = this.server ? 0 : 1
    const unprocessed = []
    for (const s of this.streams.values()) if ((s.id & 1) === ours && s.id > last) unprocessed.push(s)
    for (const s of unprocessed) {
      this.remove(s)
      s.handler.onReset(s, C.REFUSED_STREAM)
    }
    this.owner.onGoaway(this, last, code)
    if (this.streams.size === 0 && !this.closed) this.finish(code, `the peer went away (${C.errorName(code)})`)
  }

  priorityFrame (id, buf, start, end) {
    if (id === 0) throw connectionError(C.PROTOCOL_ERROR, 'PRIORITY on stream 0')
    if (end - start !== 5) return this.streamErrorId(id, C.FRAME_SIZE_ERROR, 'PRIORITY of another size than 5')
    this.glitch()
    if ((buf.readUInt32BE(start) & 0x7fffffff) === id) {
      return this.streamErrorId(id, C.PROTOCOL_ERROR, 'a stream depending on itself')
    }
    // Parsed and ignored: lila sends in the order it can.
  }

  // A frame that did no work (RFC 9113 10.5: the flood of them is the attack). Real
  // work earns some: a peer's PINGs (gRPC's BDP probes), WINDOW_UPDATEs and SETTINGS
  // follow the DATA and heads lila sends it, so a busy connection makes many and is no
  // flood; a connection that makes nothing else is.
  glitch () {
    if (++this.glitches > this.options.maxGlitches + this.work) {
      throw connectionError(C.ENHANCE_YOUR_CALM, 'too many frames that do nothing')
    }
  }

  // An answer the peer's frames asked for: on a peer that does not read, they pile up.
  control () {
    this.wrote()
    if (this.congested && ++this.controlBacklog > this.options.maxControlBacklog) {
      throw connectionError(C.ENHANCE_YOUR_CALM, 'answers the peer does not read')
    }
  }

  // --- Errors on streams ---

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
    this.remember(id, 1)
    this.control()
  }

  remember (id, reset) {
    this.recentIds[this.recentAt] = id
    this.recentReset[this.recentAt] = reset
    this.recentAt = (this.recentAt + 1) % RECENT
  }

  // How stream `id` closed lately: 2 lila reset it, 1 otherwise, 0 not remembered.
  closedLately (id) {
    let found = 0
    for (let i = 0; i < RECENT; i++) {
      if (this.recentIds[i] === id) found = Math.max(found, this.recentReset[i] === 1 ? 2 : 1)
    }
    return found
  }

  wrote () {
    if (this.output.length > 0 && this.transport !== null) this.transport.flushSoon()
  }
}

// The frames that carry messages in (inbound.js) and all that goes out (outbound.js)
// are this class's methods too, in files of their own.
for (const part of [Inbound, Outbound]) {
  for (const name of Object.getOwnPropertyNames(part.prototype)) {
    if (name !== 'constructor') Connection.prototype[name] = part.prototype[name]
  }
}

module.exports = { Connection, DEFAULTS, CLOSED }
