'use strict'

const { RequestBody } = require('../http1/request-body')

const CRLF = '\r\n'

// An HTTP/2 request's body, as its StreamExchange (exchange.js) sends it to an HTTP/1.1
// backend: DATA as it comes, with the request's Content-Length, or chunked when the
// client gave none (http2/request.js says which), ending with the client's trailers.
// What went out is held for a replay on another connection as for HTTP/1.1, by a
// RequestBody (http1/request-body.js: up to 64 KiB, idempotent or not yet sent), whose
// own framing is not used: it is given the framed pieces.
//   body.frame(chunk)      -> the pieces the backend gets for a DATA chunk
//   body.last(trailers)    -> the end of a chunked body ('0\r\n', trailers, '\r\n'), or null
class StreamBody {
  constructor (head) {
    this.chunked = head.chunked
    this.length = head.contentLength // -1: none said
    this.done = head.endStream // the client's stream ended: every byte of it read
    this.received = 0 // body bytes (DATA) from the client
    this.held = new RequestBody({ chunked: false, bodyLength: 0, method: head.method })
  }

  // Is `chunk` more than the Content-Length the client announced? (nghttp2 refuses
  // that first; this keeps the backend's framing right whatever it does.)
  overflows (chunk) {
    return this.length !== -1 && this.received + chunk.length > this.length
  }

  frame (chunk) {
    this.received += chunk.length
    if (!this.chunked) return chunk
    return [`${chunk.length.toString(16)}\r\n`, chunk, CRLF]
  }

  // The client's stream ended; `trailers` are its trailer fields ([name, value, ...]),
  // or null. True when what came agrees with the Content-Length.
  end () {
    this.done = true
    return this.length === -1 || this.received === this.length
  }

  last (trailers) {
    if (!this.chunked) return null
    let out = '0\r\n'
    if (trailers !== null) {
      for (let i = 0; i < trailers.length; i += 2) out += `${trailers[i]}: ${trailers[i + 1]}\r\n`
    }
    return `${out}\r\n`
  }

  // Replay (see http1/request-body.js).
  keep (piece) { return this.held.keep(piece) }
  sent () { this.held.sent() }
  replay (socket) { this.held.replay(socket) }
  canReplay () { return this.held.canReplay() }
  canRepeat () { return this.held.canRepeat() }
}

module.exports = { StreamBody }
