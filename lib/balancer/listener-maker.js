'use strict'

// How a listener's config becomes what runs it, for the Balancer (balancer.js, which
// holds the running set: it listens, plans a reload, binds, retires and closes):
//   make(config, material, descriptors) -> a Listener, not yet bound: its Upstream
//       (with lila run's App), its routes' and canaries' pools, its protocol, its files'
//       material and what provisions.js gives it (certificates, --fleet's limits)
//   update(listener, config, material, routesPlan, descriptors) -> { lines, started }
//       a reload's apply half for a listener it keeps: the same parts follow the new
//       config in place (backends join and drain, routes and canaries are made,
//       updated or closed); `started`: the promises of new pools' first checks

const { Upstream } = require('../upstream/upstream')
const { Listener } = require('../proxy/listener')
const { createTcpProtocol } = require('../proxy/tcp-protocol')
const { createHttpProtocol } = require('../proxy/http/protocol')
const { prefixed } = require('../log')
const { logsName } = require('../listener-names')
const { plural } = require('./words')
const { canaryPools } = require('./canary-pools')

// One factory per protocol (config.protocol), each making the protocol object a new
// Listener serves (listener.js) from { via }.
const PROTOCOLS = {
  tcp: createTcpProtocol,
  http: createHttpProtocol, // HTTP/1.1 and HTTP/2
  grpc: ({ via }) => createHttpProtocol({ via, grpc: true }) // HTTP, its own answers gRPC-shaped
}

class ListenerMaker {
  // pools: what every Upstream is made with ({ now, resolve, resolveSrv, table, random });
  // inForce() -> the config in force (how many listeners there are).
  constructor ({ log, pools, via, accessLog, tracer, provisions, apps, inForce }) {
    Object.assign(this, { log, pools, via, accessLog, tracer, provisions, apps, inForce })
  }

  // Log lines about a listener carry its name when it has one or there are several (as
  // many as the config in force has).
  make (listenerConfig, { tls, backendTls, edge }, descriptors) {
    const { provisions, apps } = this
    const named = () => logsName(listenerConfig, this.inForce().listeners.length)
    const log = prefixed(this.log, () => named() ? listenerConfig.name : null)
    const app = listenerConfig.run === null ? null : apps.make(listenerConfig, log)
    const upstream = new Upstream(listenerConfig, { ...this.pools, log, tls: backendTls, app })
    const routes = listenerConfig.routes.map(route => this.makeRoute(route, log, backendTls))
    const canaries = canaryPools(listenerConfig, new Map(), this.canaryMaker(log, backendTls), backendTls).upstreams
    const protocol = PROTOCOLS[listenerConfig.protocol]({ via: this.via })
    const acme = provisions.acmeOf(listenerConfig)
    const { accessLog, tracer } = this
    const sharedLimits = provisions.sharedLimits(listenerConfig.name) // --fleet
    const parts = { upstream, routes, log, protocol, tls, backendTls, descriptors, edge, acme, accessLog, sharedLimits }
    const listener = new Listener({ config: listenerConfig, ...parts, canaries, tracer })
    provisions.certificates.use(listenerConfig.name, tls)
    if (app !== null) apps.attach(listener, app)
    return listener
  }

  update (listener, config, { tls, backendTls, edge }, routesPlan, descriptors) {
    this.provisions.certificates.use(config.name, tls)
    const changes = listener.upstream.update(config, { tls: backendTls })
    const app = this.apps.of(listener)
    if (app !== null) changes.push(...app.update(config.run))
    const routes = this.updateRoutes(listener, routesPlan, backendTls)
    const canaries = canaryPools(config, listener.canaryUpstreams, this.canaryMaker(listener.log, backendTls),
      backendTls)
    const acme = this.provisions.acmeOf(config)
    listener.reconfigure(config, {
      tls, backendTls, descriptors, routes: routes.routes, edge, acme, canaries: canaries.upstreams
    })
    return {
      lines: [...changes, ...routes.lines, ...canaries.lines],
      started: [...routes.started, ...canaries.started.map(upstream => upstream.start())]
    }
  }

  // A route's pool: an Upstream of its own, whose lines name the route.
  makeRoute ({ name, match, pool }, listenerLog, backendTls) {
    const { random, ...options } = this.pools // (a route's pool draws with Math.random)
    const log = prefixed(listenerLog, () => `route ${name}`)
    return { name, match, upstream: new Upstream(pool, { ...options, log, tls: backendTls }) }
  }

  // How a listener's canary pools are made (canary-pools.js): an Upstream of its own,
  // whose lines name it.
  canaryMaker (listenerLog, backendTls) {
    const { random, ...options } = this.pools
    return (pool, name) => {
      const log = prefixed(listenerLog, () => name === null ? 'canary' : `route ${name} canary`)
      return new Upstream(pool, { ...options, log, tls: backendTls })
    }
  }

  // A kept listener's routes as planned (plan.js planRoutes): kept ones take their new
  // settings, new ones start, removed ones stop checking (requests they hold finish).
  // -> { routes, lines, started }
  updateRoutes (listener, { next, removed }, backendTls) {
    const old = new Map(listener.routes.map(route => [route.name, route]))
    const lines = []
    const started = []
    const routes = next.map(({ config, kept, said }) => {
      if (!kept) {
        const route = this.makeRoute(config, listener.log, backendTls)
        started.push(route.upstream.start())
        lines.push(`route ${config.name} added (${plural(config.pool.backends.length, 'backend')})`)
        return route
      }
      const { upstream } = old.get(config.name)
      for (const change of [...said, ...upstream.update(config.pool, { tls: backendTls })]) {
        lines.push(`route ${config.name}: ${change}`)
      }
      return { name: config.name, match: config.match, upstream }
    })
    for (const name of removed) {
      old.get(name).upstream.close()
      lines.push(`route ${name} removed`)
    }
    return { routes, lines, started }
  }
}

module.exports = { ListenerMaker }
