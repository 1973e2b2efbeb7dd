'use strict'

const net = require('net')
const { listen } = require('./bind')
const { throttled } = require('../log')
const { formatAddress } = require('../address')
const { defaultName } = require('../config/names')
const { startPrelude } = require('./prelude')

// Accepted connections above --max-conn wait (paused, unread) for a free slot; past
// this many waiting, a new one is closed at once rather than held without bound.
const MAX_WAITING = 1024

// What every listener does, whatever its protocol: bind, accept, hold clients above
// --max-conn, track sessions, and drain them on close. The protocol comes in as an
// object made for this listener (tcp.js createTcpProtocol, http2/protocol.js
// createHttpProtocol: HTTP/1.1 and HTTP/2), of which the listener uses only this:
//   name                         'tcp', 'http': what snapshots and log lines say
//   Session                      serves one client connection (below)
//   alpn                         what TLS offers clients to speak (undefined: nothing)
//   reconfigure(config, listener)  settings derived from the config: at the start and
//                                on every reload (after the listener took the new ones)
//   timeouts(config)             the ms the protocol's own timeouts need sweeps for
//   sweep(listener)              those timeouts, run with every sweep (see startSweep)
//   drained()                    clean-up once every session is gone after close()
//   snapshot()                   what the listener's snapshot adds, or null
//   snapshotBackend(backend)     a backend as stats() shows it (index.js)
// A Session: `new Session(listener, client)`, then `start()`, serves one client
// connection and calls `listener.sessionDone(session)` exactly once when it is over. It
// has `destroy()`, `closeIfIdle()` (for a graceful close: end it now if it is between
// requests), and `onIdleSweep(idleLimit)`: one sweep passed; a session that saw no byte
// move for `idleLimit` sweeps (--idle-timeout) closes itself (see startSweep). With
// --accept-proxy or TLS termination a connection first goes through its prelude
// (prelude.js: the PROXY header, the TLS handshake); the session then reads the
// TLSSocket, and the client's address is the one the header gave. A session may hand
// its connection on to a session of another kind (handOver): an HTTP/1.1 session whose
// client speaks HTTP/2.
class Listener {
  constructor ({
    config, upstream, log, protocol, serverOptions = {}, tls = null, backendTls = null, accessLog = null
  }) {
    this.config = config
    this.tls = tls // { context, SNICallback } (tls.js) while terminating TLS
    this.backendTls = backendTls // tls.connect options for backends, or null
    this.prelude = new Set() // connections in their prelude: closed with the listener
    this.upstream = upstream
    this.log = log
    this.protocol = protocol
    this.sessions = new Set()
    this.waiting = new Set() // held clients, oldest first (a Set keeps insertion order)
    this.bound = null // "host:port" once listening
    this.accessLog = accessLog // access-log.js writer, or null: off (then it costs nothing)
    this.accepted = 0
    this.unserved = 0 // clients no backend could take (countUnserved)
    this.closing = false
    this.serving = false // until open(): bound, but clients wait (backends not checked yet)
    this.drained = null
    // lila short of descriptors or memory for backend connections: said once a second.
    this.sayShortage = throttled(message => this.log.error(message))
    this.sweep = null
    this.sweepEvery = 1000
    // pauseOnConnect: a client waiting for a --max-conn slot stays unread in the kernel.
    this.server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true, ...serverOptions })
    this.server.on('connection', client => this.arrive(client))
    protocol.reconfigure(config, this)
  }

  arrive (client) {
    if (!this.config.acceptProxy && this.tls === null) return this.accept(client)
    if (this.closing || this.prelude.size >= MAX_WAITING) return client.destroy()
    const prelude = startPrelude(client, {
      acceptProxy: this.config.acceptProxy,
      tls: this.tls,
      ALPNProtocols: this.protocol.alpn,
      timeout: this.config.headerTimeout,
      log: this.log
    }, socket => {
      this.prelude.delete(prelude)
      this.accept(socket)
    })
    this.prelude.add(prelude)
    client.once('close', () => this.prelude.delete(prelude))
  }

  // A reload: new settings for new connections (and, where they read them as they go,
  // for open ones); new TLS material for new handshakes.
  reconfigure (config, { tls = null, backendTls = null } = {}) {
    this.config = config
    this.tls = tls
    this.backendTls = backendTls
    this.protocol.reconfigure(config, this)
    if (this.sweep !== null) this.startSweep() // timeouts may have changed
    this.serveWaiting() // --max-conn may have grown
  }

  async listen () {
    this.bound = await listen(this.server, this.config, this.log)
    return this.bound
  }

  // What status pages, metrics labels, the access log and control requests call this
  // listener: the name it was given, else the address it is bound to ("127.0.0.1:4444").
  // (Reloads match listeners by config.name, which defaults to protocol:port.)
  get name () {
    const { name, protocol, port, host } = this.config
    if (name && name !== defaultName(protocol, port)) return name
    return this.bound || formatAddress(host || '0.0.0.0', port)
  }

  // Start serving: the backends' first checks are done. Clients that came since the
  // bind waited, unread, and are served now.
  open () {
    this.serving = true
    this.startSweep()
    this.serveWaiting()
  }

  // Timeouts by sweeping rather than per-socket timers: a timer per socket is re-armed
  // on every read and write, a sweep costs a counter store per chunk. Each sweep tells
  // every session (onIdleSweep), which counts its own idle sweeps. The protocol's
  // sweep() keeps its own timeouts (HTTP: backends silent for --timeout, idle pooled connections). Sweeps
  // come every eighth of the shortest timeout (10 ms to 1 s): a timeout fires between
  // its time and one sweep later.
  startSweep () {
    clearInterval(this.sweep)
    this.sweep = null
    const { protocol } = this
    const timeouts = [this.config.idleTimeout, ...protocol.timeouts(this.config)].filter(ms => ms > 0)
    if (timeouts.length === 0) return
    this.sweepEvery = Math.min(1000, Math.max(10, Math.floor(Math.min(...timeouts, 8000) / 8)))
    const idle = this.config.idleTimeout
    const idleLimit = idle > 0 ? this.ticksFor(idle) : Infinity
    this.sweep = setInterval(() => {
      for (const session of this.sessions) {
        session.onIdleSweep(idleLimit)
      }
      protocol.sweep(this)
    }, this.sweepEvery)
    this.sweep.unref()
  }

  // A client (tcp) or request (http) that no backend could take.
  countUnserved () {
    this.unserved++
  }

  // How many sweeps make `ms`: never fewer than it takes.
  ticksFor (ms) {
    return Math.ceil(ms / this.sweepEvery) + 1
  }

  get hasRoom () {
    const { maxConn } = this.config
    return maxConn === null || this.sessions.size < maxConn
  }

  accept (client) {
    this.accepted++
    if (this.closing) return client.destroy()
    if (!this.serving || !this.hasRoom) return this.hold(client)
    this.serve(client)
  }

  serve (client) {
    const session = new this.protocol.Session(this, client)
    this.sessions.add(session)
    session.start()
  }

  hold (client) {
    if (this.waiting.size >= MAX_WAITING) {
      this.log.debug(`client closed: ${this.waiting.size} connections already wait for a slot`)
      return client.destroy()
    }
    this.waiting.add(client)
    client.on('error', () => {})
    // A client that leaves while held; once served, a no-op.
    client.once('close', () => this.waiting.delete(client))
  }

  // A session handed its connection to another (HTTP/1.1 to HTTP/2, see
  // http1/session.js): `next` is the one that calls sessionDone.
  handOver (session, next) {
    this.sessions.delete(session)
    this.sessions.add(next)
  }

  sessionDone (session) {
    this.sessions.delete(session)
    this.serveWaiting()
    if (this.drained !== null && this.sessions.size === 0) {
      const drained = this.drained
      this.drained = null
      drained()
    }
  }

  serveWaiting () {
    while (this.waiting.size > 0 && this.serving && !this.closing && this.hasRoom) {
      const client = this.waiting.values().next().value
      this.waiting.delete(client)
      if (!client.destroyed) this.serve(client)
    }
  }

  // Stop accepting at once; let open sessions finish for up to `timeout` ms, then cut
  // what is left. Resolves when every session is gone.
  close (timeout) {
    this.closing = true
    this.server.close()
    const held = [...this.waiting]
    this.waiting.clear()
    for (const client of held) client.destroy()
    for (const prelude of [...this.prelude]) prelude.destroy()
    for (const session of this.sessions) session.closeIfIdle()
    // The sweep goes on while sessions drain: their timeouts still apply.
    const done = () => {
      clearInterval(this.sweep)
      this.sweep = null
      this.protocol.drained()
    }
    if (this.sessions.size === 0) {
      done()
      return Promise.resolve()
    }
    return new Promise(resolve => {
      const timer = setTimeout(() => this.destroy(), timeout)
      this.drained = () => {
        clearTimeout(timer)
        done()
        resolve()
      }
    })
  }

  destroy () {
    for (const prelude of [...this.prelude]) prelude.destroy()
    for (const session of this.sessions) session.destroy()
  }

  snapshot () {
    return {
      name: this.name,
      protocol: this.protocol.name,
      tls: this.tls !== null,
      mode: this.upstream.mode,
      address: this.server.address(),
      active: this.sessions.size,
      waiting: this.waiting.size, // over --max-conn, unread in the kernel
      accepted: this.accepted,
      unserved: this.unserved, // no backend could take them (or none in time)
      ...this.upstream.stats(), // panic, queued (waiting for a backend slot), queueTimeouts
      ...this.protocol.snapshot() // http: responses by class, requestTime
    }
  }
}

module.exports = { Listener }
