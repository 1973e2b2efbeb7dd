'use strict'

const { Upstream } = require('./upstream/upstream')
const { Listener } = require('./proxy/listener')
const { createTcpProtocol } = require('./proxy/tcp')
const { createHttpProtocol } = require('./proxy/http/protocol')
const { loadListenerTls, Certificates } = require('./proxy/tls')
const { RedirectListener } = require('./proxy/redirect')
const { loadEdge } = require('./proxy/edge/rules')
const { viaToken } = require('./proxy/via')
const { silentLogger, prefixed } = require('./log')
const { describeChanges, sameAddress } = require('./config/changes')
const { RuntimeError, ControlError } = require('./errors')
const { logsName } = require('./config/names')
const { createControl, OPS } = require('./admin/control')
const { createAccessLog } = require('./admin/access-log')
const { descriptorLimit, listenerShare, limitWarning } = require('./descriptors')

// The programmatic API: a normalised config (see config.js) in, running listeners out.
//   const lb = createBalancer(config, { log })
//   const addresses = await lb.listen()   // ['127.0.0.1:4444', ...]; listen(given): some
//                                         // on sockets given to the process (name -> socket)
//   lb.stats()                            // a fresh plain snapshot
//   const lines = await lb.reload(next)   // apply a new config; what changed, in words
//   await lb.close()                      // graceful: drains up to shutdownTimeout
// `now` (a clock), `resolve` (name -> Promise of addresses) and `resolveSrv` (SRV name
// -> Promise of records, as dns.resolveSrv gives them) replace Date.now and DNS, for
// tests; `random` (Math.random's kind) draws which requests a fault with a rate strikes.
// `via` is this lila's token in HTTP Via headers (loop detection). `table` false
// leaves out the start-up table (workers after the first print none).
// `accessLog` (access-log.js) writes a line per connection or request; by default the
// one config.accessLog asks for, on `stdout`; null: none.
// Certificates lila gets itself (--tls local|acme) come from a Keeper (tls/keeper.js)
// through `certificates`, the board its listeners take them from (proxy/tls.js): by
// default this balancer's own keeper; `keeper: null` when another process keeps them
// (a --workers worker: the primary does, and feeds `certificates`). `keeperOptions`
// go to the Keeper (tests: a short localLifetime).
// One factory per protocol (config.protocol), each making the protocol object a new
// Listener serves (listener.js) from { via }.
const PROTOCOLS = {
  tcp: createTcpProtocol,
  http: createHttpProtocol, // HTTP/1.1 and HTTP/2
  grpc: ({ via }) => createHttpProtocol({ via, grpc: true }) // HTTP, its own answers gRPC-shaped
}

