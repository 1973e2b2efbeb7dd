'use strict'

const { clientAddress } = require('../origin')
const { resetOrDestroy } = require('../../upstream/dial')
const { reasonOf } = require('../../errors')
const { HeadReader, NOT_HTTP } = require('./head-reader')
const { MAX_HEAD } = require('../message/grammar')
const { NO_BODY } = require('./body-reader')
const { readsAfter } = require('./client-reads')
const { ResponseWriter } = require('./response-writer')
const { addListeners, removeListeners } = require('../socket-events')
const { SESSION, CLIENT } = require('./session-events')
const { matchPreface, HTTP2, MAYBE } = require('../../wire/h2/preface')
// After lila's last response on a connection it shuts its side and reads (and drops)
// what the client still sends for LINGER_MS, so the client reads the response before
// the connection is reset: counted in the listener's sweeps, no timer per connection.
const { LINGER_MS } = require('../../limits')

const HEADS = new HeadReader() // one for every connection: a head is read at once

// One client connection speaking HTTP/1.1: the codec of lila's own on the client's
// side. It reads request heads (head-reader.js) and each request's body through its
// framing (body-reader.js), hands each request to an exchange the protocol makes
// (newExchange: http/exchange.js), has what the exchange answers written in HTTP/1.1
// (response-writer.js), and keeps the connection alive between requests. Pipelined
// requests wait, unread past one head's worth, until the response before them is done.
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
    this.scanned = 0 // bytes of buf already searched for the end of a head (HEADS)
    this.exchange = null // the request being served
    this.spare = null // the last exchange, over and reusable: the next request's (exchangeDone)
    this.headTimer = null
    this.closing = false // no further request will be served on this connection
    this.draining = false // drain(): the next response says Connection: close
    this.drainTimer = null // draining between requests: the grace for the next one
    this.clientEnded = false
    this.lingerTicks = 0 // shut: sweeps left until the connection is cut (LINGER_MS)
    this.idleTicks = 0 // listener sweeps since a byte moved (--idle-timeout)
    this.bodyReader = NO_BODY // the body being read: one made for the first request with one
    this.headForm = null // the last request's head, read by nothing now: the next is parsed into it
    this.writer = new ResponseWriter(client, listener) // the response being written
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

  // The response and its head are the writer's (response-writer.js).
  sendContinue (x) {
    return this.writer.sendContinue(x)
  }

  interim (x, res) {
    this.writer.interim(x, res)
  }

  takesChunked (x) {
    return x.head.version === 1
  }

  respond (x, res, how, cookie) {
    return this.writer.respond(x, res, how, cookie, this.closing)
  }

  flushHead (x) {
    if (this.exchange === x) this.writer.flushHead()
  }

  send (x, piece) {
    return this.writer.send(piece)
  }

  finishResponse (x, trailers) {
    return this.writer.finish(trailers)
  }

  tunnelHead (x, res, cookie) {
    return this.writer.tunnelHead(x, res, cookie)
  }

  answer (x, status, detail, more) {
    return this.writer.answer(x, status, detail, more, this.closing)
  }

  // The request's body broke its framing (400), or stopped coming (408): answered, and
  // the connection closed (the rest of the body cannot be told from the next request).
  refuseBody (x, status, detail) {
    this.bodyReader.stop()
    return this.refuse(status, detail, { grpc: x.grpc, page: x.errorPage(status) })
  }

  // Reading the client stops and goes on (an exchange's body, a tunnel's bytes).
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

  // The exchange is over (`ok`: its response is complete, or lila answered). Its head
  // is the next one's form unless a copy for --mirror or a --otlp span may read it later.
  exchangeDone (x, ok) {
    this.exchange = null
    if (ok && x.shadow === null && x.trace === null) this.headForm = x.head
    this.writer.done()
    const reading = this.bodyReader.active
    const { keepAlive } = this.writer
    this.bodyReader.stop()
    // Its head left before drain() and promised the client another request: wait for it.
    if (ok && keepAlive && !reading && this.draining) {
      this.closing = false
      return this.awaitLastRequest()
    }
    if (!ok || !keepAlive || reading || this.closing) {
      // The last response the client asked for, nothing left to read or to write: closed
      // at once (response-writer.js lastAsked); else shut, and lingered (LINGER_MS).
      return ok && !reading && this.buf === null && this.writer.lastAsked(x) ? this.client.destroy() : this.shut()
    }
    this.resumeBody(null)
    this.nextRequest()
    // x made new serves the next request read later, not one read above: its callers are still on the stack.
    if (x.reusable) this.spare = x.shelve()
  }

  // --- What a tunnel (tunnel.js) does with the connection ---

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

  // --- Reading ---

  onData (chunk) {
    this.idleTicks = 0
    if (this.lingerTicks > 0) return // shut: drop what still comes
    const x = this.exchange
    if (x !== null) {
      if (x.tunnel !== null) return x.tunnel.toBackend(chunk)
      if (this.bodyReader.active) return this.readBody(chunk, 0)
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
      const head = HEADS.read(buf, this.scanned, this.clientEnded, this.mayBeHttp2, this.headForm)
      const { start, end, status, detail } = HEADS
      this.scanned = HEADS.scanned
      if (head === null) {
        if (status === NOT_HTTP) return this.notHttp()
        if (status !== 0) return this.refuse(status, detail)
        if (start === buf.length) {
          this.buf = null
          break
        }
        if (start > 0) this.buf = buf.subarray(start)
        return this.waitForHead()
      }
      if (this.headTimer !== null) {
        clearTimeout(this.headTimer)
        this.headTimer = null
      }
      this.buf = this.headForm = null
      this.mayBeHttp2 = false
      if (this.draining) this.lastRequest()
      const x = this.listener.protocol.newExchange(this, head, end - start, null, this.spare)
      this.spare = null
      this.exchange = x
      readsAfter(this, head) // a long body, or a connection kept alive: into lila's buffers
      if (head.bodyLength !== 0) (this.bodyReader = this.bodyReader.own()).start(x) // a length, or chunked (-1)
      x.start()
      if (end < buf.length) {
        buf = buf.subarray(end)
        if (this.exchange === x && this.bodyReader.active) this.readBody(buf, 0)
        else this.unread(buf)
      }
      // The client already half-closed: a body not complete by now never will be.
      if (this.clientEnded && this.exchange === x) this.onEnd()
    }
    if (this.buf === null && this.exchange === null && this.clientEnded) this.shut()
  }

  // Body bytes from buf[start] for the exchange (body-reader.js); what follows its end
  // is the next request's.
  readBody (buf, start) {
    const x = this.exchange
    const reader = this.bodyReader
    const end = reader.read(x, buf, start)
    if (end === -1 || this.exchange !== x) return
    const { trailers } = reader
    reader.stop()
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
    const size = this.writer.refusal(status, detail, retryAfter, grpc, page) // page: --error-page's
    this.shut()
    return size
  }

  onHeadTimeout () {
    this.headTimer = null
    if (this.exchange === null) this.refuse(408, 'request head not received in time')
  }

  // The listener's sweep: a shut connection still open after LINGER_MS, or one without
  // traffic for --idle-timeout, is closed. While a backend works on the request, the
  // client has nothing to say: the exchange's own timeouts apply then.
  onIdleSweep (idleLimit) {
    if (this.lingerTicks > 0 && --this.lingerTicks === 0) return this.destroy()
    if (this.idleTicks > 0) this.spare = this.headForm = null // gone quiet: memory per idle client
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
    else if (this.bodyReader.active) x.clientBodyFailed('connection closed in the middle of the request body')
  }

  // No more requests: end lila's side, and give the client a moment to read it.
  shut () {
    this.closing = true
    if (this.headTimer !== null) {
      clearTimeout(this.headTimer)
      this.headTimer = null
    }
    if (this.client.destroyed || this.lingerTicks > 0) return
    this.client.end()
    this.client.resume()
    this.lingerTicks = this.listener.ticksFor(LINGER_MS)
  }

  onClose () {
    if (this.headTimer !== null) clearTimeout(this.headTimer)
    if (this.drainTimer !== null) clearTimeout(this.drainTimer)
    const x = this.exchange
    this.exchange = this.spare = null
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
    this.resumeBody(null)
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
