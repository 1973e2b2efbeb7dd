'use strict'

// A Connection's frames that carry messages in (connection.js holds the rest): DATA,
// passed on as it arrives and credited back as it is taken, and header blocks (HEADERS
// and CONTINUATION), decoded whole into requests, responses and trailers in lila's
// head form (message.js). Methods of Connection, kept in a file of their own.

const { Stream } = require('./stream')
const { requestHead, responseHead, trailerFields } = require('./message')
const C = require('./constants')

const { ProtocolError, connectionError } = C

const EMPTY = Buffer.alloc(0)
// What lila answers a request whose header list is past the limits.
const TOO_LARGE = [':status', '431', 'content-length', '0']

const NULL_HANDLER = {
  onHead () {},
  onData () {},
  onTrailers () {},
  onReset () {},
  onDrain () {}
}

class Inbound {
  dataFrame (id, flags, length, padLength) {
    if (id === 0) throw connectionError(C.PROTOCOL_ERROR, 'DATA on stream 0')
    const pad = padLength === -1 ? 0 : padLength + 1
    if (pad > length) throw connectionError(C.PROTOCOL_ERROR, 'DATA padding past the frame')
    // The connection's window counts the whole frame, whatever becomes of it.
    if (length > this.recvWindow) throw connectionError(C.FLOW_CONTROL_ERROR, 'DATA past the connection window')
    this.recvWindow -= length
    this.recvUnacked += length
    if (this.recvUnacked >= this.connUpdateAt) {
      this.output.windowUpdate(0, this.recvUnacked)
      this.recvWindow += this.recvUnacked
      this.recvUnacked = 0
      this.wrote()
    }
    const payload = length - pad
    this.dataLeft = payload
    this.padLeft = pad > 0 ? pad - 1 : 0
    this.dataEnd = (flags & C.END_STREAM) !== 0
    this.dataStream = null
    const s = this.streams.get(id)
    if (s === undefined) {
      this.notOpen(id, 'DATA')
      return
    }
    if (s.endReceived) return this.streamError(s, C.STREAM_CLOSED, 'DATA after the end of the stream')
    if (!s.headed && !this.server) return this.streamError(s, C.PROTOCOL_ERROR, 'DATA before the response')
    if (length > s.recvWindow) return this.streamError(s, C.FLOW_CONTROL_ERROR, 'DATA past the stream window')
    s.recvWindow -= length
    s.unacked += pad // padding is consumed as it comes
    s.received += payload
    if (s.expected !== -1 && (s.received > s.expected || (this.dataEnd && s.received !== s.expected))) {
      return this.streamError(s, C.PROTOCOL_ERROR, 'malformed: DATA against content-length')
    }
    if (length === 0 && !this.dataEnd) this.glitch()
    this.dataStream = s
    if (payload === 0) { // nothing to pass but maybe the end
      this.dataStream = null
      if (this.dataEnd) {
        this.endOfInput(s)
        s.handler.onData(s, EMPTY, true)
        this.settle(s)
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
        if (last && this.dataEnd) this.endOfInput(s)
        s.handler.onData(s, buf.subarray(at, at + n), last && this.dataEnd)
        // Taken, unless the handler paused (maybe for this very chunk): then held.
        if (s.paused) s.held += n
        else s.unacked += n
        if (!s.closed) this.credit(s)
      }
      at += n
      if (!last) return at
    }
    const p = Math.min(this.padLeft, end - at)
    this.padLeft -= p
    at += p
    if (this.padLeft === 0) {
      if (s !== null && this.dataEnd) this.settle(s)
      this.dataStream = null
    }
    return at
  }

  // The peer ended its side of s.
  endOfInput (s) {
    s.endReceived = true
  }

  // Give back what s's handler took, once it is worth a frame.
  credit (s) {
    if (s.unacked >= this.streamUpdateAt && !s.endReceived) {
      this.output.windowUpdate(s.id, s.unacked)
      s.recvWindow += s.unacked
      s.unacked = 0
      this.wrote()
    }
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
    if (end === start) this.glitch()
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
    const list = this.decoder.decode(buf, start, end, o.maxHeaderListSize, o.maxFields)
    const endStream = (flags & C.END_STREAM) !== 0
    const s = this.streams.get(id)
    if (s === undefined && this.server && id > this.lastPeerId) return this.newStream(id, list, endStream)
    if (this.blockPriority === id) return this.streamErrorId(id, C.PROTOCOL_ERROR, 'a stream depending on itself')
    if (s !== undefined) return this.moreHeaders(s, list, endStream)
    this.notOpen(id, 'HEADERS')
  }

