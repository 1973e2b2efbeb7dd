'use strict'

const { createBalancer, listeningLines } = require('../index')
const { createLogger } = require('../log')
const { Certificates } = require('../proxy/tls')
const { Provisions } = require('../balancer/provisions')
const { processStats } = require('../admin/process-stats')
const { startTelemetry } = require('./telemetry-parts')
const { UsageError, RuntimeError, toPlain } = require('../errors')
const { handleOf } = require('../net/bind')

// --workers, a worker's side: it runs the config the primary sends it (workers.js says
// the messages between them) as a single lila would, and answers the primary.

// A worker: tell the primary it is ready, take the config it sends, serve it, answer
// its requests, and drain when told to stop (or when the primary is gone).
// io: { stderr, channel (the process), signals }
function runWorker (io) {
  const { stderr, channel = process, signals = process } = io
  return new Promise(resolve => {
    let lb = null
    let log = null
    let stopped = null
    let config = null
    let telemetry = null // --otlp (telemetry-parts.js), once started
    const certificates = new Certificates() // what the primary's keeper sends

    const send = message => { if (channel.connected) channel.send(message) }
    const reply = (id, fn) => {
      Promise.resolve().then(fn).then(
        value => send({ lila: 'reply', id, value }),
        // A control error keeps its class and HTTP status across the channel.
        err => send({ lila: 'reply', id, error: toPlain(err) })
      )
    }

    // The listening sockets, each with its handle, up to the primary (for an upgrade).
    const handUp = id => {
      const sockets = lb.sockets()
      for (const { server, fd, ...socket } of sockets) {
        if (channel.connected) channel.send({ lila: 'socket', id, ...socket }, handleOf(server))
      }
      return sockets.length
    }

    let starting = null // while the listeners bind and the backends are checked
    const stop = (destroyNow = false, handOver = false) => {
      if (starting !== null) return starting.then(() => stop(destroyNow, handOver)) // then stop
      if (lb === null) {
        cleanUp()
        return resolve(0)
      }
      if (destroyNow) lb.destroy()
      if (stopped !== null) return
      stopped = lb.close(config.shutdownTimeout, { handOver }).then(() => telemetry.close()).then(() => {
        log.debug('stopped')
        cleanUp()
        resolve(0)
      })
    }

    const start = async message => {
      config = message.config
      log = createLogger({ level: config.logLevel, stderr, prefix: `worker ${message.index}` })
      try {
        for (const update of message.certificates || []) certificates.apply(update)
        // --otlp: a worker makes spans; the primary pushes the metrics and says the warnings
        telemetry = startTelemetry(config, { log, metrics: false, say: false })
        lb = createBalancer(config, {
          log,
          via: message.via,
          table: message.table,
          provisions: new Provisions({ certificates, keeper: 'elsewhere' }),
          tracer: telemetry.tracer
        })
        const given = new Map(Object.entries(message.sockets || {}))
        const addresses = await lb.listen(given, new Map(Object.entries(message.redirectSockets || {})))
        send({ lila: 'listening', lines: listeningLines(lb, addresses, `, ${message.workers} workers`) })
      } catch (err) {
        if (!(err instanceof UsageError) && !(err instanceof RuntimeError)) throw err
        log.error(err.message)
        send({ lila: 'failed', code: err instanceof UsageError ? 2 : 1, message: err.message })
        lb = null
        cleanUp()
        resolve(err instanceof UsageError ? 2 : 1)
      }
    }

    const onMessage = message => {
      if (message === null || typeof message !== 'object') return
      switch (message.lila) {
        case 'config':
          starting = start(message).finally(() => { starting = null })
          return
        case 'stats':
          return reply(message.id, () => ({ ...telemetry.withTelemetry(lb.stats()), process: processStats() }))
        case 'reload': return reply(message.id, async () => {
          const lines = await lb.reload(message.config)
          config = message.config
          log.setLevel(config.logLevel)
          return lines
        })
        case 'control': return reply(message.id, () => lb.control(message.action))
        case 'sockets': return reply(message.id, () => handUp(message.id))
        case 'certificates': return reply(message.id, () => {
          for (const update of message.updates) certificates.apply(update)
          return true
        })
        case 'stop': return stop(false, message.handOver === true)
        case 'destroy': return stop(true)
      }
    }
    // The primary forwards SIGINT and SIGHUP (a terminal sends them to every process of
    // the group): the worker ignores its own. A SIGTERM to a worker alone drains it.
    const ignore = () => {}
    const onTerm = () => stop()
    const onDisconnect = () => stop()
    const cleanUp = () => {
      channel.off('message', onMessage)
      channel.off('disconnect', onDisconnect)
      signals.off('SIGINT', ignore)
      signals.off('SIGHUP', ignore)
      signals.off('SIGTERM', onTerm)
      if (channel.connected) channel.disconnect() // nothing keeps the worker alive then
    }
    channel.on('message', onMessage)
    channel.on('disconnect', onDisconnect)
    signals.on('SIGINT', ignore)
    signals.on('SIGHUP', ignore)
    signals.on('SIGTERM', onTerm)
    send({ lila: 'ready' })
  })
}

module.exports = { runWorker }
