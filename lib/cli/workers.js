'use strict'

const os = require('os')
const { createLogger } = require('../log')
const { viaToken } = require('../proxy/via')
const { Provisions } = require('../balancer/provisions')
const { onSignals } = require('./signals')
const { sumStats } = require('../admin/sum-stats')
const { logReloaded, logRefused } = require('./reload-log')
const { UsageError, UpgradeError } = require('../errors')
const { WorkerRequests } = require('./worker-requests')
const { sameAddress } = require('../config/changes')
const { removeStaleSocket } = require('../net/socket-file')
const { unixPath } = require('../address')

// All cores (--workers N|auto), the primary's side (worker.js is the workers'): a
// primary process forks N workers with Node's cluster
// module; each worker runs every listener, and the primary hands them connections in
// turn (cluster's round-robin). The primary serves no traffic: it starts workers,
// starts another when one dies (after a back-off), reloads on SIGHUP, and on SIGTERM
// or SIGINT lets every worker drain, then exits 0.
//
//   runPrimary(config, io) -> Promise of the exit code   (in the primary)
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
// broadcast(action).
// Certificates lila gets itself (--tls local|acme) are the primary's: it alone writes
// the state folder and speaks ACME (tls/keeper.js), and sends each worker what it
// serves (proxy/tls.js Certificates updates): all of them with its config, then each
// change as it comes; a challenge counts as answered once every worker has it.

const FIRST_BACKOFF_MS = 100
const MAX_BACKOFF_MS = 30000
const STABLE_MS = 30000 // a worker up this long resets the back-off
const REPLY_TIMEOUT_MS = 2000

// Remove the stale socket files of the Unix socket listeners (bind.js) but those of
// `running` listeners (in use: by our own workers).
function removeStaleSockets (listeners, running = []) {
  const inUse = new Set(running.map(l => l.host))
  const paths = listeners.filter(l => !inUse.has(l.host)).map(l => unixPath(l.host)).filter(path => path !== null)
  return Promise.all(paths.map(removeStaleSocket))
}

