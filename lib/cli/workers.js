'use strict'

const { createLogger } = require('../log')
const { viaToken } = require('../proxy/via')
const { Provisions } = require('../balancer/provisions')
const { onSignals } = require('./signals')
const { logReloaded, logRefused } = require('./reload-log')
const { UsageError } = require('../errors')
const { WorkerSlots, REPLY_TIMEOUT_MS } = require('./worker-slots')
const { sameAddress } = require('../config/changes')
const { removeStaleSocket } = require('../net/socket-file')
const { workerCount } = require('./service-parts')
const { unixPath } = require('../address')

// All cores (--workers N|auto), the primary's side (worker.js is the workers'): a
// primary process forks N workers with Node's cluster module; each worker runs every
// listener and accepts on the shared sockets itself. The primary serves no traffic:
// it starts workers,
// starts another when one dies (after a back-off), reloads on SIGHUP, and on SIGTERM
// or SIGINT lets every worker drain, then exits 0.
//
//   new Primary(config, io).run() -> Promise of the exit code   (in the primary; runPrimary)
//   runWorker(io)          -> Promise of the exit code   (in a worker: worker.js)
//
// A worker re-runs the same file (the single `lila`, or lib/bin.js) and gets its config
// from the primary over IPC rather than from argv, so that a worker started after a
// reload runs the config in force. IPC messages are plain objects { lila: type, ... }:
//   primary -> worker  config { config, index, via, table, workers, certificates, sockets },
//                      reload { id, config }, stats { id }, control { id, action },
//                      certificates { id, updates }, sockets { id }, stop { handOver },
//                      destroy
//   worker -> primary  ready, listening { lines }, failed { code, message },
//                      socket { id, role, name, protocol, host, port } with the
//                      listening socket's handle (for an upgrade: the primary holds none),
//                      reply { id, value } | { id, error: { code, message, status } }
// Sockets the process was given (systemd, an upgrade: `given`, name -> socket) are
// descriptors of the primary's, which the workers listen on through cluster. Once every
// worker is gone at the same time, cluster has closed them: lila stops rather than
// serve without them.
// (an error crosses as plain data and is made again as its class: errors.js fromPlain)
// The primary answers the status listener with gatherStats() (the workers' snapshots
// summed, the shape of lb.stats(), plus `workers`) and passes control actions on with
// broadcast(action): what it asks its workers is worker-slots.js's.
// Certificates lila gets itself (--tls local|acme) are the primary's: it alone writes
// the state folder and speaks ACME (tls/keeper.js), and sends each worker what it
// serves (proxy/tls.js Certificates updates): all of them with its config, then each
// change as it comes; a challenge counts as answered once every worker has it.

const FIRST_BACKOFF_MS = 100
const MAX_BACKOFF_MS = 30000
const STABLE_MS = 30000 // a worker up this long resets the back-off

// Remove the stale socket files of the Unix socket listeners (bind.js) but those of
// `running` listeners (in use: by our own workers).
function removeStaleSockets (listeners, running = []) {
  const inUse = new Set(running.map(l => l.host))
  const paths = listeners.filter(l => !inUse.has(l.host)).map(l => unixPath(l.host)).filter(path => path !== null)
  return Promise.all(paths.map(removeStaleSocket))
}

// The --workers primary (cli/primary.js runs it, with the status listener over it):
// its workers' slots, started, restarted with a back-off, reloaded, stopped; what it
// reads and keeps for them is its Provisions' (balancer/provisions.js), as a
// Balancer's is.
// io: { stderr, signals, cluster, reloadConfig (-> config; throws UsageError),
//       exec, args, execArgv (what the workers run; by default this process's own),
//       given, givenRedirects (Map listener name -> a socket given to the process for
//       it, or for its --redirect-http: inherited.js),
//       upgrade (SIGUSR2, or null), onFailed(message) (why a worker could not start),
//       onListening() -> false to stop (before the listening lines: the PID file),
//       onReady({ gatherStats, broadcast, sockets, handOver }) once every worker listens,
//       prepareReload(next) -> apply(): what the primary itself reads for a reload (the
//       status listener's htpasswd file), checked before the workers are told (a
//       UsageError refuses the reload), applied once they took it }
class Primary {
  constructor (config, io) {
    const {
      stderr, signals = process, cluster = require('cluster'), reloadConfig = null, onReady = () => {},
      upgrade = null, onFailed = () => {}, onListening = () => true, prepareReload = () => () => {}
    } = io
    this.io = { signals, reloadConfig, onReady, upgrade, onFailed, onListening, prepareReload }
    this.cluster = cluster
    this.settings = { silent: false } // what cluster forks
    if (io.exec) this.settings.exec = io.exec
    if (io.args) this.settings.args = io.args
    if (io.execArgv) this.settings.execArgv = io.execArgv
    this.given = new Map(io.given || [])
    this.givenRedirects = new Map(io.givenRedirects || [])
    this.log = createLogger({ level: config.logLevel, stderr })
    this.count = workerCount(config.workers)
    this.via = viaToken()
    this.current = config
    this.starting = true
    this.stopping = false
    this.handingOver = false
    this.startLines = [] // the first worker's listening lines
    this.failure = null // the exit code of a worker that could not start
    this.resolve = null // run()'s, once
    this.signalsHandle = null
    this.slots = new WorkerSlots(this.count, this.log)
    this.provisions = new Provisions({ log: this.log, publish: update => this.slots.tell(update) })
  }

