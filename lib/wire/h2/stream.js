'use strict'

// One HTTP/2 stream as a connection keeps it: its state (RFC 9113 5.1), a few scalars
// (its id, both flow-control windows) and two references, the handler its frames go to
// and the owner's own `user` slot. No emitter, no buffer of its own but the DATA its
// peer's window holds back (`queue`), no closure.

// RFC 9113 5.1's states, as lila meets them. A Stream is made by its first HEADERS, so
// it is never idle (an id not in the table and not yet used is), and push is off both
// ways, so never reserved. END_STREAM one way half-closes it, the other way too closes
// it; RST_STREAM either way closes it at once. Once closed it leaves the table: after
// the handler heard the frame that closed it.
const OPEN = 0
const HALF_CLOSED_LOCAL = 1 // lila sent END_STREAM: it only receives
const HALF_CLOSED_REMOTE = 2 // the peer sent END_STREAM: lila only sends
const CLOSED = 3

class Stream {
  constructor (conn, id, sendWindow, recvWindow) {
    this.conn = conn
    this.id = id
    this.state = OPEN
    this.handler = null // whose onHead/onData/onTrailers/onReset/onDrain it calls
    this.user = null // the owner's: an exchange, the stream it is paired with, ...
    this.sendWindow = sendWindow // what the peer lets lila send on it
    this.recvWindow = recvWindow // what lila lets the peer send, less what it sent
    this.unacked = 0 // received and consumed, not yet given back by WINDOW_UPDATE
    this.held = 0 // received while paused: given back on resume
    this.paused = false
    this.queue = null // DATA waiting for window: Buffers, in order
    this.queued = 0
    this.endQueued = false // lila's END_STREAM waits behind the queue (still open)
    this.trailers = null // a header list that goes out after the queue, ending it
    this.expected = -1 // the body's content-length, when given
    this.received = 0 // body bytes received
    this.headed = false // its (final) head arrived: client side, the response's
    this.bodiless = false // lila's request was a HEAD: its answer has no content
    this.wantDrain = false // write() said wait: onDrain when there is room
  }

  get closed () { return this.state === CLOSED }

  // lila may still send on it: its side is open, its end not queued either.
  get writable () {
    return (this.state === OPEN || this.state === HALF_CLOSED_REMOTE) && !this.endQueued
  }

  // The transitions (the connection makes them).
  endLocal () { this.state = this.state === HALF_CLOSED_REMOTE ? CLOSED : HALF_CLOSED_LOCAL }
  endRemote () { this.state = this.state === HALF_CLOSED_LOCAL ? CLOSED : HALF_CLOSED_REMOTE }
  close () {
    this.state = CLOSED
    this.queue = null
  }
}

// A handler that hears nothing: what still comes on its stream is dropped.
const IGNORE = Object.freeze({ onHead () {}, onData () {}, onTrailers () {}, onReset () {}, onDrain () {} })

// Streams closed lately, a ring: those lila reset have their late frames ignored
// (RFC 9113 5.4.2), the others get STREAM_CLOSED.
const RECENT = 128

class RecentStreams {
  constructor () {
    this.ids = new Int32Array(RECENT)
    this.reset = new Uint8Array(RECENT) // 1: lila reset it
    this.at = 0
  }

  add (id, reset) {
    this.ids[this.at] = id
    this.reset[this.at] = reset ? 1 : 0
    this.at = (this.at + 1) % RECENT
  }

  // How stream `id` closed: 2 lila reset it, 1 otherwise, 0 not remembered.
  find (id) {
    let found = 0
    for (let i = 0; i < RECENT; i++) {
      if (this.ids[i] === id) found = Math.max(found, this.reset[i] === 1 ? 2 : 1)
    }
    return found
  }
}

module.exports = { Stream, IGNORE, RecentStreams, OPEN, HALF_CLOSED_LOCAL, HALF_CLOSED_REMOTE, CLOSED }
