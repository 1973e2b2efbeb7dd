'use strict'

const { performance } = require('perf_hooks')
const { reasonOf } = require('./errors')
const { clientAddress, originOf } = require('./listen')
const { dial, readyEvent, resetOrDestroy } = require('./dial')
const { formatProxyHeader } = require('./proxy-protocol')

// While a backend is being connected, what the client sends is held here (and replayed
// to the next backend if the connect fails). Past this much, the client is paused.
const EARLY_LIMIT = 64 * 1024

// L4 balancing, one client connection and its (current) backend connection: pick a
// backend, connect (trying others when that fails), then pipe bytes both ways until
// both sides are done. Served by a Listener (listener.js).
class TcpSession {
  constructor (listener, client) {
    this.listener = listener
    this.client = client
    this.clientAddress = clientAddress(client) // read by ip-hash
    this.upstream = null // the backend socket, once an attempt starts
    this.proxyHeader = null // --proxy-protocol: written first on every attempt
    this.lease = null
    this.waiter = null // while queued for a backend slot
    this.tried = null
    this.attempts = 0
    this.piping = false
    this.answered = false // the backend sent something (or closed cleanly)
    this.startedAt = 0 // for the latency sample: the connect began, it completed, the
    this.connectedAt = 0 // client's first byte reached the backend
    this.sentAt = 0
    this.clientClosed = false
    this.clientEnded = false
    this.finished = false
    // Read the client while connecting, so that it leaving is noticed at once; what it
    // sends waits in `early` until a backend is connected.
    this.early = []
    this.earlyBytes = 0
    this.onEarlyData = chunk => {
      this.early.push(chunk)
      this.earlyBytes += chunk.length
      if (this.earlyBytes >= EARLY_LIMIT) client.pause()
    }
    client.on('data', this.onEarlyData)
    client.on('end', () => { this.clientEnded = true })
    client.on('error', err => this.onClientError(err))
    client.on('close', () => this.onClientClose())
  }

  start () {
    this.client.resume()
    this.connectNext()
  }

  // Take a slot on the next backend the mode picks (waiting in the queue if every
  // backend is at its max-conn), or give up.
  connectNext () {
    const { upstream, config } = this.listener
    if (this.attempts <= config.retries) {
      const lease = upstream.acquire(this, this.tried)
      if (lease !== null) return this.connect(lease)
      this.waiter = upstream.enqueue(this, this.tried, (lease, reason) => this.onQueued(lease, reason))
      if (this.waiter !== null) return
    }
    this.giveUp(`no backend could take a connection from ${this.clientAddress} (${this.attempts} tried)`)
  }

  onQueued (lease, reason) {
    this.waiter = null
    if (lease === null) return this.giveUp(`a connection from ${this.clientAddress} left the queue: ${reason}`)
    this.connect(lease)
  }

  // Close a client no backend could take.
  giveUp (message) {
    const { listener } = this
    listener.unserved++
    if (listener.closing) listener.log.debug(message)
    else listener.log.warn(message)
    this.client.destroy()
  }

  connect (lease) {
    const { config } = this.listener
    const backend = lease.backend
    this.attempts++
    this.lease = lease
    this.startedAt = performance.now()
    if (config.proxyProtocol && this.proxyHeader === null) this.proxyHeader = formatProxyHeader(config.proxyProtocol, originOf(this.client))
    const socket = dial(backend, this.listener.backendTls, { allowHalfOpen: true, preface: this.proxyHeader })
    this.upstream = socket
    // Until connected, the socket timeout is the connect timeout.
    socket.setTimeout(config.connectTimeout)
    socket.on('timeout', () => this.onUpstreamTimeout(socket))
    socket.on('error', err => this.onUpstreamError(socket, err))
    socket.on('close', () => this.onUpstreamClose(socket))
    socket.once(readyEvent(socket), () => this.onConnect(socket))
  }

