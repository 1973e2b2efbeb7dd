'use strict'

// What a Connection receives (connection.js owns one): bytes are cut into frames here;
// the connection's own frames (SETTINGS, PING, GOAWAY, WINDOW_UPDATE, RST_STREAM,
// PRIORITY) go back to it, while the frames that carry messages are taken here: DATA,
// passed on as it arrives and credited back as it is taken, and header blocks (HEADERS
// and CONTINUATION), decoded whole into requests, responses and trailers in lila's head
// form (message.js). It keeps what lila lets the peer send: the receive windows.

const { Stream, IGNORE, OPEN, HALF_CLOSED_LOCAL, HALF_CLOSED_REMOTE } = require('./stream')
const { HpackDecoder } = require('./hpack')
const { requestHead, responseHead, trailerFields } = require('./message')
const C = require('./constants')

const { FRAME_HEADER, ProtocolError, connectionError } = C

const EMPTY = Buffer.alloc(0)
// What lila answers a request whose header list is past the limits.
const TOO_LARGE = [':status', '431', 'content-length', '0']

class Inbound {
  constructor (conn) {
    const o = conn.options
    this.conn = conn
    this.options = o
    this.decoder = new HpackDecoder(o.headerTableSize)
    this.lastPeerId = 0 // the highest stream id the peer opened
    this.recvWindow = C.DEFAULT_WINDOW // connection-level, peer -> lila (opened at start)
    this.recvUnacked = 0
    this.streamUpdateAt = o.initialWindowSize >>> 1
    this.connUpdateAt = o.connectionWindow >>> 1
    this.pending = null // a frame not yet whole
    this.prefaceLeft = conn.server ? C.PREFACE.length : 0
    this.dataStream = null // a DATA frame being read: its stream, or null to skip
    this.dataLeft = 0 // its payload bytes still to come
    this.padLeft = 0 // then its padding
    this.dataEnd = false // then END_STREAM
    this.blockId = 0 // a header block awaiting CONTINUATION: its stream
    this.blockFlags = 0
    this.blockParts = null
    this.blockLength = 0
    this.blockPriority = -1 // the stream its HEADERS said it depends on
  }

  // The connection's receive window raised to its size (at start).
  openWindow () {
    const size = this.options.connectionWindow
    if (size <= C.DEFAULT_WINDOW) return
    this.conn.output.windowUpdate(0, size - C.DEFAULT_WINDOW)
    this.recvWindow = size
  }

