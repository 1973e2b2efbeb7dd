'use strict'

const { HttpSession } = require('../http1/session')
const { Exchange } = require('./exchange')
const { Http1Leg } = require('../http1/leg')
const { Pool } = require('../http1/connection-pool')
const { rewriteSettings, viaLoops } = require('../message/rewrite')
const { ResponseStats } = require('./response-stats')
const { Stickiness } = require('./sticky')
const { compileHeaderRules } = require('./header-rules')

// The HTTP/2 codec (http2/session.js and lila's wire/h2/), loaded with the first HTTP/2
// client: a listener only HTTP/1.1 clients reach never compiles it (start-up).
let Http2Session = null
const http2Session = () => Http2Session || (Http2Session = require('../http2/session').Http2Session)

// Pooled backend connections idle past their limit are closed by the sweep: this often.
const POOL_EXPIRY_MS = 1000

// HTTP as a Listener's protocol (listener.js): HTTP/1.1 and HTTP/2 on one port, to
// HTTP/1.1 or HTTP/2 backends. The codec is chosen before any runs (newSession): a
// TLS connection that agreed on h2 by ALPN (offered first) is an Http2Session
// (http2/session.js, on lila's own codec) from the start, any other an HttpSession
// (http1/session.js), which hands a client whose first bytes are the HTTP/2 preface
// (prior knowledge, in the clear) to an Http2Session (startHttp2). Each session gets
// its exchanges from here (newExchange), so that no codec requires the exchange.
// What their exchanges (exchange.js) share lives here: the backend pools (a keep-alive connection
// pool per backend, http1/connection-pool.js; with --backend-protocol h2, HTTP/2
// sessions, http2/pool.js), the leg that carries a request to them (`Leg`), the
// settings of the heads they rewrite (`rewrite`), `via`, this lila's Via token, to
// detect loops, --sticky, and what clients were answered (`stats`).
// `grpc` (--protocol grpc): the same, its backends HTTP/2 (the config says so) and its
// own answers gRPC-shaped for every request (see message/grpc.js callType).
// One per listener: createHttpProtocol({ via, grpc }).
class HttpProtocol {
  constructor ({ via, grpc = false }) {
    this.name = grpc ? 'grpc' : 'http'
    this.grpc = grpc // answers gRPC-shaped for every request
    this.backendProtocol = 'h1' // --backend-protocol
    this.Leg = Http1Leg // an exchange's request on a backend: http1/leg.js, or http2/leg.js for h2
    this.alpn = ['h2', 'http/1.1'] // over TLS, HTTP/2 first
    this.limitsRequests = true // --rate-limit counts requests (exchange.js), not connections
    this.via = via
    // message/rewrite.js rewriteSettings: { proto, via, forwarded, copy, viaHops } and
    // the header options compiled (header-rules.js: idHeader, host, request, response)
    this.rewrite = null
    this.pools = new Map() // Backend -> Pool
    this.http2Pools = new Map() // Backend -> http2/pool.js Http2Pool, with --backend-protocol h2
    this.connectTimeout = 0
    this.backendTls = null
    this.stats = new ResponseStats() // what clients were answered; exchanges count()
    this.sticky = new Stickiness() // --sticky: the cookie every kind of request reads and sets
  }

  // The session for a client connection: its codec, chosen by what TLS agreed on.
  newSession (listener, client) {
    return client.alpnProtocol === 'h2' ? new (http2Session())(listener, client) : new HttpSession(listener, client)
  }

  // A request a session (`client`) read: its Exchange (exchange.js); `stream`: its
  // HTTP/2 stream, or null; `spare`: the session's last exchange, over and reusable, or null.
  newExchange (client, head, headBytes, stream = null, spare = null) {
    return spare === null ? new Exchange(client, head, headBytes, stream) : spare.begin(client, head, headBytes, stream)
  }

  // The listener's settings, at its start and on every reload.
  reconfigure (config, listener) {
    const proto = listener.tls === null ? 'http' : 'https'
    const rules = compileHeaderRules(config)
    const copy = config.forwardAuthCopy
    this.rewrite = rewriteSettings({ proto, via: this.via, forwarded: config.forwarded, rules, copy })
    this.connectTimeout = config.connectTimeout
    this.backendTls = listener.backendTls
    this.sticky.configure(config.sticky, listener.tls !== null)
    this.backendProtocol = config.backendProtocol || 'h1'
    this.Leg = this.backendProtocol === 'h2' ? require('../http2/leg').Http2Leg : Http1Leg
    this.sweepMs = listener.sweepEvery
    for (const pool of this.pools.values()) pool.configure(this.connectTimeout, this.backendTls)
    for (const pool of this.http2Pools.values()) pool.configure(this.connectTimeout, this.backendTls)
  }

