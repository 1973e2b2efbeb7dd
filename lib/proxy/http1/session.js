'use strict'

const { clientAddress } = require('../origin')
const { resetOrDestroy } = require('../../upstream/dial')
const { reasonOf, HttpError } = require('../../errors')
const { findHeadEnd, hasBareLf, parseRequestHead, view } = require('./parse')
const { MAX_HEAD } = require('../message/grammar')
const { ChunkedReader } = require('./chunked')
const { responseHead, fieldsOfTrailers, trailerLines } = require('./heads')
const { Fields, responseFields, trailerFields } = require('../message/rewrite')
const { reply, CONTINUE } = require('./replies')
const { handlers, addListeners, removeListeners } = require('../socket-events')
const { matchPreface, HTTP2, MAYBE } = require('../../wire/h2/preface')
// After lila's last response on a connection it shuts its side and reads (and drops)
// what the client still sends for LINGER_MS, so the client reads the response before
// the connection is reset.
const { LINGER_MS } = require('../../limits')

// Body bytes up to this many are copied behind a head into one write (writeAfter).
const JOIN_LIMIT = 16 * 1024
const LAST_CHUNK = '0\r\n\r\n'
// What an HTTP/1.x request line ends with.
const HTTP_LINE = / HTTP\/\d\.\d$/

// How the client's copy of a final response head is framed (heads.js responseHead's
// `how`): one object per combination, so that a response allocates none.
// HEAD_FRAMING[chunked*4 | close*2 | keepAlive10].
const HEAD_FRAMING = []
for (let i = 0; i < 8; i++) {
  HEAD_FRAMING.push(Object.freeze({ chunked: (i & 4) !== 0, close: (i & 2) !== 0, keepAlive10: (i & 1) !== 0 }))
}
const UPGRADE = { upgrade: true } // responseHead's `how` for a 101
const INTERIM = HEAD_FRAMING[0] // a 1xx: its fields alone

// The fields of the head being written (message/rewrite.js): one array for every
// session, as a head is written at once.
const FIELDS = new Fields()

// How a response body reaches the client (`framing`).
const LENGTH = 0 // as it comes: its length was said, or it has none
const CHUNKS = 1 // lila frames each piece in a chunk (a body of unknown length)
const UNTIL_CLOSE = 2 // as it comes, the connection's close ends it

// The HttpSession a client socket serves.
const SESSION = Symbol('lila.httpSession')

// Client socket handlers shared by every session (socket-events.js): `this` is the
// socket.
const CLIENT = handlers({
  data (chunk) { this[SESSION].onData(chunk) },
  end () { this[SESSION].onEnd() },
  error (err) { this[SESSION].onError(err) },
  close () { this[SESSION].onClose() },
  drain () { if (this[SESSION].exchange !== null) this[SESSION].exchange.onClientDrain() }
})

// One client connection speaking HTTP/1.1: the codec of lila's own on the client's
// side. It reads request heads (strictly, parse.js) and each request's body through its
// framing (Content-Length, or chunked: checked, and passed as it is to an HTTP/1.1
// backend or taken apart for an HTTP/2 one), hands each request to an exchange the
// protocol makes (newExchange: http/exchange.js), writes what the exchange answers in
// HTTP/1.1, and keeps the connection alive between requests. Pipelined requests wait, unread past one head's
// worth, until the response before them is done, so responses go out in order.
//
// A client in the clear whose first bytes are the HTTP/2 connection preface is handed
// to the protocol's HTTP/2 side (toHttp2); over TLS, the protocol chose the codec by
// ALPN before this one was made.
class HttpSession {
  constructor (listener, client) {
    this.listener = listener
    this.client = client
    this.clientAddress = clientAddress(client)
    this.buf = null // received, not yet consumed: a partial head or pipelined requests
    this.scanned = 0 // bytes of buf already searched for the end of a head
    this.exchange = null // the request being served
    this.headTimer = null
    this.closing = false // no further request will be served on this connection
    this.draining = false // drain(): the next response says Connection: close
    this.drainTimer = null // draining between requests: the grace for the next one
    this.clientEnded = false
    this.lingerTimer = null
    this.idleTicks = 0 // listener sweeps since a byte moved (--idle-timeout)
    // The request body being read: bytes left of its length, or -1 while chunked
    // (`chunks`, a ChunkedReader, finds its end); 0: none is being read.
    this.bodyLeft = 0
    this.chunks = null
    this.decoded = null // taking a chunked body apart: the ChunkedReader's onData
    // The response being written.
    this.heldHead = null // its head, until the body bytes read with it join it
    this.framing = LENGTH
    this.keepAlive = false // the connection may serve another request after it
    // The first bytes may be the HTTP/2 preface (prior knowledge; over TLS, HTTP/2 is
    // agreed by ALPN only): until the first request.
    this.mayBeHttp2 = listener.protocol.startHttp2 !== undefined && !client.encrypted
    client[SESSION] = this
    addListeners(client, CLIENT)
  }

