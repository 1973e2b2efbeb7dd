'use strict'

const net = require('net')
const { listen, descriptorOf } = require('../net/bind')
const { setOrigin, clientAddress, UNIX_ORIGIN } = require('./origin')
const { forget } = require('../net/socket-file')
const { formatAddress, unixPath } = require('../address')
const { defaultName } = require('../listener-names')
const { Preludes } = require('./prelude')
const { ClientAdmission } = require('./client-admission')
const { Pools } = require('./pools')
const { Shortage } = require('./shortage')
const { Sweep } = require('./sweep')
const { configureMirror } = require('./mirror-setup')
const { loadEdge, compileEdge } = require('./edge/rules')
const { EdgeStats } = require('./edge/stats')
const { compilePages } = require('./edge/error-pages')
const { Maintenance } = require('./maintenance')
const { Canaries } = require('./canary')
const { AuthServices } = require('./edge/forward-auth')
const { defaultMaxConn, holdable } = require('../descriptors')

// Accepted connections above --max-conn wait (paused, unread) for a free slot, at most
// this many (fewer when the listener's share of descriptors runs out first); past that
// the listener stops accepting for a while (shortage.js).
const MAX_WAITING = 1024

// What every listener does, whatever its protocol: bind, accept, hold clients above
// --max-conn, track sessions, and drain them on close. The protocol comes in as an
// object made for this listener (tcp-protocol.js, http/protocol.js: HTTP/1.1 and
// HTTP/2); what the listener uses of it and of the sessions it makes is
// listener-interfaces.js's PROTOCOL and SESSION. With --accept-proxy or TLS termination
// a connection first goes through its prelude (prelude.js: the PROXY header, the TLS
// handshake); the session then reads the TLSSocket, and the client's address is the one
// the header gave.
class Listener {
  // descriptors: { limit, share }: the process's limit on open files and this
  // listener's share of it (descriptors.js), null each when unknown. edge: what its
  // rules at the edge read from files (edge/rules.js loadEdge; null: read them now).
  constructor ({
    config, upstream, routes = [], log, protocol, serverOptions = {}, tls = null, backendTls = null, accessLog = null,
    descriptors = { limit: null, share: null }, edge = null, acme = null, sharedLimits = null, tracer = null,
    canaries = new Map()
  }) {
    this.config = config
    // A plain-HTTP listener's ACME HTTP-01 tokens (tls.js Challenges, the process's
    // board; tls/http01.js), answered before routing; null: not plain HTTP.
    this.acme = acme
    this.descriptors = descriptors
    this.tls = tls // { context, SNICallback } (tls.js) while terminating TLS
    this.backendTls = backendTls // tls.connect options for backends, or null
    this.preludes = new Preludes(MAX_WAITING) // connections in their prelude: closed with the listener
    this.upstream = upstream // the listener's own backends: requests no route matches
    this.log = log
    // Rules at the edge (edge/rules.js): what they refused and compressed, counted
    // across reloads; the gate each connection passes as it arrives, or null; the
    // pools requests go to (pools.js), each with its Rules.
    this.edgeStats = new EdgeStats(log)
    this.gate = null
    this.pools = null
    this.maintenance = new Maintenance() // on by the config or the control API (maintenance.js)
    this.authServices = new AuthServices(this.edgeStats) // --forward-auth's, by URL (edge/forward-auth.js)
    // --canary: the pools that have one (canary.js), and their canary pools' Upstreams
    // (Map pool name -> Upstream; balancer.js makes them, as it makes routes)
    this.canaries = new Canaries()
    this.canaryUpstreams = canaries
    this.configurePools(config, edge === null ? loadEdge(config) : edge, routes)
    this.protocol = protocol
    this.sessions = new Set()
    this.waiting = new Set() // held clients, oldest first (a Set keeps insertion order)
    this.bound = null // "host:port" once listening
    this.accessLog = accessLog // access-log.js writer, or null: off (then it costs nothing)
    this.tracer = tracer // --otlp: telemetry/tracer.js, or null: off (then it costs a null check)
    this.accepted = 0
    this.unserved = 0 // clients no backend could take (countUnserved)
    this.closing = false
    this.serving = false // until open(): bound, but clients wait (backends not checked yet)
    this.drained = null
    this.shortage = new Shortage(this) // short of descriptors or memory: words, pauses in accepting
    this.sweeper = new Sweep()
    this.port = null // the port bound, to bind again after a pause; null on a Unix socket
    this.given = false // listening on a socket given to the process (systemd, an upgrade): it cannot be bound again
    this.unix = unixPath(config.host) !== null // listening on a Unix socket (a reload never changes it)
    // --max-conn-per-client, --rate-limit; sharedLimits: a fleet's decider (client-admission.js), or null
    this.admission = new ClientAdmission(config, sharedLimits)
    // --tls-client-ca: a handshake refused for the client's certificate (the prelude's)
    this.refusedClient = (reason, detail) => this.edgeStats.refused(reason, detail)
    // pauseOnConnect: a client waiting for a --max-conn slot stays unread in the kernel.
    this.server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true, ...serverOptions })
    this.server.on('connection', client => this.arrive(client))
    protocol.reconfigure(config, this)
    // --mirror (http/mirror.js): copies of HTTP requests to a shadow backend; null: off
    this.mirror = configureMirror(null, config, protocol.rewrite, log)
  }

  // A request (http, either version) over --rate-limit: null when it may go on, else
  // what to answer with 429: { detail, retryAfter } (counted); with --fleet, a Promise
  // of either.
  rateLimited (address) {
    return this.admission.rateLimited(address)
  }

  arrive (client) {
    if (this.unix) setOrigin(client, UNIX_ORIGIN) // a Unix socket's client: no address
    if (!this.config.acceptProxy && this.tls === null) return this.accept(client)
    if (this.closing) return client.destroy()
    const { acceptProxy, headerTimeout: timeout } = this.config
    const { tls, log, refusedClient: refused } = this
    this.preludes.start(client, { acceptProxy, tls, ALPNProtocols: this.protocol.alpn, timeout, log, refused },
      socket => this.accept(socket))
  }

  // A reload: new settings for new connections (and, where they read them as they go,
  // for open ones); new TLS material for new handshakes; a new share of descriptors when
  // the number of listeners changed.
  reconfigure (config, {
    tls = null, backendTls = null, descriptors = this.descriptors, routes = this.routes, edge = null, acme = null,
    canaries = this.canaryUpstreams
  } = {}) {
    this.config = config
    this.acme = acme
    this.tls = tls
    this.canaryUpstreams = canaries
    this.configurePools(config, edge === null ? loadEdge(config) : edge, routes)
    this.admission.configure(config)
    this.descriptors = descriptors
    this.backendTls = backendTls
    this.protocol.reconfigure(config, this)
    this.mirror = configureMirror(this.mirror, config, this.protocol.rewrite, this.log)
    if (this.sweeper.running) this.startSweep() // timeouts may have changed
    this.serveWaiting() // --max-conn may have grown
  }

  // The rules at the edge of a config, compiled, and the pools they apply to
  // (--route: [{ name, match, upstream }], each route its own pool, balancer.js makes
  // them): at the start and on every reload.
  configurePools (config, loaded, routes) {
    this.authServices.configure(config)
    const { gate, own, routes: routeRules } = compileEdge(config, loaded, this.edgeStats, this.authServices)
    this.gate = gate
    this.maintenance.configure(config, loaded.pages)
    this.canaries.configure(config, this.canaryUpstreams, this.tls !== null)
    const pages = compilePages(config, loaded)
    this.pools = new Pools(this.upstream, own, routeRules, routes, config, pages, this.canaries)
  }

  // --error-page's page for `status` of a request no pool took yet (a head refused), or null.
  errorPage (status) {
    const { pages } = this.pools.own
    return pages === null ? null : pages.get(status) || null
  }

  // This listener's own pool, as routeFor() gives it ({ name: null, upstream, rules }).
  get own () {
    return this.pools.own
  }

  // The routes: [{ name, match, upstream, rules }].
  get routes () {
    return this.pools.routes
  }

  // The pool an HTTP request goes to (pools.js): a route, or this listener's own; null
  // when no route matches and the listener has no backends of its own (answer 404 with
  // unrouted()).
  routeFor (head) {
    return this.pools.routeFor(head, this.config.backends.length > 0)
  }

  // Why a request went nowhere (routeFor gave null), for the 404 page and the log.
  unrouted (head) {
    return this.pools.unrouted(head)
  }

  // `given`: a socket the process was given to listen on (bind.js listen), or null.
  async listen (given = null) {
    this.bound = await listen(this.server, this.config, given)
    this.given = given !== null
    this.port = this.unix ? null : this.server.address().port
    this.shortage.watch()
    return this.bound
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

  // Timeouts by sweeping (sweep.js): every session's idle sweeps, the protocol's own.
  startSweep () {
    this.sweeper.start(this.config, this.protocol, this.sessions, this)
  }

  // ms between sweeps.
  get sweepEvery () {
    return this.sweeper.every
  }

  // How many sweeps make `ms`: never fewer than it takes.
  ticksFor (ms) {
    return this.sweeper.ticksFor(ms)
  }

  // lila itself is short of something (descriptors, memory) for `doing`: no backend is
  // to blame (shortage.js).
  short (err, doing) {
    this.shortage.short(err, doing)
  }

  // A client (tcp) or request (http) that no backend could take.
  countUnserved () {
    this.unserved++
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
    const session = this.protocol.newSession(this, client)
    this.sessions.add(session)
    const refusal = this.admission.admit(session, !this.protocol.limitsRequests)
    if (refusal === null) return session.start()
    if (typeof refusal.then === 'function') return refusal.then(later => this.admitted(session, client, later))
    this.turnAway(session, refusal)
  }

  // A fleet's verdict came (in BUDGET_MS at most, fleet/shared-limits.js): the client,
  // unread meanwhile, is served or turned away, unless it or the listener went meanwhile.
  admitted (session, client, refusal) {
    if (!this.sessions.has(session)) return
    if (client.destroyed) return this.sessionDone(session) // never started: nothing else says it is over
    if (refusal === null) return session.start()
    this.turnAway(session, refusal)
  }

  turnAway (session, refusal) {
    this.log.debug(`client ${session.clientAddress} turned away by --${refusal.limit}: ${refusal.detail}`)
    session.turnAway(refusal)
  }

  hold (client) {
    if (this.full) {
      client.destroy()
      const what = `${this.sessions.size} clients served (--max-conn ${this.maxConn}) and ${this.waiting.size} waiting`
      return this.shortage.full(what, this.config.maxConn !== null)
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
    this.admission.handOver(session, next)
  }

  sessionDone (session) {
    this.sessions.delete(session)
    this.admission.done(session)
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
    this.shortage.stop()
    if (this.server.listening) this.server.close()
    if (!handOver) forget(this.server)
    const held = [...this.waiting]
    this.waiting.clear()
    for (const client of held) client.destroy()
    this.preludes.destroy()
    // A client between HTTP/1.1 requests has --drain-grace to send the one it may be
    // sending at that moment (then served, with Connection: close).
    for (const session of this.sessions) session.drain(this.config.drainGrace)
    // The sweep goes on while sessions drain: their timeouts still apply.
    const done = () => {
      this.sweeper.stop()
      this.protocol.drained()
      if (this.mirror !== null) this.mirror.close()
      this.authServices.close()
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
    this.preludes.destroy()
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
      accepting: this.shortage.accepting && !this.closing,
      waiting: this.waiting.size, // over --max-conn, unread in the kernel
      accepted: this.accepted,
      ...this.admission.snapshot(), // limited (turned away by per-client limits), limitedClients
      unserved: this.unserved, // no backend could take them (or none in time)
      ...this.edgeStats.snapshot(), // rules at the edge: refused (by reason), compression (by coding)
      maintenance: this.maintenance.snapshot(), // { listener, routes, allow }: what is under maintenance
      mirror: this.mirror === null ? null : this.mirror.snapshot(), // --mirror, --compare
      ...this.upstream.stats(), // panic, queued (waiting for a backend slot), queueTimeouts
      ...this.protocol.snapshot() // http: responses by class, requestTime
    }
  }
}

module.exports = { Listener }
