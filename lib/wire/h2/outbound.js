'use strict'

// A Connection's side that its owner and its streams' handlers call (connection.js
// holds the rest): opening streams, header blocks and DATA out under the peer's flow
// control (what its windows hold back waits on the stream, in order, with the end and
// trailers behind it), resets, pause and resume of what comes in, PING, and the
// transport's congestion. Methods of Connection, kept in a file of their own.

const { Stream, IGNORE } = require('./stream')
const C = require('./constants')

const PING_PAYLOAD = Buffer.from('lila-h2!', 'latin1')

class Outbound {
  // Can a new stream be opened (client side)?
  canOpen () {
    return !this.closed && !this.closing && !this.goneAway && this.nextId <= this.options.maxStreamId &&
      this.streams.size < this.peerMaxStreams
  }

  // Are lila's stream ids spent (client side)? Then only a new connection opens more.
  spent () {
    return this.nextId > this.options.maxStreamId
  }

  // Open a stream with a request's header list (client side); null if it cannot.
  request (handler, list, endStream) {
    if (!this.canOpen()) return null
    const s = new Stream(this, this.nextId, this.peerWindow, this.options.initialWindowSize)
    this.nextId += 2
    s.handler = handler
    s.bodiless = isHead(list) // its answer has no content, whatever its content-length
    this.streams.set(s.id, s)
    this.output.headers(s.id, list, endStream, this.peerFrameSize)
    this.work += 2
    if (endStream) s.endSent = true
    this.wrote()
    return s
  }

  // A header block on s: the response head (or a 1xx) on the server side, or trailers
  // (endStream) on either; trailers wait behind DATA still queued.
  headers (s, list, endStream) {
    if (s.closed || s.endSent || s.endQueued) return
    if (s.queue !== null && endStream) {
      s.trailers = list
      s.endQueued = true
      return
    }
    this.output.headers(s.id, list, endStream, this.peerFrameSize)
    this.work += 2
    this.wrote()
    if (endStream) this.sent(s)
  }

  // Body bytes on s (chunk may be empty to end it). False: wait for onDrain before
  // writing more (the rest is taken and queued, held to at most what was written).
  write (s, chunk, endStream) {
    if (s.closed || s.endSent || s.endQueued) return false
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
    this.wrote()
    if (at === length && endStream) {
      this.sent(s)
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
      this.work += 2
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
    if (s.endQueued) this.sent(s)
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
    this.wrote()
  }

  // lila sent END_STREAM on s.
  sent (s) {
    s.endSent = true
    this.settle(s)
  }

  // s ended both ways: it leaves the table.
  settle (s) {
    if (s.endSent && s.endReceived && !s.closed) {
      this.remove(s)
      if (this.closing && this.streams.size === 0) this.finish(C.NO_ERROR, 'done')
    }
  }

  remove (s) {
    s.closed = true
    if (s.queue !== null) drop(this.blocked, s)
    if (s.wantDrain) drop(this.waiting, s)
    s.queue = null
    this.streams.delete(s.id)
    this.remember(s.id, 0)
    this.owner.onStreamClosed(this, s)
    if (this.goneAway && this.streams.size === 0 && !this.closed) this.finish(C.NO_ERROR, 'the peer went away')
  }

  // Reset s (CANCEL unless said): its handler hears nothing more.
  reset (s, code = C.CANCEL) {
    if (s.closed) return
    this.remove(s)
    this.rst(s.id, code)
  }

  // What still comes on s is read and dropped, its window given back as it comes (a
  // server that answered before the request's body ended lets the client finish it).
  drop (s) {
    s.handler = IGNORE
    this.resume(s)
  }

  // Inbound flow control: stop giving back window for s, then give back what came.
  pause (s) {
    s.paused = true
  }

  resume (s) {
    if (!s.paused) return
    s.paused = false
    s.unacked += s.held
    s.held = 0
    if (!s.closed) this.credit(s)
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
    this.congested = congested
    if (congested) return
    this.controlBacklog = 0
    if (this.waiting.length === 0) return
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