  // The client's connection (a TLSSocket behind TLS: its certificate, client-cert.js).
  get socket () {
    return this.client
  }

  // A body's pieces as the client framed it can pass to an HTTP/1.1 backend.
  get chunkedPieces () {
    return true
  }

  // A response head waits for the body bytes read with it (respond, flushHead).
  get holdsHead () {
    return true
  }

  start () {
    this.client.resume()
  }

  // The client speaks HTTP/2 by prior knowledge: the connection, with the bytes read so
  // far, goes to an HTTP/2 session (http2/session.js), which calls the listener's
  // sessionDone.
  toHttp2 (buf) {
    if (this.client.destroyed) return // its close comes, and ends this session
    if (this.headTimer !== null) clearTimeout(this.headTimer)
    this.headTimer = null
    if (this.drainTimer !== null) clearTimeout(this.drainTimer) // the HTTP/2 session drains instead
    this.drainTimer = null
    this.buf = null
    this.client.pause()
    removeListeners(this.client, CLIENT)
    this.client[SESSION] = null
    this.listener.protocol.startHttp2(this.listener, this, this.client, buf)
  }

  // --- The exchange's client (see http/exchange.js) ---

  sendContinue (x) {
    if (x.head.version !== 1) return false
    this.client.write(CONTINUE, 'latin1')
    return true
  }

  // 1xx heads go on as they are, less hop-by-hop fields; never to HTTP/1.0.
  interim (x, res) {
    if (x.head.version !== 1) return
    responseFields(res, false, null, x, null, FIELDS)
    this.client.write(responseHead(res, FIELDS, INTERIM, -1), 'latin1')
  }

  takesChunked (x) {
    return x.head.version === 1
  }

  // The final head: framed for this client (the backend's chunks as they are, a length,
  // chunks of lila's, or the connection's close), with `cookie` (--sticky), held until
  // the first body piece joins it (send, flushHead). Returns its size.
  respond (x, res, how, cookie) {
    const { head } = x
    const status = res.status
    let length = res.contentLength
    let chunked = false
    this.framing = LENGTH
    if (how.framed) {
      chunked = true
    } else if (head.method === 'HEAD' || status === 204 || status === 304) {
      // no body, whatever its length says
    } else if (how.bodyless) {
      if (length === -1) length = 0
    } else if (length === -1) {
      if (head.version === 1 && !how.untilClose) {
        this.framing = CHUNKS
        chunked = true
      } else {
        this.framing = UNTIL_CLOSE
      }
    }
    // After a declined upgrade, what the client sent next may be meant as the new
    // protocol or as HTTP; rather than guess, the connection ends with this response.
    this.keepAlive = head.keepAlive && !this.closing && !head.asksUpgrade && this.framing !== UNTIL_CLOSE &&
      x.body.done
    const headFraming = HEAD_FRAMING[(chunked ? 4 : 0) | (this.keepAlive ? 0 : 2) | (head.version === 0 ? 1 : 0)]
    // The Trailer field stays when its trailers can follow: in lila's chunks.
    responseFields(res, chunked, this.listener.protocol.rewrite.response, x, cookie, FIELDS)
    const text = responseHead(res, FIELDS, headFraming, length)
    this.heldHead = text
    return text.length
  }