  // -> Promise of the exit code.
  run () {
    const { cluster } = this
    // Workers accept on the shared socket themselves (SCHED_NONE) rather than the primary
    // accepting and handing connections out (round-robin): a connection in transit to a
    // worker that is killed would otherwise stay open, unanswered, in the primary.
    cluster.schedulingPolicy = cluster.SCHED_NONE
    cluster.setupPrimary(this.settings)
    // Certificates lila makes or gets: made or loaded before any worker starts (a state
    // folder that cannot be used stops lila here, exit 2); the workers are sent them.
    try {
      this.provisions.startKeeper(this.current)
    } catch (err) {
      if (!(err instanceof UsageError)) throw err
      this.log.error(err.message)
      return Promise.resolve(2)
    }
    return new Promise(resolve => {
      this.resolve = resolve
      const { signals, reloadConfig, upgrade } = this.io
      this.signalsHandle = onSignals(signals, this.log, {
        stop: name => {
          const timeout = this.current.shutdownTimeout / 1000
          this.log.info(`${name}: stopping ${this.count} workers; letting open connections finish (up to ${timeout}s)`)
          this.stopAll('stop', this.handingOver)
        },
        destroy: () => this.stopAll('destroy'),
        // While starting, SIGHUP is ignored; once stopping (a worker failed), too.
        reload: reloadConfig === null ? null : () => this.starting || this.stopping ? null : this.reload(),
        upgrade
      })
      // Socket files left by a lila that died go before the workers bind: each worker
      // removing them itself would race the others.
      removeStaleSockets(this.current.listeners).then(() => {
        if (!this.stopping) for (const slot of this.slots.all) this.fork(slot)
      })
    })
  }

  finish () {
    if (this.resolve === null) return
    const resolve = this.resolve
    this.resolve = null
    this.signalsHandle.off()
    resolve(this.failure !== null ? this.failure : this.slots.all.some(s => s.exitCode) ? 1 : 0)
  }

  fork (slot) {
    slot.timer = null
    const worker = this.cluster.fork({ LILA_WORKER: String(slot.index) })
    this.slots.forked(slot, worker)
    slot.listeningAt = 0
    worker.on('message', (message, handle) => this.onMessage(slot, worker, message, handle))
    worker.on('exit', (code, signal) => this.onExit(slot, worker, code, signal))
    worker.on('error', () => {}) // an IPC send to a dying worker; 'exit' follows
  }

  onMessage (slot, worker, message, handle) {
    if (worker !== slot.worker || message === null || typeof message !== 'object') return
    if (this.slots.received(slot, message, handle)) return // answers to what it was asked
    switch (message.lila) {
      case 'ready':
        if (this.stopping) {
          this.slots.send(slot, { lila: 'destroy' })
        } else {
          this.slots.configure(slot, {
            lila: 'config',
            config: this.current,
            index: slot.index,
            via: this.via,
            table: slot.index === 1,
            workers: this.count,
            certificates: this.provisions.updates(),
            sockets: Object.fromEntries(this.given),
            redirectSockets: Object.fromEntries(this.givenRedirects)
          })
        }
        break
      case 'listening':
        this.slots.listening(slot)
        slot.listeningAt = Date.now()
        if (this.starting) {
          if (slot.index === 1) this.startLines = message.lines // the workers run the same listeners
          if (this.slots.all.every(s => s.listening)) this.started()
        } else {
          this.log.info(`worker ${slot.index} is back (pid ${slot.pid})`)
        }
        break
      case 'failed':
        slot.failedCode = message.code
        if (this.starting) this.io.onFailed(message.message)
        break
    }
  }

  started () {
    this.starting = false
    if (!this.io.onListening()) {
      this.failure = 1
      return this.stopAll('stop')
    }
    for (const line of this.startLines) this.log.always(line)
    this.log.info(`workers: ${this.slots.all.map(s => `${s.index} (pid ${s.pid})`).join(', ')}`)
    this.provisions.beginKeeper() // ACME's TLS-ALPN-01 needs the workers listening
    const { slots } = this
    this.io.onReady({
      gatherStats: options => slots.gatherStats(options),
      broadcast: (action, options) => slots.broadcast(action, options),
      sockets: () => slots.sockets(),
      handOver: () => this.handOver()
    })
  }

