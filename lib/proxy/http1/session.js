'use strict'

const { clientAddress } = require('../origin')
const { resetOrDestroy } = require('../../upstream/dial')
const { reasonOf } = require('../../errors')
const { RequestReader } = require('./request-reader')
const { ResponseWriter } = require('./response-writer')
const { addListeners, removeListeners } = require('../socket-events')
const { SESSION, CLIENT } = require('./session-events')
// After lila's last response on a connection it shuts its side and reads (and drops)
// what the client still sends for LINGER_MS, so the client reads the response before
// the connection is reset: counted in the listener's sweeps, no timer per connection.
const { LINGER_MS } = require('../../limits')

// One client connection speaking HTTP/1.1: the codec of lila's own on the client's
// side. Its requests are read one at a time, each into an exchange the protocol makes
// (request-reader.js, the class it extends); the session is the exchange's client: it
// has what the exchange answers written in HTTP/1.1 (response-writer.js), keeps the
// connection alive between requests, drains it, shuts it and closes it when idle.
//
// A client in the clear whose first bytes are the HTTP/2 connection preface is handed
// to the protocol's HTTP/2 side (toHttp2); over TLS, the protocol chose the codec by
// ALPN before this one was made.
class HttpSession extends RequestReader {
  constructor (listener, client) {
    super(listener, client)
    this.clientAddress = clientAddress(client)
    this.closing = false // no further request will be served on this connection
    this.draining = false // drain(): the next response says Connection: close
    this.drainTimer = null // draining between requests: the grace for the next one
    this.lingerTicks = 0 // shut: sweeps left until the connection is cut (LINGER_MS)
    this.idleTicks = 0 // listener sweeps since a byte moved (--idle-timeout)
    this.writer = new ResponseWriter(client, listener) // the response being written
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
    this.clearHeadTimer()
    if (this.drainTimer !== null) clearTimeout(this.drainTimer) // the HTTP/2 session drains instead
    this.drainTimer = null
    this.dropUnread()
    this.client.pause()
    removeListeners(this.client, CLIENT)
    this.client[SESSION] = null
    this.listener.protocol.startHttp2(this.listener, this, this.client, buf)
  }

  // --- The exchange's client (see http/exchange.js; refuseBody is request-reader.js's) ---

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

  // The exchange is over (`ok`: its response is complete, or lila answered): the next
  // request is read, or the connection ends.
  exchangeDone (x, ok) {
    const reading = this.endRequest(x, ok)
    this.writer.done()
    const { keepAlive } = this.writer
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
    this.keepForNext(x) // after the requests read above
  }

  // End lila's side of the connection: a tunnel's half-close (tunnel.js, which takes
  // the client's first bytes from the reader: takeBuffered).
  end () {
    if (!this.client.destroyed) this.client.end()
  }

  // The listener's sweep, for the exchange's --timeout and --body-timeout (see
  // Exchange#onSweep).
  onSweep (silentLimit, bodyLimit) {
    if (this.exchange !== null) this.exchange.onSweep(silentLimit, bodyLimit)
  }

  // --- The connection: its socket's events (session-events.js), refusals, idleness, closing ---

  // Bytes from the client: read (request-reader.js) unless lila shut the connection.
  onData (chunk) {
    this.idleTicks = 0
    if (this.lingerTicks > 0) return // shut: drop what still comes
    this.read(chunk)
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
    this.dropUnread()
    const size = this.writer.refusal(status, detail, retryAfter, grpc, page) // page: --error-page's
    this.shut()
    return size
  }

  // The listener's sweep: a shut connection still open after LINGER_MS, or one without
  // traffic for --idle-timeout, is closed. While a backend works on the request, the
  // client has nothing to say: the exchange's own timeouts apply then.
  onIdleSweep (idleLimit) {
    if (this.lingerTicks > 0 && --this.lingerTicks === 0) return this.destroy()
    if (this.idleTicks > 0) this.wentQuiet()
    if (++this.idleTicks < idleLimit) return
    if (this.exchange !== null && this.exchange.awaitingBackend()) return
    this.destroy()
  }

  onError (err) {
    this.listener.log.debug(`client ${this.clientAddress}: ${reasonOf(err)}`)
  }

  // No more requests: end lila's side, and give the client a moment to read it.
  shut () {
    this.closing = true
    this.clearHeadTimer()
    if (this.client.destroyed || this.lingerTicks > 0) return
    this.client.end()
    this.client.resume()
    this.lingerTicks = this.listener.ticksFor(LINGER_MS)
  }

  onClose () {
    if (this.drainTimer !== null) clearTimeout(this.drainTimer)
    const x = this.letGo()
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