  flushHead (x) {
    const head = this.heldHead
    if (head === null || this.exchange !== x) return
    this.heldHead = null
    this.client.write(head, 'latin1')
  }

  // A piece of the response's body; false when the client's socket is full.
  send (x, piece) {
    const head = this.heldHead
    if (this.framing === CHUNKS) {
      const size = `${piece.length.toString(16)}\r\n`
      if (head !== null) this.heldHead = null
      this.client.cork()
      this.client.write(head === null ? size : head + size, 'latin1')
      this.client.write(piece)
      const flowing = this.client.write('\r\n', 'latin1')
      this.client.uncork()
      return flowing
    }
    if (head === null) return this.client.write(piece)
    this.heldHead = null
    return this.writeAfter(head, piece)
  }

  // The response's body is complete: its last chunk and trailers, when lila frames it.
  // Returns the bytes that took.
  finishResponse (x, trailers) {
    let out = this.heldHead === null ? '' : this.heldHead
    this.heldHead = null
    if (this.framing === CHUNKS) out += trailers === null ? LAST_CHUNK : `0\r\n${trailerLinesOf(trailers)}\r\n`
    if (out !== '') this.client.write(out, 'latin1')
    return this.framing === CHUNKS ? out.length : 0
  }

  // A 101's head, as the backend's (with `cookie`).
  tunnelHead (x, res, cookie) {
    responseFields(res, false, this.listener.protocol.rewrite.response, x, cookie, FIELDS)
    const text = responseHead(res, FIELDS, UPGRADE)
    this.client.write(text, 'latin1')
    return text.length
  }

  // lila's own answer; returns its size. The connection stays when the request (and its
  // body) was read whole.
  // `more`: answerOf's { retryAfter, exhausted, fields, exact, page }.
  answer (x, status, detail, more) {
    const { head } = x
    this.keepAlive = head.keepAlive && x.body.done && !this.closing
    const rules = this.listener.protocol.rewrite.response
    const options = { ...more, close: !this.keepAlive, head: head.method === 'HEAD', grpc: x.grpc, rules, ctx: x }
    const bytes = reply(status, detail, options)
    this.heldHead = null
    this.client.write(bytes)
    return bytes.length
  }

  // The request's body broke its framing (400), or stopped coming (408): answered, and
  // the connection closed (the rest of the body cannot be told from the next request).
  refuseBody (x, status, detail) {
    this.stopBody()
    return this.refuse(status, detail, { grpc: x.grpc, page: x.errorPage(status) })
  }

  pauseBody (x) {
    this.client.pause()
  }

  resumeBody (x) {
    if (this.client.isPaused()) this.client.resume()
  }

  // lila stopped reading the client (back-pressure, or holding enough of a body).
  bodyPaused (x) {
    return this.client.isPaused()
  }

  // A failure after the response started: the client must not take what it got for
  // the whole of it.
  cut (x) {
    this.client.destroy()
  }

  // Reset the connection (RST), as a fault injected on a backend asks (attempt.js).
  reset (x) {
    resetOrDestroy(this.client)
  }

  // Does a write to the client still hold bytes (connection-pool.js READ)?
  holdsWrites (x) {
    return this.client.writableLength !== 0
  }

  // A byte moved for this connection (not idle, see onIdleSweep).
  touch () {
    this.idleTicks = 0
  }

