'use strict'

const { performance } = require('perf_hooks')
const { reasonOf, isLocalShortage } = require('../errors')
const { clientAddress, originOf } = require('./origin')
const { dial, resetOrDestroy, backendReason, connectTimedOut } = require('../upstream/dial')
const { formatProxyHeader } = require('../wire/proxy-protocol')
const { Attempt } = require('../upstream/attempt')
const { handlers, addListeners } = require('./socket-events')
const { readsInto, copied, SHARED, BULK } = require('./read-buffers')
const { BackendReads } = require('./tcp-reads')
const { TcpReplay } = require('./tcp-replay')

const SESSION = Symbol('lila.tcpSession') // the TcpSession a client or backend socket serves

// Socket event handlers shared by every session (socket-events.js): `this` is the
// socket and its session hangs off it.
const CLIENT = handlers({
  data (chunk) { this[SESSION].fromClient(chunk) },
  end () { this[SESSION].onClientEnd() },
  drain () { this[SESSION].onClientDrain() },
  error (err) { this[SESSION].onClientError(err) },
  close () { this[SESSION].onClientClose() }
})
// A plain backend socket reads through READ (below), not 'data'.
const BACKEND = handlers({
  connect () { this[SESSION].onConnect(this) },
  error (err) { this[SESSION].onUpstreamError(this, err) },
  close () { this[SESSION].onUpstreamClose(this) },
  end () { this[SESSION].onUpstreamEnd(this) },
  drain () { this[SESSION].onUpstreamDrain() }
})
// --backend-tls: ready once the handshake is done; bytes come as 'data'.
const BACKEND_TLS = handlers({
  secureConnect () { this[SESSION].onConnect(this) },
  error (err) { this[SESSION].onUpstreamError(this, err) },
  close () { this[SESSION].onUpstreamClose(this) },
  data (chunk) { this[SESSION].fromUpstream(this, chunk) },
  end () { this[SESSION].onUpstreamEnd(this) },
  drain () { this[SESSION].onUpstreamDrain() }
})

// Plain backend sockets read into read-buffers.js's buffers: each read handed straight
// to the session. A socket's own buffer (the session's BackendReads, tcp-reads.js) is
// read into again once its bytes are out: the write to the client completed at once; or
// it waits, the socket is paused for back-pressure (a bulk read is above the writable
// high-water mark), and the client drains before the socket resumes. A write that waits
// without that pause keeps it.
const READ = readsInto(function (nread, buffer) { this[SESSION].fromUpstreamRead(this, nread, buffer) })

// L4 balancing, one client connection and its (current) backend connection: pick a
// backend, connect (trying others when that fails), then pass bytes both ways until
// both sides are done. Served by a Listener (listener.js).
//
// Bytes move through one 'data' handler per direction rather than pipe(): the same
// back-pressure (pause the reader when the writer is full, resume on 'drain') and FIN
// passing (allowHalfOpen), without pipe's per-chunk bookkeeping. Idle connections are
// found by the listener's sweep (`idleTicks`), which costs one store per chunk where a
// socket timeout would re-arm a timer per read and per write.
class TcpSession {
  #clientAddress = null

  constructor (listener, client) {
    this.listener = listener
    this.client = client
    this.upstream = null // the backend socket, once an attempt starts
    this.proxyHeader = null // --proxy-protocol: written first on every attempt
    this.attempt = new Attempt(listener.upstream, this, this)
    this.piping = false
    this.answered = false // the backend sent something (or closed cleanly)
    this.startedAt = 0 // for the latency sample: the connect began, it completed, the
    this.connectedAt = 0 // client's first byte reached the backend
    this.sentAt = 0
    this.clientClosed = false
    this.clientEnded = false
    this.finished = false
    this.idleTicks = 0 // listener sweeps since the last byte either way
    this.connectTicks = 0 // listener sweeps since the current connect began
    // for the access log and --otlp's span only
    this.openedAt = listener.accessLog === null && listener.tracer === null ? 0 : performance.now()
    // The client is read while connecting, so that it leaving is noticed at once; what
    // it sends waits in `replay` until a backend is connected (tcp-replay.js).
    this.replay = new TcpReplay()
    this.upstreamReads = new BackendReads() // the backend socket's own buffer (READ)
    client[SESSION] = this
    addListeners(client, CLIENT)
    // The client's address is asked of the kernel when something needs it (ip-hash,
    // per-client limits, a log line); now if the access log or debug lines will want it
    // once the socket is closed.
    const wanted = listener.accessLog !== null || listener.tracer !== null || listener.log.enabled('debug')
    if (wanted) this.#clientAddress = clientAddress(client)
  }