  receive (chunk) {
    const conn = this.conn
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
      while (at < end && !conn.closed) {
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
        if (!conn.settingsSeen && type !== C.SETTINGS) throw connectionError(C.PROTOCOL_ERROR, 'no SETTINGS first')
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
      // A copy: the transport may read into `chunk` again (proxy/http2/client-reads.js).
      if (at < end && !conn.closed) this.pending = Buffer.from(buf.subarray(at))
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err
      conn.fail(err.code, err.message)
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
    const conn = this.conn
    switch (type) {
      case C.HEADERS: return this.headersFrame(id, flags, buf, start, end)
      case C.CONTINUATION: return this.continuationFrame(id, flags, buf, start, end)
      case C.SETTINGS: return conn.settingsFrame(id, flags, buf, start, end)
      case C.WINDOW_UPDATE: return conn.windowUpdateFrame(id, buf, start, end)
      case C.RST_STREAM: return conn.rstStreamFrame(id, buf, start, end)
      case C.PING: return conn.pingFrame(id, flags, buf, start, end)
      case C.GOAWAY: return conn.goawayFrame(id, buf, start, end)
      case C.PRIORITY: return conn.priorityFrame(id, buf, start, end)
      case C.PUSH_PROMISE: throw connectionError(C.PROTOCOL_ERROR, 'PUSH_PROMISE') // push is off both ways
      default: // unknown types are ignored (5.5)
    }
  }

  // --- DATA ---

  dataFrame (id, flags, length, padLength) {
    const conn = this.conn
    if (id === 0) throw connectionError(C.PROTOCOL_ERROR, 'DATA on stream 0')
    const pad = padLength === -1 ? 0 : padLength + 1
    if (pad > length) throw connectionError(C.PROTOCOL_ERROR, 'DATA padding past the frame')
    // The connection's window counts the whole frame, whatever becomes of it.
    if (length > this.recvWindow) throw connectionError(C.FLOW_CONTROL_ERROR, 'DATA past the connection window')
    this.recvWindow -= length
    this.recvUnacked += length
    if (this.recvUnacked >= this.connUpdateAt) {
      conn.output.windowUpdate(0, this.recvUnacked)
      this.recvWindow += this.recvUnacked
      this.recvUnacked = 0
      conn.wrote()
    }
    const payload = length - pad
    this.dataLeft = payload
    this.padLeft = pad > 0 ? pad - 1 : 0
    this.dataEnd = (flags & C.END_STREAM) !== 0
    this.dataStream = null
    const s = conn.streams.get(id)
    if (s === undefined) {
      this.notOpen(id, 'DATA')
      return
    }
    if (s.state === HALF_CLOSED_REMOTE) return conn.streamError(s, C.STREAM_CLOSED, 'DATA after the end of the stream')
    if (!s.headed && !conn.server) return conn.streamError(s, C.PROTOCOL_ERROR, 'DATA before the response')
    if (length > s.recvWindow) return conn.streamError(s, C.FLOW_CONTROL_ERROR, 'DATA past the stream window')
    s.recvWindow -= length
    s.unacked += pad // padding is consumed as it comes
    s.received += payload
    if (s.expected !== -1 && (s.received > s.expected || (this.dataEnd && s.received !== s.expected))) {
      return conn.streamError(s, C.PROTOCOL_ERROR, 'malformed: DATA against content-length')
    }
    if (length === 0 && !this.dataEnd) conn.flood.glitch()
    this.dataStream = s
    if (payload === 0) { // nothing to pass but maybe the end
      this.dataStream = null
      if (this.dataEnd) {
        s.endRemote()
        s.handler.onData(s, EMPTY, true)
        conn.settle(s)
      }
    }
  }

  // DATA payload bytes from buf[at]; returns where they end.
  dataPayload (buf, at) {
    const s = this.dataStream
    const end = buf.length
    if (this.dataLeft > 0) {
      const n = Math.min(this.dataLeft, end - at)
      this.dataLeft -= n
      const last = this.dataLeft === 0
      if (s !== null && !s.closed) {
        if (last && this.dataEnd) s.endRemote()
        s.handler.onData(s, buf.subarray(at, at + n), last && this.dataEnd)
        // Taken, unless the handler paused (maybe for this very chunk): then held.
        if (s.paused) s.held += n
        else s.unacked += n
        this.credit(s)
      }
      at += n
      if (!last) return at
    }
    const p = Math.min(this.padLeft, end - at)
    this.padLeft -= p
    at += p
    if (this.padLeft === 0) {
      if (s !== null && this.dataEnd) this.conn.settle(s)
      this.dataStream = null
    }
    return at
  }

  // Give back what s's handler took, once it is worth a frame (and more may come).
  credit (s) {
    if (s.unacked >= this.streamUpdateAt && (s.state === OPEN || s.state === HALF_CLOSED_LOCAL)) {
      this.conn.output.windowUpdate(s.id, s.unacked)
      s.recvWindow += s.unacked
      s.unacked = 0
      this.conn.wrote()
    }
  }

  // Inbound flow control: window is given back for s again, and what came meanwhile.
  resume (s) {
    if (!s.paused) return
    s.paused = false
    s.unacked += s.held
    s.held = 0
    this.credit(s)
  }

  // What still comes on s is read and dropped, its window given back as it comes.
  drop (s) {
    s.handler = IGNORE
    this.resume(s)
  }

  // --- Header blocks ---

  headersFrame (id, flags, buf, start, end) {
    if (id === 0) throw connectionError(C.PROTOCOL_ERROR, 'HEADERS on stream 0')
    if ((flags & C.PADDED) !== 0) {
      if (end - start < 1) throw connectionError(C.FRAME_SIZE_ERROR, 'HEADERS too short for its padding')
      const pad = buf[start]
      start++
      if (pad > end - start) throw connectionError(C.PROTOCOL_ERROR, 'HEADERS padding past the frame')
      end -= pad
    }
    this.blockPriority = -1
    if ((flags & C.PRIORITY_FLAG) !== 0) {
      if (end - start < 5) throw connectionError(C.FRAME_SIZE_ERROR, 'HEADERS too short for its priority')
      this.blockPriority = buf.readUInt32BE(start) & 0x7fffffff
      start += 5
    }
    if ((flags & C.END_HEADERS) !== 0) return this.headerBlock(id, flags, buf, start, end)
    this.blockId = id
    this.blockFlags = flags
    this.blockParts = [Buffer.from(buf.subarray(start, end))] // the input may be reused
    this.blockLength = end - start
  }

  continuationFrame (id, flags, buf, start, end) {
    if (this.blockId === 0 || id !== this.blockId) throw connectionError(C.PROTOCOL_ERROR, 'CONTINUATION out of place')
    if (end === start) this.conn.flood.glitch()
    this.blockLength += end - start
    // CVE-2024-27316: a block never ended is bounded by the list it may decode to.
    if (this.blockLength > this.options.maxHeaderListSize) {
      throw connectionError(C.ENHANCE_YOUR_CALM, 'a header block past the header list size')
    }
    this.blockParts.push(Buffer.from(buf.subarray(start, end)))
    if ((flags & C.END_HEADERS) === 0) return
    const block = Buffer.concat(this.blockParts)
    const blockId = this.blockId
    this.blockId = 0
    this.blockParts = null
    this.headerBlock(blockId, this.blockFlags, block, 0, block.length)
  }

  // A whole header block for stream `id`: decoded first, always (the HPACK table
  // changes with it whatever becomes of the stream), then taken as a request, a
  // response, or trailers.
  headerBlock (id, flags, buf, start, end) {
    const o = this.options
    const conn = this.conn
    const list = this.decoder.decode(buf, start, end, o.maxHeaderListSize, o.maxFields)
    const endStream = (flags & C.END_STREAM) !== 0
    const s = conn.streams.get(id)
    if (s === undefined && conn.server && id > this.lastPeerId) return this.newStream(id, list, endStream)
    if (this.blockPriority === id) return conn.streamErrorId(id, C.PROTOCOL_ERROR, 'a stream depending on itself')
    if (s !== undefined) return this.moreHeaders(s, list, endStream)
    this.notOpen(id, 'HEADERS')
  }

  // A stream's first header block, on the server side: a request.
  newStream (id, list, endStream) {
    const conn = this.conn
    if ((id & 1) === 0) throw connectionError(C.PROTOCOL_ERROR, `stream ${id}: even, opened by a client`)
    this.lastPeerId = id
    if (conn.closing) return // after lila's GOAWAY: ignored (6.8)
    if (this.blockPriority === id) return conn.streamErrorId(id, C.PROTOCOL_ERROR, 'a stream depending on itself')
    if (conn.streams.size >= this.options.maxConcurrentStreams) return conn.refuse(id)
    if (this.decoder.overflow) return this.tooLarge(id, endStream)
    if (this.decoder.invalid !== null) return conn.streamErrorId(id, C.PROTOCOL_ERROR, this.decoder.invalid)
    let head
    try {
      head = requestHead(list, endStream, id, this.decoder.controls)
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err
      return conn.streamErrorId(id, err.code, err.message)
    }
    const s = new Stream(conn, id, conn.outbound.peerWindow, this.options.initialWindowSize)
    s.headed = true
    s.expected = head.contentLength
    if (endStream) {
      if (s.expected > 0) return conn.streamErrorId(id, C.PROTOCOL_ERROR, 'malformed: no DATA against content-length')
      s.endRemote()
    }
    conn.add(s)
    s.handler = conn.owner.onStream(conn, s, head, endStream) || IGNORE
  }

  // A request whose header list is past the limits (an HPACK bomb, or just too big):
  // answered 431 (RFC 9113 10.5.1) on a stream of its own by an owner that has words
  // for it (onOversized: its error page), else here; no head was kept to hand on. The
  // rest of the request, if any, is refused with NO_ERROR (8.1).
  tooLarge (id, endStream) {
    const conn = this.conn
    if (conn.owner.onOversized !== undefined) {
      const s = new Stream(conn, id, conn.outbound.peerWindow, this.options.initialWindowSize)
      s.headed = true
      if (endStream) s.endRemote()
      conn.add(s)
      s.handler = conn.owner.onOversized(conn, s) || IGNORE
      return
    }
    conn.output.headers(id, TOO_LARGE, true, conn.outbound.peerFrameSize)
    if (endStream) conn.recent.add(id, true)
    else conn.rst(id, C.NO_ERROR)
    conn.wrote()
  }

  // A header block on an open stream: a response head (client side), or trailers.
  moreHeaders (s, list, endStream) {
    const conn = this.conn
    if (s.state === HALF_CLOSED_REMOTE) {
      return conn.streamError(s, C.STREAM_CLOSED, 'HEADERS after the end of the stream')
    }
    if (this.decoder.invalid !== null) return conn.streamError(s, C.PROTOCOL_ERROR, this.decoder.invalid)
    if (this.decoder.overflow) return conn.streamError(s, C.PROTOCOL_ERROR, 'a header list past the limits')
    try {
      if (!s.headed) { // client side: a response
        const head = responseHead(list, endStream, s.id)
        if (head.status >= 200) {
          s.headed = true
          // RFC 9113 8.1.1: an answer defined to have no content (to HEAD, 204, 304) may
          // say a content-length all the same.
          const bodiless = s.bodiless || head.status === 204 || head.status === 304
          s.expected = bodiless ? -1 : head.contentLength
          if (endStream && s.expected > 0) throw streamFault(s, 'malformed: no DATA against content-length')
        }
        if (endStream) s.endRemote()
        s.handler.onHead(s, head, endStream)
      } else {
        if (!endStream) throw streamFault(s, 'malformed: trailers that do not end the stream')
        const fields = trailerFields(list, s.id)
        if (s.expected !== -1 && s.received !== s.expected) {
          throw streamFault(s, 'malformed: DATA against content-length')
        }
        s.endRemote()
        s.handler.onTrailers(s, fields)
      }
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err
      return conn.streamError(s, err.code, err.message)
    }
    if (endStream) conn.settle(s)
  }

  // A frame for a stream not in the table: idle (never opened) is a connection error;
  // closed, one lila reset lately is ignored, else STREAM_CLOSED.
  // A new stream's id below one already opened is a connection error too (5.1.1);
  // HEADERS on a stream that closed, one of STREAM_CLOSED (5.1).
  notOpen (id, what) {
    const conn = this.conn
    if (conn.idle(id)) throw connectionError(C.PROTOCOL_ERROR, `${what} on idle stream ${id}`)
    const closed = conn.recent.find(id)
    if (closed === 2) return
    if (what === 'HEADERS') {
      throw connectionError(closed === 1 ? C.STREAM_CLOSED : C.PROTOCOL_ERROR, `HEADERS on closed stream ${id}`)
    }
    conn.flood.glitch()
    conn.streamErrorId(id, C.STREAM_CLOSED, `${what} on closed stream ${id}`)
  }
}

function streamFault (s, reason) {
  return new ProtocolError(C.PROTOCOL_ERROR, reason, s.id)
}

module.exports = { Inbound }