  // May a request go on to a backend? null, or why not as [status, detail, options] for
  // its exchange's answer(): first a loop through this lila (508, `looped`); then the
  // rules at the edge (exchange.js); then its client over --rate-limit (429) and no
  // route for it (404), `refusal`. One order for every kind of request.
  looped (exchange) {
    if (!viaLoops(exchange.head, this.via)) return null
    return [508, `request already passed through this lila (Via: ${this.via})`]
  }

  // With --fleet a Promise of either, when the fleet decides --rate-limit.
  refusal (exchange) {
    const limited = exchange.listener.rateLimited(exchange.clientAddress)
    if (limited !== null && typeof limited.then === 'function') return limited.then(later => refusalOf(exchange, later))
    return refusalOf(exchange, limited)
  }

  // The timeouts (ms) sweep() keeps: --timeout, --body-timeout, and pooled idle expiry.
  timeouts (config) {
    return [config.timeout, config.bodyTimeout, POOL_EXPIRY_MS]
  }

  // With every sweep of the listener: backends silent for --timeout and request bodies
  // quiet for --body-timeout (counted in sweeps by each exchange), pooled connections
  // idle past their limit, and the pools of backends gone for good.
  sweep (listener) {
    const { timeout, bodyTimeout } = listener.config
    const silentLimit = timeout > 0 ? listener.ticksFor(timeout) : Infinity
    const bodyLimit = bodyTimeout > 0 ? listener.ticksFor(bodyTimeout) : Infinity
    for (const session of listener.sessions) session.onSweep(silentLimit, bodyLimit)
    const now = Date.now()
    for (const [backend, pool] of this.pools) {
      if (isForgotten(backend)) {
        pool.close()
        this.pools.delete(backend)
        this.stats.forget(backend)
      } else {
        pool.expire(now)
      }
    }
    for (const [backend, pool] of this.http2Pools) {
      if (isForgotten(backend)) {
        pool.close()
        this.http2Pools.delete(backend)
      } else {
        pool.expire(now)
      }
    }
  }

  // Every session is gone: idle backend connections must not outlive the listener.
  drained () {
    for (const pool of this.pools.values()) pool.close()
    for (const pool of this.http2Pools.values()) pool.close()
  }

  // What the listener's snapshot adds: responses by class, request durations, --sticky
  // and what it did.
  snapshot () {
    return { ...this.stats.snapshot(), ...this.sticky.snapshot() }
  }

  // A backend as status pages and metrics show it, with its keep-alive pool:
  // { sockets, idle, connects, reuses }, or null when it has none, and its responses.
  // With --backend-protocol h2, its HTTP/2 sessions' ({ sockets: sessions, idle,
  // connects, reuses, streams }).
  snapshotBackend (backend) {
    const pool = this.backendProtocol === 'h2' ? this.http2Pools.get(backend) : this.pools.get(backend)
    return {
      ...backend.snapshot(),
      pool: pool === undefined ? null : pool.snapshot(),
      responses: this.stats.snapshotOf(backend)
    }
  }

  // `from`, an HTTP/1.1 session, found that its client speaks HTTP/2: an Http2Session
  // takes its place in the listener, and the connection from here on, with the bytes
  // already read (`buf`, or null) first.
  startHttp2 (listener, from, socket, buf) {
    const session = new (http2Session())(listener, socket)
    listener.handOver(from, session)
    session.start(buf)
  }

  // The HTTP/2 sessions to `backend`, for a leg (http2/leg.js).
  http2PoolFor (backend) {
    let pool = this.http2Pools.get(backend)
    if (pool === undefined) {
      const { Http2Pool } = require('../http2/pool')
      const settings = { connectTimeout: this.connectTimeout, tls: this.backendTls, sweepMs: this.sweepMs }
      pool = new Http2Pool(backend, settings)
      this.http2Pools.set(backend, pool)
    }
    return pool
  }

  // The pool of connections to `backend`, for an exchange.
  poolFor (backend) {
    let pool = this.pools.get(backend)
    if (pool === undefined) {
      pool = new Pool(backend, { connectTimeout: this.connectTimeout, tls: this.backendTls })
      this.pools.set(backend, pool)
    }
    return pool
  }
}

function createHttpProtocol ({ via, grpc = false }) {
  return new HttpProtocol({ via, grpc })
}

// Over --rate-limit (429: `limited`, the listener's verdict), else no route (404).
function refusalOf ({ listener, route, head }, limited) {
  if (limited !== null) return [429, limited.detail, limited]
  if (route === null) return [404, listener.unrouted(head)]
  return null
}

// A backend taken away (by DNS, a reload, removeBackend) whose last request is over: the
// upstream has forgotten it, and an address that comes back is a new Backend. With no
// lease left, its pool holds only idle connections no one will ask for.
function isForgotten (backend) {
  return backend.retired && backend.live === 0
}

module.exports = { createHttpProtocol }
