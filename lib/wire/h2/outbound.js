'use strict'

// What a Connection sends (connection.js owns one): the streams it opens (client side),
// header blocks and DATA under the peer's flow control (what its windows hold back
// waits on the stream, in order, with the end and trailers behind it), and the
// transport's congestion (a write that said false hears onDrain when there is room).
// It keeps what the peer allows lila to send: its SETTINGS' frame size and initial
// window, and both windows' credit.

const { Stream } = require('./stream')
const C = require('./constants')

class Outbound {
  constructor (conn) {
    this.conn = conn
    this.output = conn.output
    this.nextId = conn.server ? 2 : 1 // lila's next stream (client side)
    this.peerWindow = C.DEFAULT_WINDOW // the peer's SETTINGS_INITIAL_WINDOW_SIZE
    this.peerFrameSize = C.DEFAULT_FRAME_SIZE
    this.sendWindow = C.DEFAULT_WINDOW // connection-level, lila -> peer
    this.blocked = [] // streams with DATA waiting for window
    this.waiting = [] // streams told to wait (write() said false)
    this.congested = false // the transport holds more than it wants
    this.flood = conn.flood // told of the real work sent
  }

  // A new stream with a request's header list (client side).
  open (handler, list, endStream, recvWindow) {
    const s = new Stream(this.conn, this.nextId, this.peerWindow, recvWindow)
    this.nextId += 2
    s.handler = handler
    s.bodiless = isHead(list) // its answer has no content, whatever its content-length
    this.output.headers(s.id, list, endStream, this.peerFrameSize)
    this.flood.worked()
    if (endStream) s.endLocal()
    return s
  }

  // A header block on s: the response head (or a 1xx) on the server side, or trailers
  // (endStream) on either; trailers wait behind DATA still queued.
  headers (s, list, endStream) {
    if (!s.writable) return
    if (s.queue !== null && endStream) {
      s.trailers = list
      s.endQueued = true
      return
    }
    this.output.headers(s.id, list, endStream, this.peerFrameSize)
    this.flood.worked()
    this.conn.wrote()
    if (endStream) this.conn.sent(s)
  }

  // Body bytes on s (chunk may be empty to end it). False: wait for onDrain before
  // writing more (the rest is taken and queued, held to at most what was written).
  write (s, chunk, endStream) {
    if (!s.writable) return false
    if (s.queue !== null) {
      s.queue.push(chunk)
      s.queued += chunk.length
      if (endStream) s.endQueued = true
      return this.wait(s)
    }
    const length = chunk.length
    let at = this.frameData(s, chunk, 0, length, endStream)
    if (at < length) {
      s.queue = [at === 0 ? chunk : chunk.subarray(at)]
      s.queued = length - at
      s.endQueued = endStream
      this.blocked.push(s)
      at = -1
    }
    this.conn.wrote()
    if (at === length && endStream) {
      this.conn.sent(s)
      return true
    }
    return at === length && !this.congested ? true : this.wait(s)
  }

  // Frames DATA from chunk[from, to) as far as the windows allow; returns where it
  // stopped. END_STREAM goes on the last frame when all of it went.
  frameData (s, chunk, from, to, endStream) {
    const max = this.peerFrameSize
    if (from === to) {
      if (endStream) this.output.data(s.id, chunk, from, to, true)
      return to
    }
    while (from < to) {
      const n = Math.min(to - from, max, s.sendWindow, this.sendWindow)
      if (n <= 0) break
      this.output.data(s.id, chunk, from, from + n, endStream && from + n === to)
      s.sendWindow -= n
      this.sendWindow -= n
      this.flood.worked()
      from += n
    }
    return from
  }

  wait (s) {
    if (!s.wantDrain) {
      s.wantDrain = true
      this.waiting.push(s)
    }
    return false
  }

  // DATA queued on s, sent as far as the windows allow; then its end, its trailers.
  sendQueued (s) {
    const queue = s.queue
    while (queue.length > 0) {
      const chunk = queue[0]
      const last = queue.length === 1
      const at = this.frameData(s, chunk, 0, chunk.length, last && s.endQueued && s.trailers === null)
      s.queued -= at
      if (at < chunk.length) {
        if (at > 0) queue[0] = chunk.subarray(at)
        return
      }
      queue.shift()
    }
    s.queue = null
    drop(this.blocked, s) // (a no-op inside unblock(), which took the list)
    if (s.trailers !== null) {
      this.output.headers(s.id, s.trailers, true, this.peerFrameSize)
      s.trailers = null
    }
    if (s.endQueued) this.conn.sent(s)
    if (s.wantDrain && !this.congested && !s.closed) {
      s.wantDrain = false
      s.handler.onDrain(s)
    }
  }

  // The windows grew: streams waiting for them go on, in the order they stopped.
  unblock () {
    if (this.blocked.length === 0) return
    const blocked = this.blocked
    this.blocked = []
    for (let i = 0; i < blocked.length; i++) {
      const s = blocked[i]
      if (s.closed || s.queue === null) continue
      if (this.sendWindow > 0) this.sendQueued(s)
      if (s.queue !== null) this.blocked.push(s)
    }
    this.conn.wrote()
  }

  // --- What the peer allows (the connection's SETTINGS and WINDOW_UPDATE frames) ---

  setFrameSize (value) {
    this.peerFrameSize = value
  }

  // SETTINGS_INITIAL_WINDOW_SIZE changed: every stream's window moves by the difference
  // (6.9.2). False when one goes past 2^31-1 (a connection error).
  setInitialWindow (value, streams) {
    const delta = value - this.peerWindow
    this.peerWindow = value
    let fits = true
    for (const s of streams) {
      s.sendWindow += delta
      if (s.sendWindow > C.MAX_WINDOW) fits = false
    }
    return fits
  }

  // The connection's window (s null) or s's grew; false when past 2^31-1.
  grow (s, increment) {
    if (s === null) {
      this.sendWindow += increment
      if (this.sendWindow > C.MAX_WINDOW) return false
      this.unblock()
      return true
    }
    s.sendWindow += increment
    if (s.sendWindow > C.MAX_WINDOW) return false
    if (s.queue !== null) {
      this.sendQueued(s)
      this.conn.wrote()
    }
    return true
  }

  // s left the table: it waits for nothing any more.
  forget (s) {
    if (s.queue !== null) drop(this.blocked, s)
    if (s.wantDrain) drop(this.waiting, s)
  }

  // Every stream is gone (the connection ended).
  clear () {
    this.blocked = []
    this.waiting = []
  }

  // The transport: it could not take everything (congested), or took it all.
  setCongested (congested) {
    this.congested = congested
    if (congested || this.waiting.length === 0) return
    const waiting = this.waiting
    this.waiting = []
    for (let i = 0; i < waiting.length; i++) {
      const s = waiting[i]
      if (s.closed || !s.wantDrain) continue
      if (s.queue !== null || this.congested) {
        this.waiting.push(s) // still waiting: for window, or again for the transport
        continue
      }
      s.wantDrain = false
      s.handler.onDrain(s)
    }
  }
}

function isHead (list) {
  for (let i = 0; i < list.length && list[i].charCodeAt(0) === 58; i += 2) {
    if (list[i] === ':method') return list[i + 1] === 'HEAD'
  }
  return false
}

// Take s out of a list of streams (a short one: those waiting).
function drop (list, s) {
  const i = list.indexOf(s)
  if (i !== -1) list.splice(i, 1)
}

module.exports = { Outbound }