  onConnect (socket) {
    const { client } = this
    const idle = this.listener.config.idleTimeout
    this.piping = true
    this.connectedAt = performance.now()
    // The verdict on this backend comes with its first byte (or a clean close); a
    // reset before that is a failure (see onUpstreamError).
    socket.once('data', () => this.onAnswer(true))
    socket.once('end', () => this.onAnswer(false))
    if (this.early.length > 0) this.sentAt = this.connectedAt
    else client.once('data', () => { if (this.sentAt === 0) this.sentAt = performance.now() })
    socket.setTimeout(idle)
    if (idle > 0) {
      client.setTimeout(idle)
      client.on('timeout', () => this.destroy())
    }
    client.off('data', this.onEarlyData)
    for (const chunk of this.early) socket.write(chunk)
    this.early = null
    // pipe() honours back-pressure both ways and, with allowHalfOpen, passes a FIN
    // from one side on to the other while the reverse direction keeps flowing. A FIN
    // that came while connecting is passed on here.
    if (this.clientEnded) socket.end()
    else client.pipe(socket)
    socket.pipe(client)
  }

  // The backend answered: its first byte (with a latency sample: the connect time plus
  // the wait for that byte after the client's first byte was passed on, so a client's
  // think time does not count), or a clean close without a byte.
  onAnswer (gotData) {
    if (this.answered) return
    this.answered = true
    this.lease.succeeded()
    if (!gotData) return
    const now = performance.now()
    const connect = this.connectedAt - this.startedAt
    this.lease.backend.observeLatency(connect + now - Math.max(this.connectedAt, this.sentAt))
  }

  // A connect that fails is retried on another backend; the client never notices. The
  // failed lease is released after the retry took its slot, so that a waiter in the
  // queue does not take the retry's turn.
  connectFailed (socket, reason) {
    const { log } = this.listener
    const failed = this.lease
    log.debug(`connect to ${failed.backend.address} failed: ${reason}`)
    failed.failed(reason)
    this.lease = null
    this.upstream = null
    socket.destroy()
    ;(this.tried ||= new Set()).add(failed.backend)
    if (!this.clientClosed) this.connectNext()
    failed.release()
    if (this.clientClosed) this.finish()
  }

  onUpstreamTimeout (socket) {
    if (socket !== this.upstream) return
    if (!this.piping) return this.connectFailed(socket, 'connect timed out')
    this.destroy() // idle
  }

  onUpstreamError (socket, err) {
    if (socket !== this.upstream) return
    if (!this.piping) return this.connectFailed(socket, reasonOf(err))
    this.listener.log.debug(`${this.lease.backend.address} connection error: ${reasonOf(err)}`)
    // A backend that resets a connection before answering anything failed it.
    if (!this.answered) {
      this.answered = true
      this.lease.failed(reasonOf(err))
    }
    // Pass a reset on as a reset, so the client sees what the backend did.
    if (err.code === 'ECONNRESET') resetOrDestroy(this.client)
    else this.client.destroy()
  }

  onUpstreamClose (socket) {
    if (socket !== this.upstream) return
    // Closed without a FIN (destroyed, reset): nothing more can flow, end the client.
    // After a FIN, pipe() ends the client once what is buffered has been written.
    if (!socket.readableEnded && !this.client.destroyed) this.client.destroy()
    this.maybeFinish()
  }

  onClientError (err) {
    this.listener.log.debug(`client ${this.clientAddress} error: ${reasonOf(err)}`)
    if (this.upstream === null) return
    if (err.code === 'ECONNRESET' && this.piping) resetOrDestroy(this.upstream)
    else this.upstream.destroy()
  }

  onClientClose () {
    this.clientClosed = true
    if (this.waiter !== null) {
      this.waiter.cancel()
      this.waiter = null
    }
    const { upstream } = this
    if (upstream !== null && !upstream.destroyed && (!this.piping || !this.client.readableEnded)) upstream.destroy()
    this.maybeFinish()
  }

  maybeFinish () {
    if (this.clientClosed && (this.upstream === null || this.upstream.destroyed)) this.finish()
  }

  // Exactly once per client connection, whatever ended it.
  finish () {
    if (this.finished) return
    this.finished = true
    const { client, lease, listener } = this
    if (lease !== null) lease.release(client.bytesRead, client.bytesWritten)
    listener.sessionDone(this)
    if (listener.log.enabled('debug')) {
      const backend = this.piping ? lease.backend.address : 'no backend'
      listener.log.debug(`${this.clientAddress} -> ${backend}: closed, ${client.bytesRead} bytes in, ${client.bytesWritten} out`)
    }
  }

  destroy () {
    this.client.destroy()
    if (this.upstream !== null) this.upstream.destroy()
  }

  // A TCP connection has no "between requests": a graceful close waits for it.
  closeIfIdle () {}
}

module.exports = { TcpSession }
