'use strict'

// One HTTP/2 stream as a connection keeps it: a few scalars (its id, both flow-control
// windows, what has ended) and two references, the handler its frames go to and the
// owner's own `user` slot. No emitter, no buffer of its own but the DATA its peer's
// window holds back (`queue`), no closure.

class Stream {
  constructor (conn, id, sendWindow, recvWindow) {
    this.conn = conn
    this.id = id
    this.handler = null // whose onHead/onData/onTrailers/onReset/onDrain it calls
    this.user = null // the owner's: an exchange, the stream it is paired with, ...
    this.sendWindow = sendWindow // what the peer lets lila send on it
    this.recvWindow = recvWindow // what lila lets the peer send, less what it sent
    this.unacked = 0 // received and consumed, not yet given back by WINDOW_UPDATE
    this.held = 0 // received while paused: given back on resume
    this.paused = false
    this.queue = null // DATA waiting for window: Buffers, in order
    this.queued = 0
    this.endQueued = false // END_STREAM goes out after the queue
    this.trailers = null // a header list that goes out after the queue, ending it
    this.expected = -1 // the body's content-length, when given
    this.received = 0 // body bytes received
    this.headed = false // its (final) head arrived: client side, the response's
    this.bodiless = false // lila's request was a HEAD: its answer has no content
    this.endReceived = false
    this.endSent = false
    this.closed = false
    this.wantDrain = false // write() said wait: onDrain when there is room
  }
}

// A handler that hears nothing: what still comes on its stream is dropped.
const IGNORE = Object.freeze({ onHead () {}, onData () {}, onTrailers () {}, onReset () {}, onDrain () {} })

module.exports = { Stream, IGNORE }