function createBalancer (config, {
  log = silentLogger,
  now = Date.now,
  resolve = null,
  resolveSrv = null,
  via = viaToken(),
  table = true,
  stdout = process.stdout,
  accessLog = defaultAccessLog(config, stdout),
  fileLimit = descriptorLimit(),
  random = Math.random,
  certificates = new Certificates(),
  keeper,
  keeperOptions = {}
} = {}) {
  const startedAt = now()
  let current = config
  let listeners = []
  const retiring = new Map() // listener removed by a reload -> Promise, while it drains
  let started = false
  const ownKeeper = keeper === undefined // made here, when a config wants one
  if (ownKeeper) keeper = null
  const redirects = new Map() // listener name -> RedirectListener (--redirect-http)

  // The keeper of this balancer's certificates, made when a config first wants one.
  function keeperFor (next) {
    if (keeper === null && ownKeeper && requireKeeper().Keeper.wanted(next)) {
      const { Keeper } = requireKeeper()
      keeper = new Keeper(next, {
        log, now, ...keeperOptions, publish: update => { certificates.apply(update); return Promise.resolve() }
      })
      return { keeper, fresh: true }
    }
    return { keeper, fresh: false }
  }

  // TLS files and the rules at the edge's htpasswd files are read here (and again on
  // every reload): a UsageError if one cannot be read or used.
  function material (listenerConfig) {
    return { ...loadListenerTls(listenerConfig, certificates), edge: loadEdge(listenerConfig) }
  }

  // The limit on open files, and each listener's share of it (descriptors.js): what
  // --max-conn defaults to.
  const descriptorsFor = configs => ({ limit: fileLimit, share: listenerShare(fileLimit, configs.length) })

  // Log lines about a listener carry its name when it has one or there are several
  // (as many as the config in force has).
  function make (listenerConfig, { tls, backendTls, edge }, descriptors) {
    const named = () => logsName(listenerConfig, current.listeners.length)
    const listenerLog = prefixed(log, () => named() ? listenerConfig.name : null)
    const upstream = new Upstream(listenerConfig, {
      now, log: listenerLog, resolve, resolveSrv, tls: backendTls, table, random
    })
    const routes = listenerConfig.routes.map(route => makeRoute(route, listenerLog, backendTls))
    const protocol = PROTOCOLS[listenerConfig.protocol]({ via })
    const parts = { upstream, routes, log: listenerLog, protocol, tls, backendTls, accessLog, descriptors, edge }
    const listener = new Listener({ config: listenerConfig, ...parts })
    certificates.use(listenerConfig.name, tls)
    return listener
  }

  // --redirect-http of a listener, bound: ACME HTTP-01 and a 308 to its https port.
  // `given`: a socket the process was given for it (an upgrade), or undefined.
  async function startRedirect (listener, given = null) {
    const { name, host, redirectHttp } = listener.config
    const redirect = new RedirectListener({
      host, port: redirectHttp, httpsPort: listener.port, challenges: certificates.challenges, log: listener.log
    })
    const bound = await redirect.listen(given || null)
    redirects.set(name, redirect)
    if (table) listener.log.info(`redirect-http on ${bound}: ACME HTTP-01, and a 308 to https on port ${listener.port}`)
    return redirect
  }

  // After a reload: redirect listeners follow their listeners' --redirect-http.
  async function updateRedirects (lines) {
    for (const [name, redirect] of redirects) {
      const listener = listeners.find(l => l.config.name === name)
      if (listener !== undefined && listener.config.redirectHttp === redirect.port &&
        listener.config.host === redirect.host) {
        redirect.httpsPort = listener.port
        continue
      }
      redirects.delete(name)
      await redirect.close()
      if (listener === undefined || listener.config.redirectHttp === null) lines.push(`${name}: redirect-http off`)
    }
    for (const listener of listeners) {
      if (listener.config.redirectHttp === null || redirects.has(listener.config.name)) continue
      try {
        const redirect = await startRedirect(listener)
        lines.push(`${listener.config.name}: redirect-http on ${redirect.bound}`)
      } catch (err) {
        lines.push(`${listener.config.name}: redirect-http not started: ${err.message}`)
      }
    }
  }

  // A route's pool: an Upstream of its own, whose lines name the route.
  function makeRoute ({ name, match, pool }, listenerLog, backendTls) {
    const log = prefixed(listenerLog, () => `route ${name}`)
    return { name, match, upstream: new Upstream(pool, { now, log, resolve, resolveSrv, tls: backendTls, table }) }
  }

  // Every pool of a listener: its own backends' and its routes'.
  const upstreamsOf = listener => [listener.upstream, ...listener.routes.map(route => route.upstream)]

  // A reload's routes for a kept listener: kept ones (by name) take their new settings,
  // new ones start, removed ones stop checking (requests they hold finish). -> [routes,
  // lines, started]: `started` the promises of new routes' first checks.
  function updateRoutes (listener, listenerConfig, backendTls) {
    const old = new Map(listener.routes.map(route => [route.name, route]))
    const lines = []
    const started = []
    const routes = listenerConfig.routes.map(config => {
      const kept = old.get(config.name)
      if (kept === undefined) {
        const route = makeRoute(config, listener.log, backendTls)
        started.push(route.upstream.start())
        const n = config.pool.backends.length
        lines.push(`route ${config.name} added (${n} backend${n === 1 ? '' : 's'})`)
        return route
      }
      old.delete(config.name)
      const said = []
      const [before, after] = [matchText(kept.match), matchText(config.match)]
      if (before !== after) said.push(`match ${before} -> ${after}`)
      if (kept.upstream.mode !== config.pool.mode) said.push(`mode ${kept.upstream.mode} -> ${config.pool.mode}`)
      const changes = [...said, ...kept.upstream.update(config.pool, { tls: backendTls })]
      for (const change of changes) lines.push(`route ${config.name}: ${change}`)
      return { name: config.name, match: config.match, upstream: kept.upstream }
    })
    for (const route of old.values()) {
      route.upstream.close()
      lines.push(`route ${route.name} removed`)
    }
    return [routes, lines, started]
  }

  listeners = config.listeners.map(l => make(l, material(l), descriptorsFor(config.listeners)))
  // Certificates lila makes (local) or kept (ACME) are there before the first client,
  // once every file was read: a state folder that cannot be used is a UsageError here.
  const keeperStarted = keeperFor(config).keeper === null || !ownKeeper ? Promise.resolve() : keeper.start()

  // Bind every listener (so that a taken port fails at once), then resolve names and
  // check every backend once, printing what was found, then serve. Clients that connect
  // meanwhile wait unread.
  // `given`, `redirectsGiven`: Map listener name -> a socket the process was given for
  // it, or for its --redirect-http (bind.js listen).
  async function listen (given = new Map(), redirectsGiven = new Map()) {
    const addresses = []
    const warning = limitWarning(fileLimit, current.listeners.map(l => l.maxConn))
    if (warning !== null) log.warn(warning)
    try {
      await keeperStarted
      for (const listener of listeners) {
        addresses.push(await listener.listen(given.get(listener.config.name) || null))
      }
      for (const listener of listeners) {
        const redirectGiven = redirectsGiven.get(listener.config.name)
        if (listener.config.redirectHttp !== null) await startRedirect(listener, redirectGiven)
      }
      await Promise.all(listeners.flatMap(listener => upstreamsOf(listener).map(upstream => upstream.start())))
      for (const listener of listeners) listener.open()
    } catch (err) {
      // Given sockets' files are not this start's to remove.
      await close(0, { handOver: given.size + redirectsGiven.size > 0 })
      throw err
    }
    started = true
    if (keeper !== null && ownKeeper) keeper.begin() // ACME's TLS-ALPN-01 needs the listeners open
    return addresses
  }

  function retire (listener, timeout, handOver = false) {
    for (const upstream of upstreamsOf(listener)) upstream.close()
    const closed = listener.close(timeout, { handOver }).then(() => { retiring.delete(listener) })
    retiring.set(listener, closed)
    return closed
  }

  // Stop accepting and drain every listener; stats() still shows them. The access log's
  // last lines are written before it resolves: a process may exit right after.
  // `handOver`: another process listens on the same sockets now (cli/upgrade.js).
  function close (timeout = current.shutdownTimeout, { handOver = false } = {}) {
    if (keeper !== null && ownKeeper) keeper.close()
    const all = listeners.filter(l => !retiring.has(l)).map(listener => retire(listener, timeout, handOver))
    const redirected = [...redirects.values()].map(redirect => redirect.close())
    redirects.clear()
    return Promise.all([...all, ...retiring.values(), ...redirected]).then(() => {
      if (accessLog !== null) accessLog.flush()
    })
  }

  function destroy () {
    for (const listener of new Set([...listeners, ...retiring.keys()])) listener.destroy()
  }

  // Apply a new config (as config.js builds it) without dropping a connection.
  // Listeners are matched by name: new ones are bound, checked and opened; removed ones
  // stop accepting and drain (up to shutdownTimeout, as on shutdown); one whose address
  // or protocol changed is replaced so; the others take their new settings in place
  // (upstream.update: backends join and drain). TLS files are read again, so renewed
  // certificates take effect. Rejects, with nothing changed, when a TLS file cannot be
  // used (UsageError) or a new port cannot be bound (RuntimeError). Resolves with what
  // changed, as log lines.
  async function reload (next) {
    if (!started) throw new RuntimeError('cannot reload before listen() is done')
    // Listeners are matched by their config name (given, or protocol:port).
    const byName = new Map(listeners.map(l => [l.config.name, l]))
    const loaded = next.listeners.map(material) // may throw: nothing has changed yet
    // Certificates lila gets itself: new ones are made (local) or loaded before the
    // listeners take the config; ACME orders start at once, in the background.
    let keeperLines = []
    if (ownKeeper) {
      const { keeper: k, fresh } = keeperFor(next)
      if (k !== null && fresh) {
        await k.start() // (a UsageError here changes nothing: no listener took anything yet)
      } else if (k !== null) {
        keeperLines = await k.reload(next)
      }
    }
    const descriptors = descriptorsFor(next.listeners)
    const kept = [] // [listener, config, material]
    const created = [] // [listener, config]
    const removed = new Set(listeners)
    next.listeners.forEach((listenerConfig, i) => {
      const old = byName.get(listenerConfig.name)
      if (old !== undefined && sameAddress(old.config, listenerConfig)) {
        removed.delete(old)
        kept.push([old, listenerConfig, loaded[i]])
      } else {
        created.push([make(listenerConfig, loaded[i], descriptors), listenerConfig])
      }
    })

    // Bind new listeners first, all or none. One that takes the port of a listener
    // being removed can only bind once that one stopped accepting.
    const freed = listenerConfig => [...removed].some(old => old.config.port === null
      ? old.config.host === listenerConfig.host // the same Unix socket
      : old.config.port !== 0 && old.config.port === listenerConfig.port)
    const bound = []
    try {
      for (const [listener, listenerConfig] of created) {
        if (!freed(listenerConfig)) bound.push([listener, await listener.listen()])
      }
    } catch (err) {
      await Promise.all(bound.map(([listener]) => listener.close(0)))
      throw err
    }

    const lines = describeChanges(current, next)
    const routesStarted = []
    for (const [listener, listenerConfig, { tls, backendTls, edge }] of kept) {
      certificates.use(listenerConfig.name, tls)
      const changes = listener.upstream.update(listenerConfig, { tls: backendTls })
      const [routes, routeChanges, started] = updateRoutes(listener, listenerConfig, backendTls)
      routesStarted.push(...started)
      listener.reconfigure(listenerConfig, { tls, backendTls, descriptors, routes, edge })
      for (const change of [...changes, ...routeChanges]) lines.push(`${listenerConfig.name}: ${change}`)
    }
    const replaced = new Map() // name -> connections left on the old listener
    const connections = n => `${n} connection${n === 1 ? '' : 's'} left to drain`
    for (const old of removed) {
      if (next.listeners.some(l => l.name === old.config.name)) replaced.set(old.config.name, old.sessions.size)
      else {
        const left = old.sessions.size ? `, ${connections(old.sessions.size)}` : ''
        lines.push(`listener ${old.config.name} removed${left}`)
      }
      retire(old, next.shutdownTimeout)
    }
    for (const [listener, listenerConfig] of created) {
      if (!freed(listenerConfig)) continue
      try {
        bound.push([listener, await listener.listen()])
      } catch (err) {
        lines.push(`listener ${listenerConfig.name} not started: ${err.message}`)
      }
    }
    const fresh = bound.map(([listener]) => listener)
    const starts = fresh.flatMap(listener => upstreamsOf(listener).map(upstream => upstream.start()))
    await Promise.all([...routesStarted, ...starts])
    for (const listener of fresh) listener.open()
    for (const [listener, address] of bound) {
      const left = replaced.get(listener.config.name)
      const how = left === undefined ? 'added' : 'replaced'
      const drain = left ? `; ${connections(left)} on the old one` : ''
      lines.push(`listener ${listener.config.name} ${how}: ${listeningOn(listener, address)}${drain}`)
    }

    // The running set, in the order of the new config.
    const running = new Set([...kept.map(([listener]) => listener), ...fresh])
    listeners = next.listeners.map(l => [...running].find(listener => listener.config.name === l.name)).filter(Boolean)
    for (const old of removed) {
      if (!listeners.some(l => l.config.name === old.config.name)) certificates.use(old.config.name, null)
    }
    current = next
    await updateRedirects(lines)
    lines.push(...keeperLines)
    if (keeper !== null && ownKeeper) keeper.begin() // the listeners of the new config listen
    return lines
  }

  // A fresh plain snapshot (README: "Status, metrics and control"). A backend is as its
  // listener's protocol shows it (HTTP adds its keep-alive pool: { sockets, idle,
  // connects, reuses }).
  function stats () {
    return {
      startedAt,
      // Each certificate served: names, issuer, validity, renewal (proxy/tls.js snapshot)
      certificates: listeners.filter(l => l.tls !== null).flatMap(l => l.tls.snapshot(l.name, now())),
      listeners: listeners.map(listener => {
        const backendsOf = upstream => upstream.all().map(backend => listener.protocol.snapshotBackend(backend))
        return {
          ...listener.snapshot(),
          backends: backendsOf(listener.upstream),
          // --route: each route's pool, as a listener shows its own
          routes: listener.routes.map(({ name, match, upstream }) => ({
            name,
            match: matchText(match),
            mode: upstream.mode,
            ...upstream.stats(),
            backends: backendsOf(upstream)
          }))
        }
      })
    }
  }

  // One control action, { op, ...request } (control.js), e.g. from the --workers
  // primary: { op: 'drain', backend: '10.0.0.1:80' }. A promise of { message, backends }.
  let controls = null
  function control ({ op, ...request }) {
    controls ||= createControl({ get listeners () { return listeners } })
    if (!OPS.includes(op)) {
      const message = `unknown control action ${JSON.stringify(op)}: expected one of ${OPS.join(', ')}`
      return Promise.reject(new ControlError(400, message))
    }
    return controls[op](request)
  }

  // The listening sockets, to hand to the next lila (cli/upgrade.js): what each is (a
  // listener's, or its --redirect-http's: the listener's name, the address as
  // configured) and its descriptor.
  // `server` rides along (not to be sent anywhere): a --workers worker sends its handle.
  function sockets () {
    return [
      ...listeners.map(({ config: { name, protocol, host, port }, descriptor, server }) => ({
        role: 'listener', name, protocol, host, port, fd: descriptor, server
      })),
      ...[...redirects].map(([name, redirect]) => ({
        role: 'redirect',
        name,
        host: redirect.host,
        port: redirect.port,
        fd: redirect.descriptor,
        server: redirect.server
      }))
    ]
  }

  return {
    listen,
    close,
    destroy,
    sockets,
    stats,
    reload,
    control,
    get listeners () { return listeners },
    get config () { return current }
  }
}

