'use strict'

const crypto = require('crypto')
const { Upstream } = require('./upstream')
const { Listener } = require('./listener')
const { TcpSession } = require('./tcp')
const { createHttpListener } = require('./http/listener')
const { silentLogger } = require('./log')
const { createControl, OPS } = require('./control')
const { ControlError } = require('./errors')

// The programmatic API: a normalised config (see config.js) in, running listeners out.
//   const lb = createBalancer(config, { log })
//   const addresses = await lb.listen()   // ['127.0.0.1:4444', ...]
//   lb.stats()                            // a fresh plain snapshot
//   await lb.close()                      // graceful: drains up to shutdownTimeout
// `now` (a clock) and `resolve` (name -> Promise of addresses) replace Date.now and DNS,
// for tests. `via` is this lila's token in HTTP Via headers (loop detection).
// `accessLog` (access-log.js) writes a line per connection or request; null: none.
// One factory per protocol, each making a Listener (listener.js) from
// { config, upstream, log, via }.
const LISTENERS = {
  tcp: ({ config, upstream, log }) => new Listener({ config, upstream, log, protocol: 'tcp', Session: TcpSession }),
  http: createHttpListener
}

function createBalancer (config, { log = silentLogger, now = Date.now, resolve = null, via = `lila-${crypto.randomBytes(4).toString('hex')}`, accessLog = null } = {}) {
  const startedAt = now()
  const listeners = config.listeners.map(listenerConfig => {
    const upstream = new Upstream(listenerConfig, { now, log, resolve })
    const listener = LISTENERS[listenerConfig.protocol]({ config: listenerConfig, upstream, log, via })
    listener.accessLog = accessLog
    return listener
  })

  // Bind every listener (so that a taken port fails at once), then resolve names and
  // check every backend once, printing what was found, then serve. Clients that connect
  // meanwhile wait unread.
  async function listen () {
    const addresses = []
    try {
      for (const listener of listeners) addresses.push(await listener.listen())
      await Promise.all(listeners.map(listener => listener.upstream.start()))
      for (const listener of listeners) listener.open()
    } catch (err) {
      await close(0)
      throw err
    }
    return addresses
  }

  function close (timeout = config.shutdownTimeout) {
    return Promise.all(listeners.map(listener => {
      listener.upstream.close()
      return listener.close(timeout)
    })).then(() => {})
  }

  function destroy () {
    for (const listener of listeners) listener.destroy()
  }

  // A fresh plain snapshot (README: "Status, metrics and control"). HTTP backends add
  // their keep-alive pool: { sockets, idle, connects, reuses }.
  function stats () {
    return {
      startedAt,
      listeners: listeners.map(listener => ({
        ...listener.snapshot(),
        backends: listener.poolSnapshot === undefined
          ? listener.upstream.snapshot()
          : listener.upstream.all().map(b => ({ ...b.snapshot(), pool: listener.poolSnapshot(b) }))
      }))
    }
  }

  // One control action, { op, ...request } (control.js), e.g. from the --workers
  // primary: { op: 'drain', backend: '10.0.0.1:80' }. A promise of { message, backends }.
  let controls = null
  function control ({ op, ...request }) {
    controls ||= createControl({ get listeners () { return listeners } })
    if (!OPS.includes(op)) return Promise.reject(new ControlError(400, `unknown control action ${JSON.stringify(op)}: expected one of ${OPS.join(', ')}`))
    return controls[op](request)
  }

  return { listen, close, destroy, stats, control, listeners }
}

module.exports = { createBalancer }
