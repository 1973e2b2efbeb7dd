'use strict'

// Request body bytes kept for a replay on another backend, and the methods that may be
// sent again: HTTP/1.1's.
const { REPLAY_LIMIT, IDEMPOTENT } = require('../http/request-body')

// An HTTP/2 request's body, as its StreamExchange (exchange.js) reads it from the
// client's DATA frames: how much came, whether it is complete, and the first 64 KiB
// held for a replay on another backend, under HTTP/1.1's rules (idempotent, or not a
// byte sent yet). It frames nothing: the leg to the backend does (to-http1.js sends it
// with its length or chunked, to-http2.js as DATA). A gRPC call (`call`) is replayed
// only when none of it reached a backend, as http1/request-body.js says.
class StreamBody {
  constructor (head, call = false) {
    this.method = head.method
    this.length = head.contentLength // -1: none said
    this.done = head.endStream // the client's stream ended: every byte of it read
    this.received = 0 // body bytes (DATA) from the client
    this.pieces = [] // what came, while a replay is possible; null after
    this.heldBytes = 0
    this.started = false // some byte of it went to a backend
    this.call = call
  }

  // Is `chunk` more than the Content-Length the client announced? (nghttp2 refuses
  // that first; this keeps the backend's framing right whatever it does.)
  overflows (chunk) {
    return this.length !== -1 && this.received + chunk.length > this.length
  }

  // A DATA chunk came: held while a replay is possible. True once more is held than a
  // replay may keep: a caller still connecting stops reading then.
  add (chunk) {
    this.received += chunk.length
    if (this.pieces !== null) {
      this.pieces.push(chunk)
      this.heldBytes += chunk.length
    }
    return this.heldBytes > REPLAY_LIMIT
  }

  // What came so far, for a backend connection that is new (the first, or a retry's).
  held () {
    return this.pieces === null ? [] : this.pieces
  }

  // Pieces went out to a backend: past the limit, nothing is held any more.
  sent () {
    this.started = this.received > 0
    if (this.pieces !== null && this.heldBytes > REPLAY_LIMIT) this.pieces = null
  }

  // The client's stream ended. True when what came agrees with the Content-Length.
  end () {
    this.done = true
    return this.length === -1 || this.received === this.length
  }

  // Is all of it still held (a backend that did not process it may be sent it again)?
  get kept () {
    return this.pieces !== null
  }

  // Can the request be sent again? All of it is held, and it is idempotent or none of
  // it went out yet.
  canReplay () {
    return this.pieces !== null && !this.call && (IDEMPOTENT.has(this.method) || !this.started)
  }

  // Can it be sent again after a backend answered it? Only an idempotent one.
  canRepeat () {
    return this.pieces !== null && IDEMPOTENT.has(this.method)
  }
}

module.exports = { StreamBody }
