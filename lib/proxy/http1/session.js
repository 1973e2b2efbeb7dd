'use strict'

const { clientAddress } = require('../bind')
const { resetOrDestroy } = require('../../upstream/dial')
const { reasonOf, HttpError } = require('../../errors')
const { findHeadEnd, hasBareLf, parseRequestHead, MAX_HEAD } = require('./parse')
const { reply } = require('./replies')
const { handlers, addListeners, removeListeners } = require('../socket-events')
const { matchPreface, HTTP2, MAYBE } = require('../http2/preface')

// After lila's last response on a connection it shuts its side and reads (and drops)
// what the client still sends for this long, so the client reads the response before
// the connection is reset.
const LINGER_MS = 2000
// Body bytes up to this many are copied behind a head into one write (writeAfter).
const JOIN_LIMIT = 16 * 1024

// Client socket handlers shared by every session (socket-events.js): `this` is the
// socket.
const CLIENT = handlers({
  data (chunk) { this.session.onData(chunk) },
  end () { this.session.onEnd() },
  error (err) { this.session.onError(err) },
  close () { this.session.onClose() },
  drain () { if (this.session.exchange !== null) this.session.exchange.onClientDrain() }
})

// One client connection in HTTP mode: reads request heads (strictly), hands each
// request to an Exchange that balances it on its own (the protocol's `Exchange`:
// exchange.js, or http2/from-http1.js for HTTP/2 backends), and keeps the connection
// alive between requests. Pipelined requests wait, unread past one head's worth, until the
// response before them is done, so responses go out in order.
//
// The exchange being served uses the client's connection through write, cork/uncork,
// pause/resume, end, touch and takeBuffered, and reads `clientAddress` and `closing`;
// it hands back with bodyDone(rest), exchangeDone(keepAlive) and refuse(status, detail).
//
// A client that speaks HTTP/2 (TLS agreed on h2, or its first bytes are the HTTP/2
// connection preface) is handed to the protocol's HTTP/2 side (toHttp2), when the
// listener's protocol has one (http2/protocol.js).
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
    // The first bytes may be the HTTP/2 preface (prior knowledge; over TLS, HTTP/2 is
    // agreed by ALPN only): until the first request.
    this.mayBeHttp2 = listener.protocol.startHttp2 !== undefined && !client.encrypted
    client.session = this
    addListeners(client, CLIENT)
  }

  start () {
    if (this.client.alpnProtocol === 'h2') return this.toHttp2(null)
    this.client.resume()
  }

  // The client speaks HTTP/2: the connection, with the bytes read so far, goes to an
  // HTTP/2 session (http2/session.js), which calls the listener's sessionDone.
  toHttp2 (buf) {
    if (this.client.destroyed) return // its close comes, and ends this session
    if (this.headTimer !== null) clearTimeout(this.headTimer)
    this.headTimer = null
    if (this.drainTimer !== null) clearTimeout(this.drainTimer) // the HTTP/2 session drains instead
    this.drainTimer = null
    this.buf = null
    this.client.pause()
    removeListeners(this.client, CLIENT)
    this.client.session = null
    this.listener.protocol.startHttp2(this.listener, this, this.client, buf)
  }

  // What the exchange being served may do with the client's connection.

  write (bytes, encoding) {
    return this.client.write(bytes, encoding)
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

  // Writes between cork() and uncork() leave in one syscall.
  cork () {
    this.client.cork()
  }

  uncork () {
    this.client.uncork()
  }

  // Stop reading the client (its bytes have nowhere to go yet), and read on.
  pause () {
    this.client.pause()
  }

  resume () {
    if (this.client.isPaused()) this.client.resume()
  }

  // lila stopped reading the client (back-pressure, or holding enough of a body).
  get paused () {
    return this.client.isPaused()
  }

  // A byte moved for this connection (not idle, see onIdleSweep).
  touch () {
    this.idleTicks = 0
  }

  // The bytes read past the request head that no exchange took yet: for a tunnel, the
  // client's first bytes in the new protocol.
  takeBuffered () {
    const buf = this.buf
    this.buf = null
    return buf
  }

  // End lila's side of the connection (a tunnel's half-close).
  end () {
    if (!this.client.destroyed) this.client.end()
  }

  // The listener's sweep, for the exchange's --timeout and --body-timeout (see
  // Exchange#onSweep).
  onSweep (silentLimit, bodyLimit) {
    if (this.exchange !== null) this.exchange.onSweep(silentLimit, bodyLimit)
  }

  onData (chunk) {
    this.idleTicks = 0
    if (this.lingerTimer !== null) return // closing: drop what still comes
    const exchange = this.exchange
    if (exchange !== null && exchange.wantsClientData) return exchange.onClientData(chunk, 0)
    this.buf = this.buf === null ? chunk : Buffer.concat([this.buf, chunk])
    if (exchange === null) this.nextRequest()
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
        return this.refuse(err.status, err.message)
      }
      this.buf = null
      this.scanned = 0
      this.mayBeHttp2 = false
      if (this.draining) this.lastRequest()
      const exchange = new this.listener.protocol.Exchange(this, head, end - start)
      this.exchange = exchange
      exchange.start()
      if (end < buf.length) {
        buf = buf.subarray(end)
        if (this.exchange === exchange && exchange.wantsClientData) exchange.onClientData(buf, 0)
        else this.unread(buf)
      }
      // The client already half-closed: a body not complete by now never will be.
      if (this.clientEnded && this.exchange === exchange) exchange.onClientEnd()
    }
    if (this.buf === null && this.exchange === null && this.clientEnded) this.shut()
  }

  // A head (or the HTTP/2 preface) has started to arrive: it has --header-timeout.
  waitForHead () {
    if (this.headTimer === null) {
      this.headTimer = setTimeout(() => this.onHeadTimeout(), this.listener.config.headerTimeout)
    }
  }

  // The exchange has read its whole request body; `rest` is what followed it.
  bodyDone (rest) {
    if (rest !== null) this.unread(rest)
  }

  // Bytes taken off the front of the stream but not consumed go back in front of
  // what arrived since.
  unread (bytes) {
    this.buf = this.buf === null ? bytes : Buffer.concat([bytes, this.buf])
  }

  // The exchange is over: its response is complete (or it failed and was answered).
  exchangeDone (keepAlive) {
    this.exchange = null
    // Its head left before drain() and promised the client another request: wait for it.
    if (keepAlive && this.draining) {
      this.closing = false
      return this.awaitLastRequest()
    }
    if (!keepAlive || this.closing) return this.shut()
    this.resume()
    this.nextRequest()
  }

  // Answer a request lila cannot serve and close the connection.
  // A per-client limit turns the client away (listener.js admit): 429, then closed.
  turnAway ({ detail, retryAfter }) {
    this.refuse(429, detail, { retryAfter })
  }

  // `grpc`: the exchange's gRPC call type (grpc.js), for a gRPC-shaped answer.
  refuse (status, detail, { retryAfter = 0, grpc = null } = {}) {
    this.listener.log.debug(`${status} to ${this.clientAddress}: ${detail}`)
    // A head refused before an exchange is counted here; an exchange counts its own.
    if (this.exchange === null) this.listener.protocol.stats.refused(status)
    this.buf = null
    this.client.write(reply(status, detail, { close: true, retryAfter, grpc }))
    this.shut()
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

  onEnd () {
    this.clientEnded = true
    if (this.exchange === null) this.shut()
    else this.exchange.onClientEnd()
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
    if (this.exchange !== null) this.exchange.onClientClose()
    this.exchange = null
    this.listener.sessionDone(this)
  }

  destroy () {
    this.client.destroy()
  }

  // Reset the connection (RST), as a fault injected on a backend asks (attempt.js).
  reset () {
    resetOrDestroy(this.client)
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

module.exports = { HttpSession }
