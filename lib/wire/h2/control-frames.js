'use strict'

// The connection's own frames, as the Inbound (inbound.js) cuts them: SETTINGS, WINDOW_UPDATE,
// RST_STREAM, PING, GOAWAY and PRIORITY. Methods of Connection (connection.js puts
// them on its prototype; `this` is the connection): what they change is its state,
// kept here apart from the stream table and the start and end of a connection.

const { HALF_CLOSED_LOCAL } = require('./stream')
const C = require('./constants')

const { connectionError } = C

const controlFrames = {
  settingsFrame (id, flags, buf, start, end) {
    if (id !== 0) throw connectionError(C.PROTOCOL_ERROR, 'SETTINGS on a stream')
    if ((flags & C.ACK) !== 0) {
      if (end !== start) throw connectionError(C.FRAME_SIZE_ERROR, 'a SETTINGS ack with a payload')
      return
    }
    if ((end - start) % 6 !== 0) throw connectionError(C.FRAME_SIZE_ERROR, 'SETTINGS not in 6-byte entries')
    if (this.settingsSeen) this.flood.glitch()
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
          // 6.9.2: every stream's window moves by the difference.
          if (!this.outbound.setInitialWindow(value, this.streams.values())) {
            throw connectionError(C.FLOW_CONTROL_ERROR, 'a stream window past 2^31-1')
          }
          break
        case C.SETTINGS_MAX_FRAME_SIZE:
          if (value < C.DEFAULT_FRAME_SIZE || value > C.MAX_FRAME_SIZE_LIMIT) {
            throw connectionError(C.PROTOCOL_ERROR, `MAX_FRAME_SIZE ${value}`)
          }
          this.outbound.setFrameSize(value)
          break
        // HEADER_TABLE_SIZE: lila's encoder keeps no table. MAX_HEADER_LIST_SIZE: advice.
      }
    }
    this.output.settingsAck()
    this.control()
    this.owner.onSettings(this)
    this.outbound.unblock()
  },

  windowUpdateFrame (id, buf, start, end) {
    if (end - start !== 4) throw connectionError(C.FRAME_SIZE_ERROR, 'WINDOW_UPDATE of another size than 4')
    const increment = buf.readUInt32BE(start) & 0x7fffffff
    this.flood.glitch()
    if (id === 0) {
      if (increment === 0) throw connectionError(C.PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0')
      if (!this.outbound.grow(null, increment)) {
        throw connectionError(C.FLOW_CONTROL_ERROR, 'the connection window past 2^31-1')
      }
      return
    }
    const s = this.streams.get(id)
    if (s === undefined) {
      if (this.idle(id)) throw connectionError(C.PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${id}`)
      return // a closed stream: the peer may not know yet
    }
    if (increment === 0) return this.streamError(s, C.PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0')
    if (!this.outbound.grow(s, increment)) this.streamError(s, C.FLOW_CONTROL_ERROR, 'a stream window past 2^31-1')
  },

  rstStreamFrame (id, buf, start, end) {
    if (end - start !== 4) throw connectionError(C.FRAME_SIZE_ERROR, 'RST_STREAM of another size than 4')
    if (id === 0) throw connectionError(C.PROTOCOL_ERROR, 'RST_STREAM on stream 0')
    const code = buf.readUInt32BE(start)
    const s = this.streams.get(id)
    if (s === undefined) {
      if (this.idle(id)) throw connectionError(C.PROTOCOL_ERROR, `RST_STREAM on idle stream ${id}`)
      return this.flood.glitch()
    }
    // CVE-2023-44487 (flood.js): a stream reset before lila's answer ended.
    if (this.server && s.state !== HALF_CLOSED_LOCAL) this.flood.earlyReset()
    this.remove(s)
    s.handler.onReset(s, code)
  },

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
    this.flood.glitch()
    this.output.ping(true, buf, start)
    this.control()
  },

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
  },

  priorityFrame (id, buf, start, end) {
    if (id === 0) throw connectionError(C.PROTOCOL_ERROR, 'PRIORITY on stream 0')
    if (end - start !== 5) return this.streamErrorId(id, C.FRAME_SIZE_ERROR, 'PRIORITY of another size than 5')
    this.flood.glitch()
    if ((buf.readUInt32BE(start) & 0x7fffffff) === id) {
      return this.streamErrorId(id, C.PROTOCOL_ERROR, 'a stream depending on itself')
    }
    // Parsed and ignored: lila sends in the order it can.
  }
}

module.exports = { controlFrames }
