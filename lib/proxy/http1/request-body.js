'use strict'

const { ChunkedReader } = require('./chunked')

// Request body bytes kept for a replay on another connection. Past this, the request
// can no longer be replayed and what was sent is let go.
const REPLAY_LIMIT = 64 * 1024
// A body whose length is known and at most this is read whole before a backend is
// taken, by every kind of request (http1/exchange.js, http2/exchange.js,
// http2/from-http1.js): a client that sends it slowly then holds no backend. Only with
// a length: a chunked body, or an HTTP/2 one without content-length, may be a stream the
// client interleaves with the response (gRPC), which waiting for its end would deadlock.
const BUFFER_FIRST = REPLAY_LIMIT
// RFC 9110 9.2.2: a request with one of these methods may be sent again.
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'])

// The client's request body, as its Exchange (exchange.js) reads it: framed by
// Content-Length or chunked, and held while a replay on another connection is still
// possible. It moves no bytes itself: the exchange sends what read() framed, tells it
// with sent(), and on a new connection has replay() write what is held.
//
// A gRPC call (`call`) is never sent again once any of it reached a backend, headers
// included: a call's handler may act on its headers alone (a stream), so only a
// failure before it was sent (the owner's 'connect') may replay it.
class RequestBody {
  constructor (head, call = false) {
    this.chunked = head.chunked ? new ChunkedReader(400) : null
    this.left = head.bodyLength // bytes still to come, for a Content-Length body
    this.done = !head.chunked && head.bodyLength === 0 // every byte of it read
    this.received = 0 // body bytes read from the client
    this.kept = true // every byte sent so far is still held: a replay is possible
    this.first = null // the first piece held: a body that came in one piece needs no array
    this.held = null // the pieces after it
    this.heldBytes = 0
    this.started = false // some body byte was written to a backend
    this.method = head.method // a replay depends on it (canReplay)
    this.call = call
  }

  // Frame the client's bytes from buf[start]: returns where the body's bytes end in
  // buf (buf.length while more is to come; `done` says when it is complete). Throws
  // the chunked framing's HttpError (400) on a malformed body.
  read (buf, start) {
    let end = buf.length
    if (this.chunked !== null) {
      const bodyEnd = this.chunked.read(buf, start, end)
      if (bodyEnd !== -1) {
        end = bodyEnd
        this.done = true
      }
    } else {
      if (end - start > this.left) end = start + this.left
      this.left -= end - start
      if (this.left === 0) this.done = true
    }
    this.received += end - start
    return end
  }

  // Hold a piece read, while a replay is possible. True once more is held than a replay
  // may keep: a caller still connecting stops reading then.
  keep (piece) {
    if (this.kept) {
      if (this.first === null) this.first = piece
      else (this.held ||= []).push(piece)
      this.heldBytes += piece.length
    }
    return this.heldBytes > REPLAY_LIMIT
  }

  // Is the body declared (a Content-Length) at most `bytes` long? A chunked one says
  // nothing of its length.
  fitsIn (bytes) {
    return this.chunked === null && this.left <= bytes
  }

  // A piece went out to the backend as it came.
  sent () {
    this.started = true
    this.dropPastLimit()
  }

  // A backend connection is ready (the first, or one the request is replayed on): it
  // gets every byte held so far.
  replay (socket) {
    if (!this.kept) return
    if (this.first !== null) socket.write(this.first)
    if (this.held !== null) for (const chunk of this.held) socket.write(chunk)
    this.started = this.heldBytes > 0
    this.dropPastLimit()
  }

  dropPastLimit () {
    if (this.kept && this.heldBytes > REPLAY_LIMIT) {
      this.kept = false
      this.first = null
      this.held = null
    }
  }

  // Can the body be sent again? Every byte sent is still held, and either no byte went
  // out yet or the method is one that may be repeated (IDEMPOTENT).
  canReplay () {
    return this.kept && !this.call && (IDEMPOTENT.has(this.method) || !this.started)
  }

  // Can the request be sent again after a backend answered it? Only an idempotent one:
  // the backend may have acted on it, whatever it answered.
  canRepeat () {
    return this.kept && IDEMPOTENT.has(this.method)
  }
}

module.exports = { RequestBody, REPLAY_LIMIT, BUFFER_FIRST, IDEMPOTENT }
