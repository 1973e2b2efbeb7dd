'use strict'

const net = require('net')
const { listen, descriptorOf } = require('../net/bind')
const { setOrigin, clientAddress, UNIX_ORIGIN } = require('./origin')
const { forget } = require('../net/socket-file')
const { throttled } = require('../log')
const { formatAddress, unixPath } = require('../address')
const { defaultName } = require('../listener-names')
const { startPrelude } = require('./prelude')
const { RateLimiter, ConnectionCounter } = require('./client-limits')
const { Router } = require('./router')
const { loadEdge, compileEdge } = require('./edge/rules')
const { EdgeStats } = require('./edge/stats')
const { reasonOf } = require('../errors')
const {
  defaultMaxConn, holdable, isOutOfDescriptors, outOfDescriptors, reportOutOfDescriptors, onOutOfDescriptors, PAUSE_MS
} = require('../descriptors')

// Accepted connections above --max-conn wait (paused, unread) for a free slot, at most
// this many (fewer when the listener's share of descriptors runs out first); past that
// the listener stops accepting for a while (see pauseAccepting).
const MAX_WAITING = 1024
const NOT_ACCEPTING = `not accepting for ${PAUSE_MS / 1000}s`
const TRYING = `trying again in ${PAUSE_MS / 1000}s`
const STILL_ACCEPTING = 'still accepting (a socket given to lila cannot be bound again)'

