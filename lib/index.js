'use strict'

const crypto = require('crypto')
const { Upstream } = require('./upstream')
const { Listener } = require('./listener')
const { TcpSession } = require('./tcp')
const { createHttpListener } = require('./http/listener')
const { silentLogger } = require('./log')

// The programmatic API: a normalised config (see config.js) in, running listeners out.
//   const lb = createBalancer(config, { log })
//   const addresses = await lb.listen()   // ['127.0.0.1:4444', ...]
//   lb.stats()                            // a fresh plain snapshot
//   await lb.close()                      // graceful: drains up to shutdownTimeout
function createBalancer (config, { log = silentLogger, via = `lila-${crypto.randomBytes(4).toString('hex')}` } = {}) {
  const listeners = config.listeners.map(listenerConfig => {
    const upstream = new Upstream({ mode: listenerConfig.mode, backends: listenerConfig.backends })
    for (const backend of upstream.backends) {
      backend.on('down', reason => log.warn(`backend ${backend.address} down: ${reason}`))
      backend.on('up', reason => log.info(`backend ${backend.address} up: ${reason}`))
    }
    if (listenerConfig.protocol === 'http') return createHttpListener({ config: listenerConfig, upstream, log, via })
    return new Listener({ config: listenerConfig, upstream, log, protocol: 'tcp', Session: TcpSession })
  })

  async function listen () {
    const addresses = []
    try {
      for (const listener of listeners) addresses.push(await listener.listen())
    } catch (err) {
      await close(0)
      throw err
    }
    return addresses
  }

  function close (timeout = config.shutdownTimeout) {
    return Promise.all(listeners.map(listener => listener.close(timeout))).then(() => {})
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