  // The exchange is over (`ok`: its response is complete, or lila answered).
  exchangeDone (x, ok) {
    this.exchange = null
    this.heldHead = null
    const reading = this.bodyLeft !== 0
    this.stopBody()
    // Its head left before drain() and promised the client another request: wait for it.
    if (ok && this.keepAlive && !reading && this.draining) {
      this.closing = false
      return this.awaitLastRequest()
    }
    if (!ok || !this.keepAlive || reading || this.closing) return this.shut()
    this.resume()
    this.nextRequest()
  }

  // --- What a tunnel (tunnel.js) does with the connection ---

  // The bytes read past the request head that no exchange took yet: for a tunnel, the
  // client's first bytes in the new protocol.
  takeBuffered () {
    const buf = this.buf
    this.buf = null
    return buf
  }

  pause () {
    this.client.pause()
  }

  resume () {
    if (this.client.isPaused()) this.client.resume()
  }

  // End lila's side of the connection (a tunnel's half-close).
  end () {
    if (!this.client.destroyed) this.client.end()
  }

  // A head (latin1 text) and the bytes after it, in one system call. A small piece is
  // copied behind the head into one Buffer: one plain write, cheaper in Node than a
  // corked writev of the two (a chunk array, the string encoded on the side).
  writeAfter (head, piece) {
    if (piece.length > JOIN_LIMIT) {
      this.client.cork()
      this.client.write(head, 'latin1')
      const flowing = this.client.write(piece)
      this.client.uncork()
      return flowing
    }
    const bytes = Buffer.allocUnsafe(head.length + piece.length)
    bytes.latin1Write(head, 0)
    piece.copy(bytes, head.length)
    return this.client.write(bytes)
  }

  // The listener's sweep, for the exchange's --timeout and --body-timeout (see
  // Exchange#onSweep).
  onSweep (silentLimit, bodyLimit) {
    if (this.exchange !== null) this.exchange.onSweep(silentLimit, bodyLimit)
  }

  // --- Reading ---

  onData (chunk) {
    this.idleTicks = 0
    if (this.lingerTimer !== null) return // closing: drop what still comes
    const x = this.exchange
    if (x !== null) {
      if (x.tunnel !== null) return x.tunnel.toBackend(chunk)
      if (this.bodyLeft !== 0) return this.readBody(chunk, 0)
    }
    this.buf = this.buf === null ? chunk : Buffer.concat([this.buf, chunk])
    if (x === null) this.nextRequest()
    else if (this.buf.length > MAX_HEAD) this.client.pause() // pipelined: wait for the response
  }

  // Serve the requests at the front of `buf` while their heads are all there (one at a
  // time: the next waits for the response before it).
  nextRequest () {
    while (this.buf !== null && this.exchange === null && !this.closing) {
      let buf = this.buf
      if (this.mayBeHttp2 && buf[0] === 0x50) { // "P"
        const preface = matchPreface(buf)
        if (preface === HTTP2) return this.toHttp2(buf)
        if (preface === MAYBE) return this.waitForHead()
      }
      // RFC 9112 2.2: ignore empty lines before a request line.
      let start = 0
      while (start + 1 < buf.length && buf[start] === 13 && buf[start + 1] === 10) start += 2
      if (start === buf.length) {
        this.buf = null
        break
      }
      // A head arriving in pieces is searched from where the last search stopped, so
      // a client sending a byte at a time costs linear work, not quadratic.
      const from = Math.max(start, this.scanned)
      const end = findHeadEnd(buf, start, from)
      if (end === -1) {
        if (buf.length - start > MAX_HEAD) return this.refuse(431, 'request head too large')
        if (hasBareLf(buf, from)) return this.refuse(400, 'bare LF in the request head')
        if (this.clientEnded) return this.refuse(400, 'connection closed in the middle of a request head')
        if (start > 0) this.buf = buf.subarray(start)
        this.scanned = this.buf.length
        return this.waitForHead()
      }
      if (this.headTimer !== null) {
        clearTimeout(this.headTimer)
        this.headTimer = null
      }
      if (end - start > MAX_HEAD + 4) return this.refuse(431, 'request head too large')
      let head
      try {
        head = parseRequestHead(buf, start, end)
      } catch (err) {
        if (!(err instanceof HttpError)) throw err
        if (this.mayBeHttp2 && !HTTP_LINE.test(buf.latin1Slice(start, buf.indexOf(10, start) - 1))) {
          return this.notHttp()
        }
        return this.refuse(err.status, err.message)
      }
      this.buf = null
      this.scanned = 0
      this.mayBeHttp2 = false
      if (this.draining) this.lastRequest()
      const x = this.listener.protocol.newExchange(this, head, end - start)
      this.exchange = x
      this.startBody(x)
      x.start()
      if (end < buf.length) {
        buf = buf.subarray(end)
        if (this.exchange === x && this.bodyLeft !== 0) this.readBody(buf, 0)
        else this.unread(buf)
      }
      // The client already half-closed: a body not complete by now never will be.
      if (this.clientEnded && this.exchange === x) this.onEnd()
    }
    if (this.buf === null && this.exchange === null && this.clientEnded) this.shut()
  }