  onExit (slot, worker, code, signal) {
    if (worker !== slot.worker) return
    const { log } = this
    const slots = this.slots.all
    this.slots.exited(slot)
    const how = signal ? `was killed by ${signal}` : `exited with code ${code}`
    if (this.starting && !this.stopping) {
      // A worker that cannot start (a port taken, a certificate unreadable) will not
      // do better the next time: stop them all, with its exit code.
      if (!slot.failedCode) log.error(`worker ${slot.index} ${how} while starting`)
      this.failure = slot.failedCode || 1
      this.stopAll('destroy')
    }
    if (this.stopping) {
      slot.exitCode = signal ? 1 : code
      if (slots.every(s => s.worker === null)) {
        if (this.failure === null) log.info('stopped')
        this.finish()
      }
      return
    }
    if (this.given.size + this.givenRedirects.size > 0 && slots.every(s => s.worker === null)) {
      log.error(`worker ${slot.index} (pid ${slot.pid}) ${how}, the last of them: the sockets lila was given ` +
        '(by systemd or the lila before) went with them and cannot be listened on again; stopping')
      this.failure = 1
      return this.stopAll('destroy')
    }
    if (slot.listeningAt > 0 && Date.now() - slot.listeningAt > STABLE_MS) slot.failures = 0
    const delay = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** slot.failures)
    slot.failures++
    const wait = delay < 1000 ? `${delay}ms` : `${delay / 1000}s`
    log.warn(`worker ${slot.index} (pid ${slot.pid}) ${how}; starting another in ${wait}`)
    slot.timer = setTimeout(() => this.fork(slot), delay)
  }

  stopAll (type, handOver = false) {
    this.stopping = true
    this.provisions.closeKeeper()
    for (const slot of this.slots.all) {
      clearTimeout(slot.timer)
      slot.timer = null
      this.slots.send(slot, { lila: type, handOver })
    }
    if (this.slots.all.every(s => s.worker === null && s.timer === null)) this.finish()
  }

  // A new lila took over: the workers stop accepting and drain, leaving socket files.
  handOver () {
    this.handingOver = true
    this.signalsHandle.stop('handed over')
  }

  // SIGHUP: the file is read and checked here, once; the workers get the result.
  async reload () {
    const { log, provisions } = this
    let next
    let applied
    try {
      next = this.io.reloadConfig()
      provisions.materialOf(next) // read here, once: a file that cannot be used refuses the reload
      applied = this.io.prepareReload(next)
    } catch (err) {
      if (!(err instanceof UsageError)) throw err
      logRefused(log, err.message)
      return
    }
    await removeStaleSockets(next.listeners, this.current.listeners)
    // New certificates reach the workers before the config that asks for them.
    let keeperLines
    try {
      keeperLines = await provisions.reloadKeeper(next)
    } catch (err) {
      if (!(err instanceof UsageError)) throw err
      logRefused(log, err.message)
      return
    }
    // A worker started from now on gets the new config; those running are told. A
    // socket given for a listener the reload replaces or removes is not listened on again.
    const previous = this.current
    this.current = next
    for (const name of [...this.given.keys()]) {
      const before = previous.listeners.find(l => l.name === name)
      if (!next.listeners.some(l => l.name === name && sameAddress(l, before))) this.given.delete(name)
    }
    for (const name of [...this.givenRedirects.keys()]) {
      const before = previous.listeners.find(l => l.name === name)
      const same = l => l.name === name && l.host === before.host && l.redirectHttp === before.redirectHttp
      if (!next.listeners.some(same)) this.givenRedirects.delete(name)
    }
    const timeout = Math.max(REPLY_TIMEOUT_MS, next.shutdownTimeout)
    const results = await this.slots.askAll({ lila: 'reload', config: next }, timeout)
    const failed = results.filter(r => r.error !== undefined)
    const done = results.find(r => r.error === undefined)
    if (done === undefined) {
      this.current = previous
      logRefused(log, failed[0] ? failed[0].error.message : 'no worker running')
      return
    }
    const failures = failed.map(({ index, error }) => `worker ${index}: ${error.message}`)
    applied()
    logReloaded(log, { lines: [...done.value, ...keeperLines], logLevel: next.logLevel, failures })
    provisions.beginKeeper() // the workers listen on the new config's listeners
  }
}

const runPrimary = (config, io) => new Primary(config, io).run()

module.exports = { runPrimary }