// "listening on 0.0.0.0:80 (http, round-robin, 2 backends)": a listener of a balancer,
// bound at `address`. `extra` ends the parentheses (the --workers primary's ", 4 workers").
function listeningOn (listener, address, extra = '') {
  const n = listener.upstream.backends.length
  const r = listener.routes.length
  const backends = `${n} backend${n === 1 ? '' : 's'}${r === 0 ? '' : `, ${r} route${r === 1 ? '' : 's'}`}`
  return `listening on ${address} (${listener.protocol.name}, ${listener.upstream.mode}, ${backends}${extra})`
}

// What lila says once a balancer listens (lb.listen() gave `addresses`): a line per
// listener, with its name when its other log lines have it.
function listeningLines (lb, addresses, extra) {
  return lb.listeners.map((listener, i) => {
    const name = logsName(listener.config, lb.listeners.length) ? `${listener.config.name}: ` : ''
    return name + listeningOn(listener, addresses[i], extra)
  })
}

// A route's match as written: api.example.com/v1, *.example.com, /static.
function matchText ({ host, wildcard, path }) {
  return `${host === null ? '' : (wildcard ? '*.' : '') + host}${path === null ? '' : path}`
}

// tls/ is loaded only for --tls local|acme.
function requireKeeper () {
  return require('./tls/keeper')
}

function defaultAccessLog (config, stdout) {
  return config.accessLog ? createAccessLog({ format: config.accessLog, stdout }) : null
}

module.exports = { createBalancer, listeningLines }