  // A stream's first header block, on the server side: a request.
  newStream (id, list, endStream) {
    if ((id & 1) === 0) throw connectionError(C.PROTOCOL_ERROR, `stream ${id}: even, opened by a client`)
    this.lastPeerId = id
    if (this.closing) return // after lila's GOAWAY: ignored (6.8)
    if (this.blockPriority === id) return this.streamErrorId(id, C.PROTOCOL_ERROR, 'a stream depending on itself')
    if (this.streams.size >= this.options.maxConcurrentStreams) {
      if (++this.refused > this.options.maxRefused) {
        throw connectionError(C.ENHANCE_YOUR_CALM, 'too many streams refused')
      }
      return this.streamErrorId(id, C.REFUSED_STREAM, 'over SETTINGS_MAX_CONCURRENT_STREAMS')
    }
    if (this.decoder.overflow) return this.tooLarge(id, endStream)
    if (this.decoder.invalid !== null) return this.streamErrorId(id, C.PROTOCOL_ERROR, this.decoder.invalid)
    let head
    try {
      head = requestHead(list, endStream, id, this.decoder.controls)
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err
      return this.streamErrorId(id, err.code, err.message)
    }
    const s = new Stream(this, id, this.peerWindow, this.options.initialWindowSize)
    s.headed = true
    s.expected = head.contentLength
    if (endStream) {
      if (s.expected > 0) return this.streamErrorId(id, C.PROTOCOL_ERROR, 'malformed: no DATA against content-length')
      s.endReceived = true
    }
    this.streams.set(id, s)
    this.opened++
    this.work += 2
    s.handler = this.owner.onStream(this, s, head, endStream) || NULL_HANDLER
  }

  // A request whose header list is past the limits (an HPACK bomb, or just too big):
  // answered 431 (RFC 9113 10.5.1) on a stream of its own by an owner that has words
  // for it (onOversized: its error page), else here; no head was kept to hand on. The
  // rest of the request, if any, is refused with NO_ERROR (8.1).
  tooLarge (id, endStream) {
    if (this.owner.onOversized !== undefined) {
      const s = new Stream(this, id, this.peerWindow, this.options.initialWindowSize)
      s.headed = true
      s.endReceived = endStream
      this.streams.set(id, s)
      this.opened++
      this.work += 2
      s.handler = this.owner.onOversized(this, s) || NULL_HANDLER
      return
    }
    this.output.headers(id, TOO_LARGE, true, this.peerFrameSize)
    if (endStream) this.remember(id, 1)
    else this.rst(id, C.NO_ERROR)
    this.wrote()
  }

  // A header block on an open stream: a response head (client side), or trailers.
  moreHeaders (s, list, endStream) {
    if (s.endReceived) return this.streamError(s, C.STREAM_CLOSED, 'HEADERS after the end of the stream')
    if (this.decoder.invalid !== null) return this.streamError(s, C.PROTOCOL_ERROR, this.decoder.invalid)
    if (this.decoder.overflow) return this.streamError(s, C.PROTOCOL_ERROR, 'a header list past the limits')
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
        if (endStream) this.endOfInput(s)
        s.handler.onHead(s, head, endStream)
      } else {
        if (!endStream) throw streamFault(s, 'malformed: trailers that do not end the stream')
        const fields = trailerFields(list, s.id)
        if (s.expected !== -1 && s.received !== s.expected) {
          throw streamFault(s, 'malformed: DATA against content-length')
        }
        this.endOfInput(s)
        s.handler.onTrailers(s, fields)
      }
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err
      return this.streamError(s, err.code, err.message)
    }
    if (endStream) this.settle(s)
  }

  // A frame for a stream not in the table: idle (never opened) is a connection error;
  // closed, one lila reset lately is ignored, else STREAM_CLOSED.
  // A new stream's id below one already opened is a connection error too (5.1.1);
  // HEADERS on a stream that closed, one of STREAM_CLOSED (5.1).
  notOpen (id, what) {
    if (this.idle(id)) throw connectionError(C.PROTOCOL_ERROR, `${what} on idle stream ${id}`)
    const closed = this.closedLately(id)
    if (closed === 2) return
    if (what === 'HEADERS') {
      throw connectionError(closed === 1 ? C.STREAM_CLOSED : C.PROTOCOL_ERROR, `HEADERS on closed stream ${id}`)
    }
    this.glitch()
    this.streamErrorId(id, C.STREAM_CLOSED, `${what} on closed stream ${id}`)
  }
}

function streamFault (s, reason) {
  return new ProtocolError(C.PROTOCOL_ERROR, reason, s.id)
}

module.exports = { Inbound }
