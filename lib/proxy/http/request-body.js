'use strict'

// Request body bytes kept for a replay on another connection (REPLAY_LIMIT). Past it,
// the request can no longer be replayed and what was sent is let go.
const { REPLAY_LIMIT } = require('../../limits')
// A body whose length is known and at most this is read whole before a backend is
// taken: a client that sends it slowly then holds no backend. Only with a length: a
// chunked body, or an HTTP/2 one without content-length, may be a stream the client
// interleaves with the response (gRPC), which waiting for its end would deadlock.
const BUFFER_FIRST = REPLAY_LIMIT
// RFC 9110 9.2.2: a request with one of these methods may be sent again.
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'])

// A request's body as its Exchange (exchange.js) sees it, whichever codec read it: how
// much came, whether all of it did, and what is held while a replay on another
// backend is still possible. It frames nothing and moves no bytes: the client's codec
// gives it pieces (add), the exchange's leg takes what is held (held) when it is new,
// and says when pieces went out (sent).
//
// `framed`: the pieces carry HTTP/1.1 chunked framing as the client sent it (an
// HTTP/1.1 client's chunked body to an HTTP/1.1 backend, passed as it came); else they
// are the body's bytes alone. `length`: the declared length, or -1.
//
// A gRPC call (`call`) is never sent again once any of it reached a backend, headers
// included: a call's handler may act on its headers alone (a stream), so only a
// failure before it was sent (the owner's 'connect') may replay it.
class RequestBody {
  constructor (method, length, done, call = false, framed = false) {
    this.method = method
    this.length = length
    this.done = done // every byte of it came
    this.framed = framed
    this.call = call
    this.received = 0 // bytes read from the client (framing included when framed)
    this.payload = 0 // the body's own bytes among them (--max-body-size)
    this.kept = true // every byte sent so far is still held: a replay is possible
    this.first = null // the first piece held: a body that came in one piece needs no array
    this.rest = null // the pieces after it
    this.heldBytes = 0
    this.started = false // some byte of it went to a backend
  }

  // A piece came (`payload` of its bytes the body's own, less any framing). True once
  // more is held than a replay may keep: a caller still connecting stops reading then.
  add (piece, payload) {
    this.received += piece.length
    this.payload += payload
    if (this.kept) {
      if (this.first === null) this.first = piece
      else (this.rest ||= []).push(piece)
      this.heldBytes += piece.length
    }
    return this.heldBytes > REPLAY_LIMIT
  }

  // Is some of it held, and to stay held till the answer: all of it came, or all of it
  // will fit in what a replay keeps (proxy/http2/client-reads.js copies such reads).
  keptTillAnswer () {
    return this.kept && this.heldBytes > 0 && (this.done || this.fitsIn(REPLAY_LIMIT))
  }

  // Is the body declared at most `bytes` long (and not framed by chunks)?
  fitsIn (bytes) {
    return this.length !== -1 && this.length <= bytes
  }

  // Would more than the declared length come with `piece`? (The codecs frame by it; a
  // guard that the backend's framing stays right whatever they do.)
  overflows (piece) {
    return this.length !== -1 && !this.framed && this.received + piece.length > this.length
  }

  // Pieces went out as they came: past the limit, nothing is held any more.
  sent () {
    this.started = this.received > 0
    this.dropPastLimit()
  }

  // Every piece held, in order, for a backend connection that is new (the first, or
  // a retry's); `each(piece)` is called for each. Then they count as sent.
  replay (each, to) {
    if (this.kept) {
      if (this.first !== null) each.call(to, this.first)
      if (this.rest !== null) for (const piece of this.rest) each.call(to, piece)
    }
    this.replayed()
  }

  // The whole body, if it came and is held as one piece of at most `bytes`, else null:
  // a caller that sends it with the request's head (then replayed()).
  whole (bytes) {
    return this.done && this.kept && this.rest === null && this.heldBytes <= bytes ? this.first : null
  }

  // The pieces held went to a new backend connection.
  replayed () {
    if (this.kept) this.started = this.heldBytes > 0
    this.dropPastLimit()
  }

  dropPastLimit () {
    if (this.kept && this.heldBytes > REPLAY_LIMIT) {
      this.kept = false
      this.first = null
      this.rest = null
    }
  }

  // The body ended: true when what came agrees with its declared length.
  end () {
    this.done = true
    return this.length === -1 || this.framed || this.received === this.length
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

// A request without a body, not a gRPC call: nothing of its RequestBody ever changes
// (add is never called; sent, replay and end write back what is there), so one per
// usual method serves every such request instead of one per request.
const BODILESS = new Map()
for (const method of ['GET', 'HEAD', 'OPTIONS', 'DELETE', 'POST', 'PUT', 'PATCH']) {
  BODILESS.set(method, new RequestBody(method, 0, true))
}

// The body of a request: `length` as RequestBody's, `done` when there is none.
function requestBody (method, length, done, call, framed) {
  if (done && length === 0 && !call && !framed) {
    const shared = BODILESS.get(method)
    if (shared !== undefined) return shared
  }
  return new RequestBody(method, length, done, call, framed)
}

module.exports = { RequestBody, requestBody, BUFFER_FIRST }
