'use strict'

// A connection's one output buffer: frames are written into it as they are made and
// taken by the transport in one piece per flush. Small payloads are copied in; a large
// DATA payload is passed by reference between the bytes before and after it, never
// copied. The space left after a flush is written on (the transport holds only the
// part it took), so a buffer serves many flushes before another is allocated.

const {
  FRAME_HEADER, DATA, HEADERS, CONTINUATION, END_STREAM, END_HEADERS, SETTINGS, ACK, PING, GOAWAY,
  RST_STREAM, WINDOW_UPDATE
} = require('./constants')
const { encodeField, fieldBound } = require('./hpack')

const CHUNK = 16 * 1024
// DATA payloads up to this many bytes are copied into the buffer; longer ones are
// referenced (a copy then costs more than a chunk of its own in a write).
const COPY_LIMIT = 1024
// An idle connection's buffer: none (sweep).
const NONE = Buffer.alloc(0)

class Output {
  constructor () {
    this.buf = Buffer.allocUnsafeSlow(CHUNK)
    this.start = 0 // buf[start, pos) is written and not yet taken
    this.pos = 0
    this.chunks = null // what comes before buf[start, pos): earlier pieces, payloads
    this.length = 0 // bytes waiting, all pieces together
    this.swept = 0 // pos at the last sweep
  }

  // Now and then (the connection's sweep): a buffer written nothing since the last
  // sweep, with nothing waiting, is let go; the next frame takes a new one. An idle
  // connection (a client between requests, or whose streams wait on their backends)
  // then holds no CHUNK, and a busy one never reallocates for it.
  sweep () {
    if (this.pos === this.swept && this.length === 0) {
      this.buf = NONE
      this.start = 0
      this.pos = 0
    }
    this.swept = this.pos
  }

  // Room for n contiguous bytes at this.pos.
  room (n) {
    if (this.buf.length - this.pos >= n) return
    this.cut()
    this.buf = Buffer.allocUnsafeSlow(Math.max(CHUNK, n))
    this.start = 0
    this.pos = 0
  }

  // End the current piece here, so that something can follow it by reference.
  cut () {
    if (this.pos > this.start) {
      (this.chunks ||= []).push(this.buf.subarray(this.start, this.pos))
      this.start = this.pos
    }
  }

  // What waits to be written: null, a Buffer, or an array of Buffers in order.
  take () {
    if (this.length === 0) return null
    this.length = 0
    if (this.chunks === null) {
      const piece = this.buf.subarray(this.start, this.pos)
      this.start = this.pos
      return piece
    }
    this.cut()
    const chunks = this.chunks
    this.chunks = null
    return chunks
  }

  header (length, type, flags, id) {
    const buf = this.buf
    const at = this.pos
    buf[at] = length >>> 16
    buf[at + 1] = (length >>> 8) & 0xff
    buf[at + 2] = length & 0xff
    buf[at + 3] = type
    buf[at + 4] = flags
    buf[at + 5] = (id >>> 24) & 0x7f
    buf[at + 6] = (id >>> 16) & 0xff
    buf[at + 7] = (id >>> 8) & 0xff
    buf[at + 8] = id & 0xff
    this.pos = at + FRAME_HEADER
    this.length += FRAME_HEADER
  }

  // One DATA frame: payload[start, end), at most the peer's frame size.
  data (id, payload, start, end, endStream) {
    const n = end - start
    this.room(FRAME_HEADER + (n <= COPY_LIMIT ? n : 0))
    this.header(n, DATA, endStream ? END_STREAM : 0, id)
    if (n === 0) return
    if (n <= COPY_LIMIT) {
      payload.copy(this.buf, this.pos, start, end)
      this.pos += n
    } else {
      this.cut()
      this.chunks.push(start === 0 && end === payload.length ? payload : payload.subarray(start, end))
    }
    this.length += n
  }

  // A header block: HEADERS, and CONTINUATION frames past `frameSize`. `list` is
  // [name, value, ...], names in lower case, pseudo-headers first.
  headers (id, list, endStream, frameSize) {
    let bound = 0
    for (let i = 0; i < list.length; i += 2) bound += fieldBound(list[i], list[i + 1])
    this.room(FRAME_HEADER + bound)
    const at = this.pos
    let end = at + FRAME_HEADER
    for (let i = 0; i < list.length; i += 2) end = encodeField(this.buf, end, list[i], list[i + 1])
    const length = end - at - FRAME_HEADER
    const flags = endStream ? END_STREAM : 0
    if (length <= frameSize) {
      this.header(length, HEADERS, flags | END_HEADERS, id)
      this.pos = end
      this.length += length
      return
    }
    // Rare: a block over one frame. Copy it out, then frame it in pieces.
    const block = Buffer.from(this.buf.subarray(at + FRAME_HEADER, end))
    this.block(id, block, flags, frameSize)
  }

  // An encoded header block, framed as HEADERS and CONTINUATION frames.
  block (id, block, flags, frameSize) {
    for (let from = 0, type = HEADERS; from < block.length || type === HEADERS; type = CONTINUATION) {
      const to = Math.min(block.length, from + frameSize)
      this.room(FRAME_HEADER + to - from)
      this.header(to - from, type, (type === HEADERS ? flags : 0) | (to === block.length ? END_HEADERS : 0), id)
      block.copy(this.buf, this.pos, from, to)
      this.pos += to - from
      this.length += to - from
      from = to
    }
  }

  // [id, value, ...]
  settings (pairs) {
    this.room(FRAME_HEADER + pairs.length * 3)
    this.header(pairs.length * 3, SETTINGS, 0, 0)
    for (let i = 0; i < pairs.length; i += 2) {
      this.buf.writeUInt16BE(pairs[i], this.pos)
      this.buf.writeUInt32BE(pairs[i + 1], this.pos + 2)
      this.pos += 6
    }
    this.length += pairs.length * 3
  }

  settingsAck () {
    this.room(FRAME_HEADER)
    this.header(0, SETTINGS, ACK, 0)
  }

  // PING with the 8 bytes at payload[start].
  ping (ack, payload, start) {
    this.room(FRAME_HEADER + 8)
    this.header(8, PING, ack ? ACK : 0, 0)
    payload.copy(this.buf, this.pos, start, start + 8)
    this.pos += 8
    this.length += 8
  }

  goaway (lastStreamId, code, debug) {
    const n = 8 + debug.length
    this.room(FRAME_HEADER + n)
    this.header(n, GOAWAY, 0, 0)
    this.buf.writeUInt32BE(lastStreamId, this.pos)
    this.buf.writeUInt32BE(code, this.pos + 4)
    this.buf.latin1Write(debug, this.pos + 8)
    this.pos += n
    this.length += n
  }

  rstStream (id, code) {
    this.room(FRAME_HEADER + 4)
    this.header(4, RST_STREAM, 0, id)
    this.buf.writeUInt32BE(code, this.pos)
    this.pos += 4
    this.length += 4
  }

  windowUpdate (id, increment) {
    this.room(FRAME_HEADER + 4)
    this.header(4, WINDOW_UPDATE, 0, id)
    this.buf.writeUInt32BE(increment, this.pos)
    this.pos += 4
    this.length += 4
  }

  raw (bytes) {
    this.room(bytes.length)
    bytes.copy(this.buf, this.pos)
    this.pos += bytes.length
    this.length += bytes.length
  }
}

module.exports = { Output }