  // The request's body is to be read: how it is framed.
  startBody (x) {
    const { head } = x
    this.bodyLeft = head.chunked ? -1 : head.bodyLength
    if (!head.chunked) return
    this.chunks = new ChunkedReader(400, { keepTrailers: !x.body.framed })
    if (!x.body.framed) this.decoded = (b, s, e) => x.onBody(b.subarray(s, e))
  }

  stopBody () {
    this.bodyLeft = 0
    this.chunks = null
    this.decoded = null
  }

  // Body bytes from buf[start] for the exchange: up to the body's end, as it framed
  // them (RequestBody's `framed`) or taken apart; what follows is the next request's.
  readBody (buf, start) {
    const x = this.exchange
    let end = buf.length
    let trailers = null
    if (this.chunks !== null) {
      const before = this.chunks.data
      let bodyEnd
      try {
        bodyEnd = this.chunks.read(buf, start, end, this.decoded)
      } catch (err) {
        if (!(err instanceof HttpError)) throw err
        return x.clientBodyFailed(err.message)
      }
      if (bodyEnd !== -1) end = bodyEnd
      if (this.decoded === null && end > start) x.onBody(view(buf, start, end), this.chunks.data - before)
      if (bodyEnd === -1) return
      if (this.decoded !== null) trailers = fieldsOfTrailers(this.chunks.trailers)
    } else {
      if (end - start > this.bodyLeft) end = start + this.bodyLeft
      this.bodyLeft -= end - start
      if (end > start) x.onBody(view(buf, start, end))
      if (this.bodyLeft !== 0) return
    }
    if (this.exchange !== x) return
    this.stopBody()
    if (end < buf.length) this.unread(buf.subarray(end))
    x.onBodyEnd(trailers)
  }

  // A head (or the HTTP/2 preface) has started to arrive: it has --header-timeout.
  waitForHead () {
    if (this.headTimer === null) {
      this.headTimer = setTimeout(() => this.onHeadTimeout(), this.listener.config.headerTimeout)
    }
  }

  // Bytes taken off the front of the stream but not consumed go back in front of
  // what arrived since.
  unread (bytes) {
    this.buf = this.buf === null ? bytes : Buffer.concat([bytes, this.buf])
  }

  // The connection's first line is no HTTP/1.x request line (one ends in HTTP/x.y), and
  // its client may have meant HTTP/2 by prior knowledge: an invalid connection preface,
  // a connection error (RFC 9113 3.4) that has the connection closed, not answered in a
  // protocol the client may not speak.
  notHttp () {
    this.listener.log.debug(`client ${this.clientAddress}: neither HTTP/1.x nor the HTTP/2 preface; closed`)
    this.buf = null
    this.shut()
  }

  // A per-client limit turns the client away (listener.js admit): 429, then closed.
  turnAway ({ detail, retryAfter }) {
    this.refuse(429, detail, { retryAfter })
  }