function workerCount (workers) {
  return workers === 'auto' ? os.availableParallelism() : workers
}

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
function runPrimary (config, io) {
  const {
    stderr, signals = process, cluster = require('cluster'), reloadConfig = null, onReady = () => {},
    upgrade = null, onFailed = () => {}, onListening = () => true, prepareReload = () => () => {}
  } = io
  const given = new Map(io.given || [])
  const givenRedirects = new Map(io.givenRedirects || [])
  const log = createLogger({ level: config.logLevel, stderr })
  const count = workerCount(config.workers)
  const via = viaToken()
  const settings = { silent: false }
  if (io.exec) settings.exec = io.exec
  if (io.args) settings.args = io.args
  if (io.execArgv) settings.execArgv = io.execArgv
  // Workers accept on the shared socket themselves (SCHED_NONE) rather than the primary
  // accepting and handing connections out (round-robin): a connection in transit to a
  // worker that is killed would otherwise stay open, unanswered, in the primary.
  cluster.schedulingPolicy = cluster.SCHED_NONE
  cluster.setupPrimary(settings)

  let current = config
  let starting = true
  let handOver = null // once running (below)
  let stopping = false
  let startLines = [] // the first worker's listening lines
  const slots = Array.from({ length: count }, (_, i) => ({
    index: i + 1,
    worker: null,
    pid: null,
    listening: false,
    listeningAt: 0,
    failures: 0,
    timer: null,
    requests: new WorkerRequests(i + 1), // asked and not yet answered
    sockets: null // while handing the listening sockets up: those received
  }))

  // Certificates lila makes or gets: made or loaded before any worker starts (a state
  // folder that cannot be used stops lila here, exit 2); the workers are sent them.
  const provisions = new Provisions({ log, publish: update => tellWorkers(update) })
  try {
    provisions.startKeeper(config)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    log.error(err.message)
    return Promise.resolve(2)
  }

  return new Promise(resolve => {
    let resolved = false
    let failure = null // the exit code of a worker that could not start
    const finish = () => {
      if (resolved) return
      resolved = true
      const code = failure !== null ? failure : slots.some(s => s.exitCode) ? 1 : 0
      handle.off()
      resolve(code)
    }

    const fork = slot => {
      slot.timer = null
      const worker = cluster.fork({ LILA_WORKER: String(slot.index) })
      slot.worker = worker
      slot.pid = worker.process.pid
      slot.listening = false
      slot.configured = false
      slot.listeningAt = 0
      worker.on('message', (message, handle) => onMessage(slot, worker, message, handle))
      worker.on('exit', (code, signal) => onExit(slot, worker, code, signal))
      worker.on('error', () => {}) // an IPC send to a dying worker; 'exit' follows
    }

    const send = (slot, message) => {
      if (slot.worker === null || !slot.worker.isConnected()) return false
      slot.worker.send(message)
      return true
    }

    const onMessage = (slot, worker, message, handle) => {
      if (worker !== slot.worker || message === null || typeof message !== 'object') return
      switch (message.lila) {
        case 'ready':
          if (stopping) {
            send(slot, { lila: 'destroy' })
          } else {
            send(slot, {
              lila: 'config',
              config: current,
              index: slot.index,
              via,
              table: slot.index === 1,
              workers: count,
              certificates: provisions.updates(),
              sockets: Object.fromEntries(given),
              redirectSockets: Object.fromEntries(givenRedirects)
            })
            slot.configured = true
          }
          break
        case 'socket': {
          const { lila, id, ...socket } = message
          if (handle && slot.sockets !== null) slot.sockets.push({ ...socket, handle })
          else if (handle) handle.close()
          break
        }
        case 'listening':
          slot.listening = true
          slot.listeningAt = Date.now()
          if (starting) {
            if (slot.index === 1) startLines = message.lines // the workers run the same listeners
            if (slots.every(s => s.listening)) started()
          } else {
            log.info(`worker ${slot.index} is back (pid ${slot.pid})`)
          }
          break
        case 'failed':
          slot.failedCode = message.code
          if (starting) onFailed(message.message)
          break
        case 'reply':
          slot.requests.answer(message)
          break
      }
    }

    const started = () => {
      starting = false
      if (!onListening()) {
        failure = 1
        return stopAll('stop')
      }
      for (const line of startLines) log.always(line)
      log.info(`workers: ${slots.map(s => `${s.index} (pid ${s.pid})`).join(', ')}`)
      provisions.beginKeeper() // ACME's TLS-ALPN-01 needs the workers listening
      onReady({ gatherStats, broadcast, sockets, handOver })
    }

    const onExit = (slot, worker, code, signal) => {
      if (worker !== slot.worker) return
      slot.worker = null
      slot.listening = false
      slot.requests.fail()
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`
      if (starting && !stopping) {
        // A worker that cannot start (a port taken, a certificate unreadable) will not
        // do better the next time: stop them all, with its exit code.
        if (!slot.failedCode) log.error(`worker ${slot.index} ${how} while starting`)
        failure = slot.failedCode || 1
        stopAll('destroy')
      }
      if (stopping) {
        slot.exitCode = signal ? 1 : code
        if (slots.every(s => s.worker === null)) {
          if (failure === null) log.info('stopped')
          finish()
        }
        return
      }
      if (given.size + givenRedirects.size > 0 && slots.every(s => s.worker === null)) {
        log.error(`worker ${slot.index} (pid ${slot.pid}) ${how}, the last of them: the sockets lila was given ` +
          '(by systemd or the lila before) went with them and cannot be listened on again; stopping')
        failure = 1
        return stopAll('destroy')
      }
      if (slot.listeningAt > 0 && Date.now() - slot.listeningAt > STABLE_MS) slot.failures = 0
      const delay = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** slot.failures)
      slot.failures++
      const wait = delay < 1000 ? `${delay}ms` : `${delay / 1000}s`
      log.warn(`worker ${slot.index} (pid ${slot.pid}) ${how}; starting another in ${wait}`)
      slot.timer = setTimeout(() => fork(slot), delay)
    }

    const stopAll = (type, handOver = false) => {
      stopping = true
      provisions.closeKeeper()
      for (const slot of slots) {
        clearTimeout(slot.timer)
        slot.timer = null
        send(slot, { lila: type, handOver })
      }
      if (slots.every(s => s.worker === null && s.timer === null)) finish()
    }

    // SIGHUP: the file is read and checked here, once; the workers get the result.
    const reload = async () => {
      let next
      let applied
      try {
        next = reloadConfig()
        provisions.materialOf(next) // read here, once: a file that cannot be used refuses the reload
        applied = prepareReload(next)
      } catch (err) {
        if (!(err instanceof UsageError)) throw err
        logRefused(log, err.message)
        return
      }
      await removeStaleSockets(next.listeners, current.listeners)
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
      const previous = current
      current = next
      for (const name of [...given.keys()]) {
        const before = previous.listeners.find(l => l.name === name)
        if (!next.listeners.some(l => l.name === name && sameAddress(l, before))) given.delete(name)
      }
      for (const name of [...givenRedirects.keys()]) {
        const before = previous.listeners.find(l => l.name === name)
        const same = l => l.name === name && l.host === before.host && l.redirectHttp === before.redirectHttp
        if (!next.listeners.some(same)) givenRedirects.delete(name)
      }
      const timeout = Math.max(REPLY_TIMEOUT_MS, next.shutdownTimeout)
      const results = await Promise.all(slots.map(slot => request(slot, { lila: 'reload', config: next }, timeout).then(
        lines => ({ slot, lines }),
        err => ({ slot, error: err.message })
      )))
      const failed = results.filter(r => r.error !== undefined)
      const done = results.find(r => r.lines !== undefined)
      if (done === undefined) {
        current = previous
        logRefused(log, failed[0] ? failed[0].error : 'no worker running')
        return
      }
      const failures = failed.map(({ slot, error }) => `worker ${slot.index}: ${error}`)
      applied()
      logReloaded(log, { lines: [...done.lines, ...keeperLines], logLevel: next.logLevel, failures })
      provisions.beginKeeper() // the workers listen on the new config's listeners
    }

    let handingOver = false
    const handle = onSignals(signals, log, {
      stop: name => {
        const timeout = current.shutdownTimeout
        log.info(`${name}: stopping ${count} workers; letting open connections finish (up to ${timeout / 1000}s)`)
        stopAll('stop', handingOver)
      },
      destroy: () => stopAll('destroy'),
      // While starting, SIGHUP is ignored; once stopping (a worker failed), too.
      reload: reloadConfig === null ? null : () => starting || stopping ? null : reload(),
      upgrade
    })
    // A new lila took over: the workers stop accepting and drain, leaving socket files.
    handOver = () => {
      handingOver = true
      handle.stop('handed over')
    }
    // Socket files left by a lila that died go before the workers bind: each worker
    // removing them itself would race the others.
    removeStaleSockets(config.listeners).then(() => {
      if (!stopping) for (const slot of slots) fork(slot)
    })
  })

  // A certificate or challenge for every worker that has its config (one still
  // starting too: its board takes it before its listeners do); resolves once each has
  // it. A worker that starts later gets provisions.updates() with its config.
  function tellWorkers (update) {
    const told = slots.filter(slot => slot.configured && slot.worker !== null && slot.worker.isConnected())
    return Promise.all(told.map(slot => request(slot, { lila: 'certificates', updates: [update] }, REPLY_TIMEOUT_MS,
      { listening: false }).catch(err => log.warn(`worker ${slot.index} did not take a certificate: ${err.message}`))))
  }

  // Ask one worker something: resolves with its reply's value, rejects on its error,
  // its exit or a timeout. `listening: false`: a worker still starting may be asked.
  function request (slot, message, timeout = REPLY_TIMEOUT_MS, { listening = true } = {}) {
    if (slot.worker === null || (listening && !slot.listening) || !slot.worker.isConnected()) {
      return Promise.reject(new Error(`worker ${slot.index} is not running`))
    }
    return slot.requests.ask(slot.worker, message, timeout)
  }

  // The listening sockets, to hand to a new lila (upgrade.js): the primary holds none of
  // its own (cluster does), so a listening worker sends its copies up. Resolves
  // [{ role, name, protocol, host, port, fd }] with release(), which closes the copies.
  async function sockets () {
    const slot = slots.find(s => s.listening && s.worker !== null)
    if (slot === undefined) throw new UpgradeError('no worker listens: there are no sockets to hand over')
    slot.sockets = []
    let received
    try {
      await request(slot, { lila: 'sockets' })
    } catch (err) {
      throw new UpgradeError(`worker ${slot.index} did not hand its sockets up: ${err.message}`)
    } finally {
      received = slot.sockets
      slot.sockets = null
    }
    const handed = received.map(({ handle, ...socket }) => ({ ...socket, fd: handle.fd }))
    handed.release = () => { for (const { handle } of received) handle.close() }
    return handed
  }

  // Every worker's snapshot, summed into one of the shape of lb.stats(), with each
  // worker's own under `workers` ({ index, pid, listeners, process } or { index, pid,
  // error }). A process's figures are its own, never summed (a sum of limits or start
  // times means nothing).
  async function gatherStats ({ timeout = REPLY_TIMEOUT_MS } = {}) {
    const replies = await Promise.all(slots.map(slot => request(slot, { lila: 'stats' }, timeout).then(
      stats => ({ index: slot.index, pid: slot.pid, ...stats }),
      err => ({ index: slot.index, pid: slot.pid, error: err.message })
    )))
    const answered = replies.filter(r => r.error === undefined).map(({ index, pid, process: own, ...stats }) => stats)
    return { ...sumStats(answered), workers: replies }
  }

  // A control action (the status listener's drain, enable, weight, ...) for every
  // worker: resolves with [{ index, pid, value } | { index, pid, error, code, status }]
  // (error: the message; code and status as the error had them).
  function broadcast (action, { timeout = REPLY_TIMEOUT_MS } = {}) {
    return Promise.all(slots.map(slot => request(slot, { lila: 'control', action }, timeout).then(
      value => ({ index: slot.index, pid: slot.pid, value }),
      err => ({ index: slot.index, pid: slot.pid, error: err.message, code: err.code, status: err.status })
    )))
  }
}

module.exports = { runPrimary, workerCount }
