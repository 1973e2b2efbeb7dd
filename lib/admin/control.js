'use strict'

const { ControlError, ConflictError, UsageError } = require('../errors')
const { readPage } = require('../proxy/edge/error-pages')
const { specAddress } = require('../address')
const { describeFault } = require('../format')

// Runtime control of one balancer's backends, for the status listener and the
// dashboard: the functions status-server.js's StatusServer is given (`control`), over
// the listeners of one process. (With several worker processes, the primary gives it
// functions that ask every worker to do the same: controlFrom.)
//
// Each takes one plain object and returns a promise of { message, backends }: a line
// saying what was done and the snapshots of the backends it touched. It rejects with a
// ControlError whose status says why: 404 no such listener or backend, 400 an
// ambiguous request, 409 a backend added twice. Values are checked by the caller.
//
//   drain({ backend, listener })            no new traffic; open connections finish
//   disable({ backend, listener })          an operator's "down"; probes pause
//   enable({ backend, listener })           back to its health state
//   weight({ backend, listener, value })    a new weight, 0 to 1000
//   add({ spec, listener })                 spec as parseBackend() returns it
//   remove({ backend, listener })           as if dropped from DNS: drains, then goes
//   fault({ backend, listener, fault })     a fault on its traffic (upstream/fault.js;
//                                           fault as parseFaultSettings() returns it)
//   clearFault({ backend, listener })       its fault ends now
//   restartApp({ listener })                lila run: a rolling restart of the app (of
//                                           each listener that runs one, without listener)
//   maintenance({ listener, route, page })  503 with a page for every request (but
//                                           --maintenance-allow's clients); page: a
//                                           file, read now, or null (the 503
//                                           --error-page, else lila's words)
//   endMaintenance({ listener, route })     served again
//   canary({ listener, route, share })      a new share (0 to 100) of new clients for
//                                           the --canary beside a pool
//
// `backend` is an address as in /status.json ("10.0.0.1:80", "[::1]:80"; for remove,
// a name:port as given is accepted too, removing every address of it); `listener`
// (optional while there is one listener, or while the backend is in only one) is a
// listener's name, its address or its port; `route` (optional while the backend is in
// one pool) a route's name (--route): its pool rather than the listener's own, which is
// meant without it when the address is in both.
function createControl (lb) {
  function listenersFor (qualifier) {
    if (qualifier === undefined || qualifier === null || qualifier === '') return lb.listeners
    const found = lb.listeners.filter(l => l.name === qualifier || l.bound === qualifier || portOf(l) === qualifier)
    if (found.length === 0) {
      const names = lb.listeners.map(l => l.name).join(', ')
      throw new ControlError(404, `no listener ${JSON.stringify(qualifier)}: expected one of ${names} (or its port)`)
    }
    return found
  }

  // The pools of those listeners: each one's own backends and its routes' (--route);
  // with `route`, that route's only. -> [{ listener, upstream, where }]
  function poolsFor (qualifier, route) {
    const pools = []
    for (const listener of listenersFor(qualifier)) {
      if (route === undefined || route === null || route === '') {
        pools.push({ listener, upstream: listener.upstream, where: listener.name })
      }
      for (const r of listener.routes || []) {
        if (route && r.name !== route) continue
        pools.push({ listener, upstream: r.upstream, where: `${listener.name} route ${r.name}` })
      }
    }
    if (route && pools.length === 0) {
      const names = listenersFor(qualifier).flatMap(l => (l.routes || []).map(r => r.name))
      const expected = names.length === 0 ? 'no listener has routes' : `expected one of ${names.join(', ')}`
      throw new ControlError(404, `no route ${JSON.stringify(route)}: ${expected}`)
    }
    return pools
  }

  // One pool, or why not: several without a qualifier to choose (400). `hits` are all
  // listeners' own pools, or all routes' (a listener's own is preferred: see locate).
  function onePool (hits, address) {
    if (hits.length > 1) {
      const own = hits[0].upstream === hits[0].listener.upstream
      const names = hits.map(h => own ? h.listener.name : h.where).join(', ')
      const message = own
        ? `backend ${address} is in ${hits.length} listeners (${names}): say which with ?listener=NAME`
        : `backend ${address} is in ${hits.length} routes (${names}): say which with ?route=NAME`
      throw new ControlError(400, message)
    }
    return hits[0]
  }

  // -> { listener, upstream, backend }
  function locate ({ backend: address, listener: qualifier, route }) {
    const hits = []
    for (const pool of poolsFor(qualifier, route)) {
      const backend = pool.upstream.find(address)
      if (backend !== null) hits.push({ ...pool, backend })
    }
    if (hits.length === 0) {
      const scope = [qualifier && `listener ${qualifier}`, route && `route ${route}`].filter(Boolean)
      const where = scope.length ? ` in ${scope.join(' ')}` : ''
      const message = `no backend ${JSON.stringify(address)}${where}: expected an address listed in /status.json`
      throw new ControlError(404, message)
    }
    // Without ?route, a listener's own backend is meant before a route's of the same address.
    const own = hits.filter(h => h.upstream === h.listener.upstream)
    return onePool(own.length > 0 ? own : hits, address)
  }

  // The HTTP listeners (or the one named) and, with `route`, that route of theirs ->
  // [{ listener, name (the route's, or null), where }]: where maintenance applies.
  function maintained (qualifier, route) {
    const listeners = listenersFor(qualifier).filter(l => l.protocol.name !== 'tcp')
    if (listeners.length === 0) {
      throw new ControlError(400, 'maintenance answers HTTP requests: expected an http or grpc listener')
    }
    if (!route) return listeners.map(listener => ({ listener, name: null, where: `listener ${listener.name}` }))
    const found = listeners.filter(l => l.routes.some(r => r.name === route))
    if (found.length === 0) throw new ControlError(404, `no route ${JSON.stringify(route)}: ${routeNames(listeners)}`)
    return found.map(listener => ({ listener, name: route, where: `${listener.name} route ${route}` }))
  }

  // The one pool with a --canary that the qualifiers name -> { canary, where }. Without
  // ?route, a listener's own canary is meant before a route's.
  function canaryOf (qualifier, route) {
    const own = []
    const routes = []
    for (const listener of listenersFor(qualifier)) {
      for (const name of [null, ...listener.routes.map(r => r.name)]) {
        const canary = listener.canaries.get(name)
        if (canary === null || (route && name !== route)) continue
        const where = name === null ? `listener ${listener.name}` : `${listener.name} route ${name}`
        ;(name === null ? own : routes).push({ canary, where })
      }
    }
    const found = !route && own.length > 0 ? own : routes
    if (found.length === 0) {
      const scope = [qualifier && `listener ${qualifier}`, route && `route ${route}`].filter(Boolean).join(' ')
      throw new ControlError(404, `no --canary${scope ? ` in ${scope}` : ''}: expected a pool that has one`)
    }
    if (found.length > 1) {
      throw new ControlError(400, `there are ${found.length} canaries (${found.map(f => f.where).join(', ')}): ` +
        'say which with ?listener=NAME or ?route=NAME')
    }
    return found[0]
  }

  const done = (backends, what = null) => {
    const line = b => `${b.address} ${what || b.status}${what === null && b.reason ? `: ${b.reason}` : ''}`
    return { message: backends.map(line).join('; '), backends: backends.map(b => b.snapshot()) }
  }

  return {
    async drain (request) {
      const { upstream, backend } = locate(request)
      upstream.drain(backend)
      return done([backend])
    },
    async disable (request) {
      const { upstream, backend } = locate(request)
      upstream.disable(backend)
      return done([backend])
    },
    async enable (request) {
      const { upstream, backend } = locate(request)
      await upstream.enable(backend)
      return done([backend])
    },
    async weight (request) {
      const { upstream, backend } = locate(request)
      const was = backend.weight
      upstream.setWeight(backend, request.value)
      return done([backend], `weight ${backend.weight} (was ${was})`)
    },
    async fault (request) {
      const { upstream, backend } = locate(request)
      const fault = upstream.setFault(backend, request.fault)
      const snapshot = backend.snapshot()
      const message = `${backend.address} fault: ${describeFault(snapshot.fault, fault.startedAt)}`
      return { message, backends: [snapshot] }
    },
    async clearFault (request) {
      const { upstream, backend } = locate(request)
      const cleared = upstream.clearFault(backend)
      const message = `${backend.address} ${cleared ? 'fault cleared' : 'had no fault'}`
      return { message, backends: [backend.snapshot()] }
    },
    async maintenance ({ listener: qualifier, route, page = null }) {
      const targets = maintained(qualifier, route)
      let read = null
      try {
        if (page !== null) read = readPage(page, undefined, 'page')
      } catch (err) {
        if (err instanceof UsageError) throw new ControlError(400, err.message)
        throw err
      }
      for (const { listener, name } of targets) listener.maintenance.set(name, read)
      const with_ = page === null ? '' : ` (page ${page})`
      return { message: `${targets.map(t => t.where).join(', ')}: under maintenance${with_}`, backends: [] }
    },
    async endMaintenance ({ listener: qualifier, route }) {
      const lines = maintained(qualifier, route).map(({ listener, name, where }) =>
        `${where}: ${listener.maintenance.clear(name) ? 'served again' : 'was not under maintenance'}`)
      return { message: lines.join('; '), backends: [] }
    },
    async canary ({ listener: qualifier, route, share }) {
      const { canary, where } = canaryOf(qualifier, route)
      const was = canary.setShare(share)
      return { message: `${where}: canary share ${share}% (was ${was}%); clients with a side keep it`, backends: [] }
    },
    async add ({ spec, listener: qualifier, route }) {
      const listeners = listenersFor(qualifier)
      if (listeners.length > 1) {
        const names = listeners.map(l => l.name).join(', ')
        throw new ControlError(400, `there are ${listeners.length} listeners (${names}): say which with ?listener=NAME`)
      }
      // To the listener's own backends, or with ?route=NAME to that route's.
      const [pool] = route ? poolsFor(qualifier, route) : [{ upstream: listeners[0].upstream }]
      if (spec.path !== undefined && listeners[0].backendTls !== null) {
        throw new ControlError(400, `cannot add ${specAddress(spec)} to listener ${listeners[0].name}: ` +
          'it speaks TLS to its backends (--backend-tls), and lila does so to TCP backends only')
      }
      let backends
      try {
        backends = await pool.upstream.addBackend(spec)
      } catch (err) {
        if (err instanceof ConflictError) throw new ControlError(409, err.message)
        throw err
      }
      if (backends.length === 0) {
        const none = spec.range !== undefined ? 'no port of it listens yet' : 'it resolves to no address yet'
        return { message: `added ${specAddress(spec)}: ${none}`, backends: [] }
      }
      const result = done(backends)
      return { ...result, message: `added ${result.message}` }
    },
    // lila run: resolves once the rolling restart is over, with its line.
    async restartApp ({ listener: qualifier }) {
      const running = listenersFor(qualifier).filter(listener => lb.apps.of(listener) !== null)
      if (running.length === 0) {
        throw new ControlError(404, 'no listener runs an app: expected lila run \'CMD\' (or "run" in the config file)')
      }
      const roll = listener => lb.apps.of(listener).roll('control', 'POST /app/restart')
      const lines = await Promise.all(running.map(roll))
      return { message: lines.join('; '), backends: [] }
    },
    async remove ({ backend: address, listener: qualifier, route }) {
      const hits = poolsFor(qualifier, route).filter(pool => pool.upstream.given(address))
      if (hits.length === 0) {
        const message = `no backend given as ${JSON.stringify(address)}: ` +
          'expected an address or name:port as given on the command line or added'
        throw new ControlError(404, message)
      }
      const own = hits.filter(h => h.upstream === h.listener.upstream)
      const removed = onePool(own.length > 0 ? own : hits, address).upstream.removeBackend(address)
      const left = b => b.live > 0 ? `; ${b.live} connection${b.live === 1 ? '' : 's'} left to finish` : ''
      const list = removed.map(b => b.address + left(b)).join(', ')
      // A name or a port range: what it was, then the backends it had.
      const one = removed.length === 1 && removed[0].address === address
      return {
        message: one ? `removed ${list}` : `removed ${address}${removed.length > 0 ? ` (${list})` : ''}`,
        backends: removed.map(b => b.snapshot())
      }
    }
  }
}

const OPS = ['drain', 'enable', 'disable', 'weight', 'add', 'remove', 'fault', 'clearFault', 'restartApp',
  'maintenance', 'endMaintenance', 'canary']

// The same functions made from one that takes { op, ...request }: for a process that
// passes actions on rather than doing them (the --workers primary, over IPC).
function controlFrom (perform) {
  const control = {}
  for (const op of OPS) control[op] = request => perform({ op, ...request })
  return control
}

function routeNames (listeners) {
  const names = listeners.flatMap(l => l.routes.map(r => r.name))
  return names.length === 0 ? 'no listener has routes' : `expected one of ${names.join(', ')}`
}

function portOf (listener) {
  const address = listener.server.address()
  return address && typeof address === 'object' ? String(address.port) : null // a string on a Unix socket
}

module.exports = { createControl, controlFrom, OPS }
