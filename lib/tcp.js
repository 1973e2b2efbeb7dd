'use strict'

const net = require('net')
const { reasonOf } = require('./errors')
const { clientAddress } = require('./listen')

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
    this.lease = null
    this.tried = null
    this.attempts = 0
    this.piping = false
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

  connectNext () {
    const { upstream, config, log } = this.listener
    const backend = this.attempts <= config.retries ? upstream.choose(this, this.tried) : null
    if (backend === null) {
      this.listener.unserved++
      log.warn(`no backend could take a connection from ${this.clientAddress} (${this.attempts} tried)`)
      this.client.destroy()
      return
    }
    this.attempts++
    this.lease = backend.acquire()
    const socket = net.connect({ host: backend.host, port: backend.port, allowHalfOpen: true, noDelay: true })
    this.upstream = socket
    // Until connected, the socket timeout is the connect timeout.
    socket.setTimeout(config.connectTimeout)
    socket.on('timeout', () => this.onUpstreamTimeout(socket))
    socket.on('error', err => this.onUpstreamError(socket, err))
    socket.on('close', () => this.onUpstreamClose(socket))
    socket.once('connect', () => this.onConnect(socket))
  }

  onConnect (socket) {
    const { client } = this
    const idle = this.listener.config.idleTimeout
    this.piping = true
    this.lease.succeeded()
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

  // A connect that fails is retried on another backend; the client never notices.
  connectFailed (socket, reason) {
    const { log } = this.listener
    const backend = this.lease.backend
    log.debug(`connect to ${backend.address} failed: ${reason}`)
    this.lease.failed(reason)
    this.lease.release()
    this.upstream = null
    socket.destroy()
    if (this.clientClosed) return this.finish()
    ;(this.tried ||= new Set()).add(backend)
    this.connectNext()
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
    // Pass a reset on as a reset, so the client sees what the backend did.
    if (err.code === 'ECONNRESET') this.client.resetAndDestroy()
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
    if (err.code === 'ECONNRESET' && this.piping) this.upstream.resetAndDestroy()
    else this.upstream.destroy()
  }

  onClientClose () {
    this.clientClosed = true
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