// What every listener does, whatever its protocol: bind, accept, hold clients above
// --max-conn, track sessions, and drain them on close. The protocol comes in as an
// object made for this listener (tcp.js createTcpProtocol, http/protocol.js
// createHttpProtocol: HTTP/1.1 and HTTP/2), of which the listener uses only this:
//   name                         'tcp', 'http': what snapshots and log lines say
//   Session                      serves one client connection (below)
//   alpn                         what TLS offers clients to speak (undefined: nothing)
//   limitsRequests               true: --rate-limit counts requests (the protocol asks
//                                rateLimited()), not connections
//   reconfigure(config, listener)  settings derived from the config: at the start and
//                                on every reload (after the listener took the new ones)
//   timeouts(config)             the ms the protocol's own timeouts need sweeps for
//   sweep(listener)              those timeouts, run with every sweep (see startSweep)
//   drained()                    clean-up once every session is gone after close()
//   snapshot()                   what the listener's snapshot adds, or null
//   snapshotBackend(backend)     a backend as stats() shows it (balancer.js)
// A Session: `new Session(listener, client)`, then `start()` (or `turnAway(refusal)`
// when a per-client limit refuses the client: close it, or answer 429), serves one client
// connection and calls `listener.sessionDone(session)` exactly once when it is over. It
// has `destroy()`, `drain(graceMs)` (a graceful close: end once what is in flight is
// done, cutting nothing a client may be sending; HTTP/1.1 between requests waits up to
// graceMs for one), and `onIdleSweep(idleLimit)`: one sweep passed; a session that saw no byte
// move for `idleLimit` sweeps (--idle-timeout) closes itself (see startSweep). With
// --accept-proxy or TLS termination a connection first goes through its prelude
// (prelude.js: the PROXY header, the TLS handshake); the session then reads the
// TLSSocket, and the client's address is the one the header gave. A session may hand
// its connection on to a session of another kind (handOver): an HTTP/1.1 session whose
// client speaks HTTP/2.
class Listener {
  // descriptors: { limit, share }: the process's limit on open files and this
  // listener's share of it (descriptors.js), null each when unknown. edge: what its
  // rules at the edge read from files (edge/rules.js loadEdge; null: read them now).
  constructor ({
    config, upstream, routes = [], log, protocol, serverOptions = {}, tls = null, backendTls = null, accessLog = null,
    descriptors = { limit: null, share: null }, edge = null, acme = null
  }) {
    this.config = config
    // A plain-HTTP listener's ACME HTTP-01 tokens (tls.js Challenges, the process's
    // board; tls/http01.js), answered before routing; null: not plain HTTP.
    this.acme = acme
    this.descriptors = descriptors
    this.tls = tls // { context, SNICallback } (tls.js) while terminating TLS
    this.backendTls = backendTls // tls.connect options for backends, or null
    this.prelude = new Set() // connections in their prelude: closed with the listener
    this.upstream = upstream // the listener's own backends: requests no route matches
    this.log = log
    // Rules at the edge (edge/rules.js): what they refused and compressed, counted
    // across reloads; the gate each connection passes as it arrives, or null; each
    // pool's Rules (`rules` of `own` and of each route: null when it has none).
    this.edgeStats = new EdgeStats(log)
    this.gate = null
    this.configureEdge(config, edge === null ? loadEdge(config) : edge)
    this.setRoutes(routes)
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
    // lila short of descriptors or memory (short, pauseAccepting): each kind of shortage
    // said once a second, so that one kind does not hide another (sayShortage).
    this.shortages = new Map() // kind -> its throttled logger
    this.sweep = null
    this.sweepEvery = 1000
    this.port = null // the port bound, to bind again after a pause; null on a Unix socket
    this.given = false // listening on a socket given to the process (systemd, an upgrade): it cannot be bound again
    this.unix = unixPath(config.host) !== null // listening on a Unix socket (a reload never changes it)
    this.paused = null // the timer that ends a pause in accepting (pauseAccepting)
    this.unsubscribe = null // from reports of running out of descriptors
    // Per-client limits (client-limits.js), from --max-conn-per-client and --rate-limit.
    this.perClient = null // ConnectionCounter, or null: no limit
    this.counted = new Map() // session -> the address it is counted under
    this.rate = null // RateLimiter, or null
    this.limited = { 'max-conn-per-client': 0, 'rate-limit': 0 } // clients or requests turned away
    // --tls-client-ca: a handshake refused for the client's certificate (the prelude's)
    this.refusedClient = (reason, detail) => this.edgeStats.refused(reason, detail)
    // pauseOnConnect: a client waiting for a --max-conn slot stays unread in the kernel.
    this.server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true, ...serverOptions })
    this.server.on('connection', client => this.arrive(client))
    this.configureLimits(config)
    protocol.reconfigure(config, this)
    this.mirror = null // --mirror (mirror.js): copies of HTTP requests to a shadow backend; null: off
    this.configureMirror(config)
  }

  // --mirror and --compare, at the start and on a reload (after the protocol's, whose
  // head rewriting a copy shares): a new address makes a new Mirror, the old one's
  // connections closed.
  configureMirror ({ mirror, compare, timeout }) {
    const settings = { compare, timeout, rewrite: this.protocol.rewrite }
    if (this.mirror !== null && mirror && this.mirror.address === mirror.address) {
      return this.mirror.configure(mirror, settings)
    }
    if (this.mirror !== null) this.mirror.close()
    this.mirror = null
    if (!mirror) return
    const { Mirror } = require('./http/mirror') // loaded only when asked for
    this.mirror = new Mirror(mirror, settings, { log: this.log })
  }

  // --max-conn-per-client and --rate-limit, at the start and on a reload. Connection
  // counts carry over; a new rate starts with full buckets.
  configureLimits ({ maxConnPerClient, rateLimit }) {
    if (maxConnPerClient === null) this.perClient = null
    else if (this.perClient === null) this.perClient = new ConnectionCounter(maxConnPerClient)
    else this.perClient.max = maxConnPerClient
    const same = this.rate !== null && rateLimit !== null &&
      this.rate.rate === rateLimit.rate && this.rate.burst === rateLimit.burst
    if (!same) this.rate = rateLimit === null ? null : new RateLimiter(rateLimit)
  }

  // A request (http, either version) over --rate-limit: null when it may go on, else
  // what to answer with 429: { detail, retryAfter } (counted).
  rateLimited (address) {
    if (this.rate === null) return null
    const wait = this.rate.take(address)
    if (wait === 0) return null
    this.limited['rate-limit']++
    return { detail: `${address} sends requests faster than --rate-limit`, retryAfter: wait }
  }

  // May this session's client be served? null, or why not: { limit, detail, retryAfter }.
  // Over --max-conn-per-client, or (tcp, whose unit is the connection) --rate-limit.
  admit (session) {
    if (this.perClient === null && this.rate === null) return null // (the address may cost a system call)
    const address = session.clientAddress
    if (this.perClient !== null) {
      if (!this.perClient.open(address)) {
        this.limited['max-conn-per-client']++
        const detail = `${address} already holds ${this.perClient.max} connections`
        return { limit: 'max-conn-per-client', detail, retryAfter: 1 }
      }
      this.counted.set(session, address)
    }
    const limited = this.protocol.limitsRequests ? null : this.rateLimited(address)
    if (limited !== null) {
      const detail = `${address} opens connections faster than --rate-limit`
      return { limit: 'rate-limit', detail, retryAfter: limited.retryAfter }
    }
    return null
  }

  arrive (client) {
    if (this.unix) setOrigin(client, UNIX_ORIGIN) // a Unix socket's client: no address
    if (!this.config.acceptProxy && this.tls === null) return this.accept(client)
    if (this.closing || this.prelude.size >= MAX_WAITING) return client.destroy()
    const prelude = startPrelude(client, {
      acceptProxy: this.config.acceptProxy,
      tls: this.tls,
      ALPNProtocols: this.protocol.alpn,
      timeout: this.config.headerTimeout,
      log: this.log,
      refused: this.refusedClient
    }, socket => {
      this.prelude.delete(prelude)
      this.accept(socket)
    })
    this.prelude.add(prelude)
    client.once('close', () => this.prelude.delete(prelude))
  }

  // A reload: new settings for new connections (and, where they read them as they go,
  // for open ones); new TLS material for new handshakes; a new share of descriptors when
  // the number of listeners changed.
  reconfigure (config, {
    tls = null, backendTls = null, descriptors = this.descriptors, routes = this.routes, edge = null, acme = null
  } = {}) {
    this.config = config
    this.acme = acme
    this.configureEdge(config, edge === null ? loadEdge(config) : edge)
    this.setRoutes(routes)
    this.configureLimits(config)
    this.descriptors = descriptors
    this.tls = tls
    this.backendTls = backendTls
    this.protocol.reconfigure(config, this)
    this.configureMirror(config)
    if (this.sweep !== null) this.startSweep() // timeouts may have changed
    this.serveWaiting() // --max-conn may have grown
  }

  // The rules at the edge of a config, compiled: at the start and on every reload.
  configureEdge (config, loaded) {
    const { gate, own, routes } = compileEdge(config, loaded, this.edgeStats)
    this.gate = gate
    this.own = { name: null, match: null, upstream: this.upstream, rules: own } // as a pool routeFor() gives
    this.routeRules = routes
  }

  // --route: [{ name, match, upstream }], each route its own pool (balancer.js makes them),
  // given its rules at the edge here.
  setRoutes (routes) {
    this.routes = routes.map(({ name, match, upstream }) => ({
      name, match, upstream, rules: this.routeRules.get(name) ?? null
    }))
    this.router = routes.length === 0 ? null : new Router(this.routes)
  }

  // The pool an HTTP request goes to: a route ({ name, match, upstream, rules }), or this
  // listener's own (`own`, named null);
  // null when no route matches and the listener has no backends of its own (answer 404
  // with unrouted()).
  routeFor (head) {
    if (this.router === null) return this.own
    const route = this.router.match(head.host, head.path)
    if (route !== null) return route
    return this.config.backends.length === 0 ? null : this.own
  }

  // Why a request went nowhere (routeFor gave null), for the 404 page and the log.
  unrouted (head) {
    const where = `${head.host || '(no host)'}${head.path}`
    return `no route for ${where}; the routes are ${this.routes.map(r => r.name).join(', ')}`
  }

  // `given`: a socket the process was given to listen on (bind.js listen), or null.
  async listen (given = null) {
    this.bound = await listen(this.server, this.config, given)
    this.given = given !== null
    this.port = this.unix ? null : this.server.address().port
    this.onError = err => this.onAcceptError(err)
    this.server.on('error', this.onError)
    this.unsubscribe = onOutOfDescriptors((doing, kind) => this.onOutOfDescriptors(doing, kind))
    return this.bound
  }

  // accept() failed. Out of descriptors, libuv would accept and close every connection
  // waiting in the kernel to keep the loop from spinning; lila stops accepting instead.
  onAcceptError (err) {
    if (!isOutOfDescriptors(err)) return this.short(err, 'accept failed')
    this.pauseAccepting(this.outOf(NOT_ACCEPTING), 'accept')
  }

  // Stop accepting for PAUSE_MS, said (as `kind`) once a second: the listening socket is
  // closed, so new clients are refused at once (nothing of theirs was read: they may try
  // again) rather than accepted and closed; open and held connections go on. It is bound
  // again by itself (resumeAccepting).
  // A socket the process was given cannot be bound again once closed: it goes on
  // accepting, and what libuv does out of descriptors happens.
  pauseAccepting (message, kind) {
    if (this.paused !== null || this.closing) return
    if (this.given) return this.sayShortage(message.replace(NOT_ACCEPTING, STILL_ACCEPTING), kind)
    this.sayShortage(message, kind)
    this.server.close()
    forget(this.server)
    this.paused = setTimeout(() => this.resumeAccepting(), PAUSE_MS)
  }

  resumeAccepting () {
    this.paused = null
    if (this.closing) return
    if (this.full) {
      this.paused = setTimeout(() => this.resumeAccepting(), PAUSE_MS) // still full: not said again
      return
    }
    const failed = err => {
      if (this.closing) return
      if (isOutOfDescriptors(err)) return this.pauseAccepting(this.outOf(`cannot listen again; ${TRYING}`), 'listen')
      this.log.error(`cannot listen on ${this.bound} again: ${reasonOf(err)}; ${TRYING}`)
      this.paused = setTimeout(() => this.resumeAccepting(), PAUSE_MS)
    }
    this.server.off('error', this.onError)
    listen(this.server, { host: this.config.host, port: this.port }).then(() => {
      this.server.on('error', this.onError)
      if (this.closing) return this.server.close()
      this.log.info(`accepting again on ${this.bound}`)
    }, err => {
      this.server.on('error', this.onError)
      failed(err.cause || err)
    })
  }

  // What status pages, metrics labels, the access log and control requests call this
  // listener: the name it was given, else the address it is bound to ("127.0.0.1:4444").
  // (Reloads match listeners by config.name, which defaults to protocol:port.)
  get name () {
    const { name, protocol, port, host } = this.config
    if (name && name !== defaultName(protocol, port, host)) return name
    return this.bound || (unixPath(host) !== null ? host : formatAddress(host || '0.0.0.0', port))
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

  // lila itself is short of something (descriptors, memory) for `doing`: no backend is
  // to blame. Said once a second.
  // Out of descriptors, accepting more clients would only make it worse (and libuv
  // accepts and closes in silence what waits in the kernel once accept() fails): the
  // listener stops accepting for a while.
  short (err, doing) {
    if (!isOutOfDescriptors(err)) return this.sayShortage(`${doing}: ${reasonOf(err)}`, doing)
    reportOutOfDescriptors(doing)
  }

  // lila ran out of descriptors `doing` something, here or elsewhere (descriptors.js).
  onOutOfDescriptors (doing, kind) {
    if (this.paused === null) this.pauseAccepting(this.outOf(`${doing}; ${NOT_ACCEPTING}`), kind)
    else this.sayShortage(this.outOf(doing), kind)
  }

  // An error line about a shortage, at most once a second for each `kind` (the rest
  // counted into the next line of that kind).
  sayShortage (message, kind) {
    let say = this.shortages.get(kind)
    if (say === undefined) {
      say = throttled(line => this.log.error(line))
      this.shortages.set(kind, say)
    }
    say(message)
  }

  // "out of file descriptors (limit 256): <doing>"
  outOf (doing) {
    return outOfDescriptors(this.descriptors.limit, doing)
  }

  // A client (tcp) or request (http) that no backend could take.
  countUnserved () {
    this.unserved++
  }

  // How many sweeps make `ms`: never fewer than it takes.
  ticksFor (ms) {
    return Math.ceil(ms / this.sweepEvery) + 1
  }

  // --max-conn, or by default what the listener's share of descriptors allows (null:
  // no cap).
  get maxConn () {
    return this.config.maxConn !== null ? this.config.maxConn : defaultMaxConn(this.descriptors.share)
  }

  get hasRoom () {
    const { maxConn } = this
    return maxConn === null || this.sessions.size < maxConn
  }

  // No room to serve a client, nor to hold one.
  get full () {
    return !this.hasRoom && this.waiting.size >= holdable(this.descriptors.share, this.maxConn, MAX_WAITING)
  }

  accept (client) {
    this.accepted++
    if (this.closing) return client.destroy()
    if (this.gate !== null && this.refused(client)) return
    if (!this.serving || !this.hasRoom) return this.hold(client)
    this.serve(client)
  }

  // --allow, --deny, judged as a client arrives (its address the PROXY header's, with
  // --accept-proxy): a client refused is closed at once, before it waits or is read.
  refused (client) {
    const address = clientAddress(client)
    const why = this.gate.judge(address)
    if (why === null) return false
    this.edgeStats.refused(why, address)
    client.destroy()
    return true
  }

  serve (client) {
    const session = new this.protocol.Session(this, client)
    this.sessions.add(session)
    const refusal = this.admit(session)
    if (refusal === null) return session.start()
    this.log.debug(`client ${session.clientAddress} turned away by --${refusal.limit}: ${refusal.detail}`)
    session.turnAway(refusal)
  }

  hold (client) {
    if (this.full) {
      client.destroy()
      const waiting = this.waiting.size
      const what = `${this.sessions.size} clients served (--max-conn ${this.maxConn}) and ${waiting} waiting`
      const message = this.config.maxConn === null
        ? this.outOf(`${what}, as many as it allows; ${NOT_ACCEPTING}`)
        : `${what}: ${NOT_ACCEPTING}`
      return this.pauseAccepting(message, 'full')
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
    if (this.closing) next.drain(this.config.drainGrace) // as the session it takes over from would
    const address = this.counted.get(session)
    if (address === undefined) return
    this.counted.delete(session)
    this.counted.set(next, address) // still the same client connection, counted once
  }

  sessionDone (session) {
    this.sessions.delete(session)
    const address = this.counted.get(session)
    if (address !== undefined) {
      this.counted.delete(session)
      if (this.perClient !== null) this.perClient.close(address)
    }
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
  // what is left. Resolves when every session is gone. `handOver`: another process
  // listens on the same socket now (an upgrade), so a Unix socket's file stays.
  close (timeout, { handOver = false } = {}) {
    this.closing = true
    if (this.unsubscribe !== null) this.unsubscribe()
    clearTimeout(this.paused)
    this.paused = null
    if (this.server.listening) this.server.close()
    if (!handOver) forget(this.server)
    const held = [...this.waiting]
    this.waiting.clear()
    for (const client of held) client.destroy()
    for (const prelude of [...this.prelude]) prelude.destroy()
    // A client between HTTP/1.1 requests has --drain-grace to send the one it may be
    // sending at that moment (then served, with Connection: close).
    for (const session of this.sessions) session.drain(this.config.drainGrace)
    // The sweep goes on while sessions drain: their timeouts still apply.
    const done = () => {
      clearInterval(this.sweep)
      this.sweep = null
      this.protocol.drained()
      if (this.mirror !== null) this.mirror.close()
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

  // The listening socket's descriptor, to hand it to the next lila (cli/upgrade.js);
  // -1 when not listening.
  get descriptor () {
    return descriptorOf(this.server)
  }

  snapshot () {
    return {
      name: this.name,
      protocol: this.protocol.name,
      tls: this.tls !== null,
      mode: this.upstream.mode,
      address: this.unix ? unixPath(this.config.host) : this.server.address(), // (bound at a temporary name: bind.js)
      active: this.sessions.size,
      maxConn: this.maxConn, // given or derived from the descriptor limit; null: none
      accepting: this.paused === null && !this.closing,
      waiting: this.waiting.size, // over --max-conn, unread in the kernel
      accepted: this.accepted,
      limited: { ...this.limited }, // turned away by per-client limits
      limitedClients: {
        connections: this.perClient === null ? 0 : this.perClient.size,
        rate: this.rate === null ? 0 : this.rate.size
      }, // addresses tracked for them now
      unserved: this.unserved, // no backend could take them (or none in time)
      ...this.edgeStats.snapshot(), // rules at the edge: refused (by reason), compression (by coding)
      mirror: this.mirror === null ? null : this.mirror.snapshot(), // --mirror, --compare
      ...this.upstream.stats(), // panic, queued (waiting for a backend slot), queueTimeouts
      ...this.protocol.snapshot() // http: responses by class, requestTime
    }
  }
}

module.exports = { Listener }
