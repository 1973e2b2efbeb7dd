'use strict'

const { ControlError, ConflictError } = require('../errors')
const { specAddress } = require('../address')
const { describeFault } = require('../format')

// Runtime control of one balancer's backends, for the status listener and the
// dashboard: the functions status.js is given, over the listeners of one process.
// (With several worker processes, the primary gives status.js functions that ask
// every worker to do the same.)
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
//
// `backend` is an address as in /status.json ("10.0.0.1:80", "[::1]:80"; for remove,
// a name:port as given is accepted too, removing every address of it); `listener`
// (optional while there is one listener, or while the backend is in only one) is a
// listener's name, its address or its port.
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

  // -> { listener, upstream, backend }
  function locate ({ backend: address, listener: qualifier }) {
    const hits = []
    for (const listener of listenersFor(qualifier)) {
      const backend = listener.upstream.find(address)
      if (backend !== null) hits.push({ listener, upstream: listener.upstream, backend })
    }
    if (hits.length === 0) {
      const where = qualifier ? ` in listener ${qualifier}` : ''
      const message = `no backend ${JSON.stringify(address)}${where}: expected an address listed in /status.json`
      throw new ControlError(404, message)
    }
    if (hits.length > 1) {
      const names = hits.map(h => h.listener.name).join(', ')
      const message = `backend ${address} is in ${hits.length} listeners (${names}): say which with ?listener=NAME`
      throw new ControlError(400, message)
    }
    return hits[0]
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
    async add ({ spec, listener: qualifier }) {
      const listeners = listenersFor(qualifier)
      if (listeners.length > 1) {
        const names = listeners.map(l => l.name).join(', ')
        throw new ControlError(400, `there are ${listeners.length} listeners (${names}): say which with ?listener=NAME`)
      }
      if (spec.path !== undefined && listeners[0].backendTls !== null) {
        throw new ControlError(400, `cannot add ${specAddress(spec)} to listener ${listeners[0].name}: ` +
          'it speaks TLS to its backends (--backend-tls), and lila does so to TCP backends only')
      }
      let backends
      try {
        backends = await listeners[0].upstream.addBackend(spec)
      } catch (err) {
        if (err instanceof ConflictError) throw new ControlError(409, err.message)
        throw err
      }
      if (backends.length === 0) {
        return { message: `added ${specAddress(spec)}: it resolves to no address yet`, backends: [] }
      }
      const result = done(backends)
      return { ...result, message: `added ${result.message}` }
    },
    async remove ({ backend: address, listener: qualifier }) {
      const hits = listenersFor(qualifier).filter(l => l.upstream.given(address))
      if (hits.length === 0) {
        const message = `no backend given as ${JSON.stringify(address)}: ` +
          'expected an address or name:port as given on the command line or added'
        throw new ControlError(404, message)
      }
      if (hits.length > 1) {
        const names = hits.map(l => l.name).join(', ')
        const message = `backend ${address} is in ${hits.length} listeners (${names}): say which with ?listener=NAME`
        throw new ControlError(400, message)
      }
      const removed = hits[0].upstream.removeBackend(address)
      const left = b => b.live > 0 ? `; ${b.live} connection${b.live === 1 ? '' : 's'} left to finish` : ''
      return {
        message: removed.length === 0
          ? `removed ${address}`
          : `removed ${removed.map(b => b.address + left(b)).join(', ')}`,
        backends: removed.map(b => b.snapshot())
      }
    }
  }
}

const OPS = ['drain', 'enable', 'disable', 'weight', 'add', 'remove', 'fault', 'clearFault']

// The same functions made from one that takes { op, ...request }: for a process that
// passes actions on rather than doing them (the --workers primary, over IPC).
function controlFrom (perform) {
  const control = {}
  for (const op of OPS) control[op] = request => perform({ op, ...request })
  return control
}

function portOf (listener) {
  const address = listener.server.address()
  return address && typeof address === 'object' ? String(address.port) : null // a string on a Unix socket
}

module.exports = { createControl, controlFrom, OPS }
