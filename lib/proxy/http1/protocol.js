'use strict'

const { Listener } = require('../listener')
const { HttpSession } = require('./session')
const { Pool } = require('./connection-pool')

// An HTTP listener: the generic Listener serving HttpSessions, plus what its exchanges
// share: a keep-alive connection pool per backend and the settings of the heads it
// rewrites. `via` is this lila's Via token, used to detect loops.
function createHttpListener ({ config, upstream, log, via, tls = null, backendTls = null }) {
  const listener = new Listener({ config, upstream, log, protocol: 'http', Session: HttpSession, tls, backendTls })
  const pools = new Map()
  listener.via = via
  listener.alpn = ['http/1.1'] // over TLS, say which HTTP this is (no h2)
  listener.onReconfigure = config => {
    listener.rewrite = { proto: listener.tls === null ? 'http' : 'https', via, forwarded: config.forwarded }
    listener.sweptTimeouts = [config.timeout, 1000] // --timeout, and pooled idle expiry
    for (const pool of pools.values()) {
      pool.connectTimeout = config.connectTimeout
      pool.tls = listener.backendTls
    }
  }
  listener.onReconfigure(config)
  listener.poolFor = backend => {
    let pool = pools.get(backend)
    if (pool === undefined) {
      pool = new Pool(backend, { connectTimeout: listener.config.connectTimeout, tls: listener.backendTls })
      pools.set(backend, pool)
    }
    return pool
  }
  // Idle backend connections must not outlive the listener.
  listener.onDrained = () => { for (const pool of pools.values()) pool.close() }
  // With every sweep: backends silent for --timeout (counted in sweeps by each
  // exchange), pooled connections idle past their limit, and the pools of backends
  // gone for good.
  listener.onSweep = () => {
    const { timeout } = listener.config
    const silentLimit = timeout > 0 ? listener.ticksFor(timeout) : Infinity
    for (const session of listener.sessions) {
      const exchange = session.exchange
      if (exchange !== null && backendMayBeSilent(exchange) && ++exchange.silentTicks >= silentLimit) {
        exchange.onUpstreamTimeout(exchange.conn)
      }
    }
    const now = Date.now()
    for (const [backend, pool] of pools) {
      if (isForgotten(backend)) {
        pool.close()
        pools.delete(backend)
      } else {
        pool.expire(now)
      }
    }
  }
  listener.poolSnapshot = backend => pools.has(backend) ? pools.get(backend).snapshot() : null
  return listener
}

// A backend taken away (by DNS, a reload, removeBackend) whose last request is over: the
// upstream has forgotten it, and an address that comes back is a new Backend. With no
// lease left, its pool holds only idle connections no one will ask for.
function isForgotten (backend) {
  return backend.retired && backend.live === 0
}

// Is a silent backend this exchange's to time out? Not in a tunnel (idle both ways is
// --idle-timeout's), and not while lila holds the backend's socket paused for a client
// that does not read: that silence is the client's, left to --idle-timeout too.
function backendMayBeSilent (exchange) {
  return exchange.conn !== null && !exchange.tunnel && !exchange.conn.socket.isPaused()
}

module.exports = { createHttpListener }
