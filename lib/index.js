'use strict'

const { Upstream } = require('./upstream')
const { TcpListener } = require('./tcp')
const { silentLogger } = require('./log')

// The programmatic API: a normalised config (see config.js) in, running listeners out.
//   const lb = createBalancer(config, { log })
//   const addresses = await lb.listen()   // ['127.0.0.1:4444', ...]
//   lb.stats()                            // a fresh plain snapshot
//   await lb.close()                      // graceful: drains up to shutdownTimeout
// `now` (a clock) and `resolve` (name -> Promise of addresses) replace Date.now and DNS,
// for tests.
// One listener class per protocol, each constructed with { config, upstream, log } and
// offering listen() -> Promise<address> (bind), open() (serve: the backends have been
// checked), close(timeout) -> Promise (drain), destroy(), snapshot() -> plain object.
const LISTENERS = { tcp: TcpListener }

function createBalancer (config, { log = silentLogger, now = Date.now, resolve = null } = {}) {
  const listeners = config.listeners.map(listenerConfig => {
    const upstream = new Upstream(listenerConfig, { now, log, resolve })
    const Listener = LISTENERS[listenerConfig.protocol]
    return new Listener({ config: listenerConfig, upstream, log })
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

  function stats () {
    return {
      listeners: listeners.map(listener => ({
        ...listener.snapshot(),
        backends: listener.upstream.snapshot()
      }))
    }
  }

  return { listen, close, destroy, stats, listeners }
}

module.exports = { createBalancer }