  // Answer a request lila cannot serve and close the connection. `grpc`: the request's
  // gRPC call type (message/grpc.js), for a gRPC-shaped answer. Returns the answer's size.
  refuse (status, detail, { retryAfter = 0, grpc = null, page = this.listener.errorPage(status) } = {}) {
    this.listener.log.debug(`${status} to ${this.clientAddress}: ${detail}`)
    // A head refused before an exchange is counted here; an exchange counts its own.
    if (this.exchange === null) this.listener.protocol.stats.refused(status)
    this.buf = null
    const bytes = reply(status, detail, { close: true, retryAfter, grpc, page }) // page: --error-page's
    this.client.write(bytes)
    this.shut()
    return bytes.length
  }

  onHeadTimeout () {
    this.headTimer = null
    if (this.exchange === null) this.refuse(408, 'request head not received in time')
  }

  // The listener's sweep: no traffic for --idle-timeout closes the connection. While a
  // backend works on the request, the client has nothing to say: the exchange's own
  // timeouts apply then.
  onIdleSweep (idleLimit) {
    if (++this.idleTicks < idleLimit) return
    if (this.exchange !== null && this.exchange.awaitingBackend()) return
    this.destroy()
  }

  onError (err) {
    this.listener.log.debug(`client ${this.clientAddress}: ${reasonOf(err)}`)
  }

  // The client half-closed: in a tunnel, that passes on; in the middle of a request
  // body, the request can never be completed.
  onEnd () {
    this.clientEnded = true
    const x = this.exchange
    if (x === null) return this.shut()
    if (x.tunnel !== null) x.tunnel.clientEnded()
    else if (this.bodyLeft !== 0) x.clientBodyFailed('connection closed in the middle of the request body')
  }

  // No more requests: end lila's side, and give the client a moment to read it.
  shut () {
    this.closing = true
    if (this.headTimer !== null) {
      clearTimeout(this.headTimer)
      this.headTimer = null
    }
    if (this.client.destroyed || this.lingerTimer !== null) return
    this.client.end()
    this.client.resume()
    this.lingerTimer = setTimeout(() => this.client.destroy(), LINGER_MS)
  }

  onClose () {
    if (this.headTimer !== null) clearTimeout(this.headTimer)
    if (this.drainTimer !== null) clearTimeout(this.drainTimer)
    if (this.lingerTimer !== null) clearTimeout(this.lingerTimer)
    const x = this.exchange
    this.exchange = null
    if (x !== null) x.onClientClose()
    this.listener.sessionDone(this)
  }

  destroy () {
    this.client.destroy()
  }

  // Graceful close (a shutdown, an upgrade, a reload that removes the listener): no
  // request is cut. One in flight ends the connection after its response (which says
  // Connection: close, unless its head already left). Between requests the client may
  // be sending the next one at this moment: it is served the same way if it comes
  // within `graceMs`, and the connection ends if none does.
  drain (graceMs) {
    if (this.draining || this.closing) return
    this.draining = true
    this.graceMs = graceMs
    if (this.exchange !== null) this.closing = true
    else this.awaitLastRequest()
  }

  awaitLastRequest () {
    this.drainTimer = setTimeout(() => {
      this.drainTimer = null
      if (this.exchange === null && this.buf === null) this.shut() // (a head on its way has --header-timeout)
    }, this.graceMs)
    this.resume()
    this.nextRequest()
  }

  // Draining: the request starting now is the connection's last.
  lastRequest () {
    this.closing = true
    if (this.drainTimer !== null) clearTimeout(this.drainTimer)
    this.drainTimer = null
  }
}

// Trailer fields as they go on (message/rewrite.js), as HTTP/1.1 lines.
function trailerLinesOf (fields) {
  trailerFields(fields, FIELDS)
  return trailerLines(FIELDS)
}

module.exports = { HttpSession }