  get clientAddress () {
    if (this.#clientAddress === null) this.#clientAddress = clientAddress(this.client)
    return this.#clientAddress
  }

  fromClient (chunk) {
    this.idleTicks = 0
    if (!this.piping) {
      if (this.replay.hold(chunk)) this.client.pause()
      return
    }
    if (this.sentAt === 0) this.sentAt = performance.now()
    if (this.replay.kept !== null) this.replay.keep(chunk)
    if (!this.upstream.write(chunk)) this.client.pause()
  }

  fromUpstream (socket, chunk) {
    if (socket !== this.upstream) return
    this.idleTicks = 0
    if (!this.answered) this.onAnswer(true)
    if (!this.client.write(chunk)) socket.pause()
  }

  // `nread` bytes from a plain backend socket, in the shared buffer or in its own (see
  // READ): passed on, then the buffer it reads into next chosen (tcp-reads.js).
  fromUpstreamRead (socket, nread, buffer) {
    if (socket !== this.upstream) return
    if (buffer === SHARED) {
      this.fromUpstream(socket, copied(nread))
      return this.upstreamReads.next(nread, buffer, true)
    }
    this.fromUpstream(socket, buffer.subarray(0, nread))
    // Free: written at once, or a bulk read that paused the socket, read into only
    // after the client drained.
    const free = this.client.writableLength === 0 || (nread >= BULK && socket.isPaused())
    this.upstreamReads.after(nread, buffer, free)
  }

  // A FIN from the client: passed on once a backend is connected (half-close).
  onClientEnd () {
    this.clientEnded = true
    if (this.piping) setImmediate(passEnd, this.upstream)
  }

  onUpstreamDrain () {
    this.client.resume()
  }

  onClientDrain () {
    if (this.piping) this.upstream.resume()
  }

  onUpstreamEnd (socket) {
    if (socket !== this.upstream) return
    if (!this.answered) this.onAnswer(false)
    setImmediate(passEnd, this.client)
  }

  // The listener's sweep: no byte either way for --idle-timeout closes a connection
  // that is piping, and for a sweep lets its backend's own read buffer go (memory per
  // idle connection); a connect that lasts --connect-timeout fails (a sweep rather than
  // a timer per connection: see sweep.js).
  onIdleSweep (idleLimit) {
    if (this.piping) {
      if (this.idleTicks > 0) this.upstreamReads.quiet(this.upstream, this.client.writableLength === 0)
      if (++this.idleTicks >= idleLimit) this.destroy()
    } else if (this.upstream !== null) {
      const { listener } = this
      if (++this.connectTicks === listener.ticksFor(listener.config.connectTimeout)) {
        const upstream = this.upstream
        const stillConnecting = () => this.upstream === upstream && !this.piping
        connectTimedOut(stillConnecting, () => this.connectFailed(upstream, 'connect timed out'))
      }
    }
  }

  start () {
    this.client.resume()
    this.attempt.start()
  }

  // A per-client limit turns the client away (listener.js admit): closed at once.
  turnAway () {
    this.client.destroy()
  }

  // No backend could take the client (attempt.js): close it.
  unserved (queueReason) {
    const { listener } = this
    const message = queueReason === null
      ? `no backend could take a connection from ${this.clientAddress} (${this.attempt.attempts} tried)`
      : `a connection from ${this.clientAddress} left the queue: ${queueReason}`
    listener.countUnserved()
    if (listener.closing) listener.log.debug(message)
    else listener.log.warn(message)
    this.client.destroy()
  }

  // A fault injected on the backend seated (attempt.js): the client reset; or, for an
  // error, the connection failed as one the backend closed at once: tried on another
  // backend, else closed.
  injected ({ reset = false }) {
    if (reset) return resetOrDestroy(this.client)
    const reason = 'closed the connection at once (an injected fault)'
    const retried = this.attempt.failed(reason, { cause: 'closed', replayable: !this.clientClosed })
    if (this.clientClosed) this.finish()
    else if (!retried) this.unserved(null)
  }

  // A slot on a backend (attempt.js): connect to it.
  seated (lease) {
    const { config } = this.listener
    const backend = lease.backend
    this.startedAt = performance.now()
    if (config.proxyProtocol && this.proxyHeader === null) {
      this.proxyHeader = formatProxyHeader(config.proxyProtocol, originOf(this.client))
    }
    const socket = dial(backend, this.listener.backendTls, {
      allowHalfOpen: true, preface: this.proxyHeader, onread: READ
    })
    this.upstream = socket
    this.connectTicks = 0
    socket[SESSION] = this
    addListeners(socket, socket.encrypted ? BACKEND_TLS : BACKEND)
  }

  onConnect (socket) {
    if (socket !== this.upstream) return
    this.piping = true
    this.idleTicks = 0
    this.connectedAt = performance.now()
    // The verdict on this backend comes with its first byte (or a clean close); a
    // reset before that is a failure (see onUpstreamError).
    if (this.replay.flushTo(socket, this.attempt.resendsAfter('reset'))) this.sentAt = this.connectedAt
    if (this.clientEnded) socket.end() // a FIN that came while connecting
    else if (this.client.isPaused()) this.client.resume()
  }

  // The backend answered: its first byte (with a latency sample: the connect time plus
  // the wait for that byte after the client's first byte was passed on, so a client's
  // think time does not count), or a clean close without a byte.
  onAnswer (gotData) {
    if (this.answered) return
    this.answered = true
    this.replay.answered()
    if (!gotData) return this.attempt.succeeded()
    const now = performance.now()
    const connect = this.connectedAt - this.startedAt
    this.attempt.succeeded(connect + now - Math.max(this.connectedAt, this.sentAt))
  }

  // A connect that fails is retried on another backend (attempt.js); the client never
  // notices, unless no backend is left.
  connectFailed (socket, reason, cause = 'connect') {
    this.listener.log.debug(`connect to ${this.attempt.backend.address} failed: ${reason}`)
    this.upstream = null
    socket.destroy()
    const retried = this.attempt.failed(reason, { cause, replayable: !this.clientClosed })
    if (this.clientClosed) this.finish()
    else if (!retried) this.unserved(null)
  }

  // The backend reset after the client's bytes reached it, before a byte came back: they
  // go again to another backend (the verdict on this one waits for it), else the
  // client is reset as the backend did.
  resend (socket, reason) {
    this.listener.log.debug(`${this.attempt.backend.address} reset before answering: ${reason}`)
    this.piping = false
    this.upstream = null
    this.replay.rewind(this.attempt.backend.address)
    socket.destroy()
    const how = { cause: 'reset', sent: true, replayable: !this.clientClosed }
    const retried = this.attempt.failed(`${reason} before answering`, how)
    if (this.clientClosed) this.finish()
    else if (!retried) resetOrDestroy(this.client)
  }

  // lila itself could not open a backend connection (out of descriptors): nobody is
  // blamed, and no other backend would do better. The client is closed.
  shortOf (socket, err) {
    const { listener } = this
    this.upstream = null
    socket.destroy()
    this.attempt.shortage()
    listener.countUnserved()
    listener.short(err, 'cannot open a backend connection')
    this.client.destroy()
    if (this.clientClosed) this.finish()
  }

  onUpstreamError (socket, err) {
    if (socket !== this.upstream) return
    if (!this.piping && isLocalShortage(err)) return this.shortOf(socket, err)
    const reason = backendReason(err, this.listener.backendTls)
    if (!this.piping) return this.connectFailed(socket, reason)
    // A reset before a byte went either way is a connect that failed late (the
    // backend's listen socket closed with this connection still in its backlog): it
    // saw nothing, so another backend can take the client. Once the client's bytes
    // went out, replaying them is not safe.
    if (!this.answered && this.sentAt === 0 && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
      this.piping = false
      return this.connectFailed(socket, `${reason} before any data`, 'reset')
    }
    // --retry-on reset: the user said the bytes may go twice; those kept go to another
    // backend, as HTTP's requests do (attempt.js resendsAfter).
    const reset = err.code === 'ECONNRESET' || err.code === 'EPIPE'
    if (this.replay.kept !== null && reset) return this.resend(socket, reason)
    this.listener.log.debug(`${this.attempt.backend.address} connection error: ${reason}`)
    // A backend that resets a connection before answering anything failed it.
    if (!this.answered) {
      this.answered = true
      this.attempt.blame(reason, 'reset')
    }
    // Pass a reset on as a reset, so the client sees what the backend did.
    if (err.code === 'ECONNRESET') resetOrDestroy(this.client)
    else this.client.destroy()
  }

  onUpstreamClose (socket) {
    if (socket !== this.upstream) return
    this.upstreamReads.letGo(false) // a write to the client may still hold it
    // Closed without a FIN (destroyed, reset): nothing more can flow, end the client.
    // After a FIN, onUpstreamEnd ended the client once what is buffered is written.
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
    this.attempt.cancel()
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
    const { client, attempt, listener } = this
    attempt.release(client.bytesRead, client.bytesWritten)
    listener.sessionDone(this)
    if (listener.accessLog !== null) listener.accessLog.log(this.record())
    if (listener.tracer !== null) require('./tcp-trace').traceConnection(listener.tracer, this) // tracing only
    if (listener.log.enabled('debug')) {
      const backend = this.piping ? attempt.backend.address : 'no backend'
      const bytes = `${client.bytesRead} bytes in, ${client.bytesWritten} out`
      listener.log.debug(`${this.clientAddress} -> ${backend}: closed, ${bytes}`)
    }
  }

  // The backend it is on, else the last that reset its bytes (the access log, the span).
  get backendAddress () {
    return this.attempt.backend === null ? this.replay.resetBy : this.attempt.backend.address
  }

  // What the access log (access-log.js) prints of this connection.
  record () {
    const { client } = this
    return {
      listener: this.listener.name,
      protocol: 'tcp',
      client: this.clientAddress,
      backend: this.backendAddress,
      bytesIn: client.bytesRead,
      bytesOut: client.bytesWritten,
      ms: performance.now() - this.openedAt
    }
  }

  destroy () {
    this.client.destroy()
    if (this.upstream !== null) this.upstream.destroy()
  }

  // A TCP connection has no "between requests": a graceful close waits for it.
  drain () {}
}

// Pass a FIN on to `socket`; one that has read its peer's FIN with nothing left to write
// is closed instead (the same FIN, without shutdown()'s round through the loop). A tick
// after the other side's 'end', so that both FINs of one batch of reads (a connection per
// request, bench W2) need no shutdown(). TLS always ends (its own close_notify).
function passEnd (socket) {
  if (socket.destroyed) return
  if (socket.readableEnded && socket.writableLength === 0 && !socket.encrypted) socket.destroy()
  else socket.end()
}

module.exports = { TcpSession, READ, SESSION } // READ, SESSION: for test/tcp-reads.test.js
