'use strict'

const { parseCommandLine } = require('../config/argv')
const { parseBackend, parseFaultSettings } = require('../config/parsers')
const { UsageError, RuntimeError, ControlError, fromPlain } = require('../errors')
const VERSION = require('../version')

// What the status listener parses a backend and a fault's settings with.
const PARSERS = { parseBackend, parseFault: parseFaultSettings }

// The rest is required where it is used: `lila --version` and usage errors then load
// none of the balancer (nor net, tls, cluster, crypto...), which keeps start-up short.
const lazy = {
  get readConfigFile () { return require('../config/file').readConfigFile },
  get createLogger () { return require('../log').createLogger },
  get createBalancer () { return require('../index').createBalancer },
  get listeningLines () { return require('../index').listeningLines },
  get workers () { return require('./workers') },
  get helpText () { return require('./help').helpText },
  get completionScript () { return require('./completion').completionScript },
  get runDemo () { return require('./demo').runDemo },
  get control () { return require('../admin/control') },
  get createStatusServer () { return require('../admin/status-server').createStatusServer },
  get readPasswords () { return require('../proxy/edge/rules').readPasswords },
  get startDashboard () { return require('../admin/terminal').startDashboard },
  get reloadLog () { return require('./reload-log') },
  get signals () { return require('./signals') },
  get heap () { return require('./heap') }
}

// The command line, apart from the process: argv in, exit code out. It never calls
// process.exit; signals arrive through `signals` (the process, or an emitter in tests).
// io: { stdout, stderr, stdin, signals, env, cluster, readFile, collectIdle } (readFile:
// for the config file; collectIdle: the process is lila's own, so it may give memory
// back once traffic stops, heap.js; bin.js sets it, tests running main in-process not)
async function main (argv, io = {}) {
  const { stdout = process.stdout, stderr = process.stderr, signals = process, env = process.env } = io
  // A worker of `--workers` takes its config from the primary (workers.js).
  if (env.LILA_WORKER && require('cluster').isWorker) {
    if (io.collectIdle) lazy.heap.startIdleCollector()
    return lazy.workers.runWorker({ stderr, signals })
  }

  let parsed
  let config
  let reloadConfig = null
  try {
    parsed = parseCommandLine(argv, env)
    if (parsed.configFile !== undefined) {
      // --log-level beside --config wins over the file, at start and on every reload.
      reloadConfig = () => {
        const { configFile, environment } = parsed
        const fromFile = lazy.readConfigFile(configFile, { readFile: io.readFile, environment })
        if (parsed.logLevel !== null) fromFile.logLevel = parsed.logLevel
        return fromFile
      }
      config = reloadConfig()
    } else {
      config = parsed.config
    }
  } catch (err) {
    return usageError(err, stderr)
  }
  switch (parsed.command) {
    case 'help':
      stdout.write(lazy.helpText(stdout.columns)) // a terminal's width; undefined when not one
      return 0
    case 'version':
      stdout.write(`lila ${VERSION}\n`)
      return 0
    case 'completion':
      try {
        stdout.write(lazy.completionScript(parsed.shell))
      } catch (err) {
        return usageError(err, stderr)
      }
      return 0
    case 'demo':
      return lazy.runDemo(config, { ...io, stdout, stderr, signals }, serve)
    default:
      if (io.collectIdle) lazy.heap.startIdleCollector()
      if (lazy.workers.workerCount(config.workers) > 1) {
        return primary(config, { ...io, stderr, signals, cluster: io.cluster || require('cluster'), reloadConfig })
      }
      return serve(config, { ...io, stdout, stderr, signals, reloadConfig })
  }
}

// The --workers primary. The status listener runs here, over the workers: statistics
// summed from their snapshots, control actions sent to each of them.
async function primary (config, io) {
  const { stderr, signals, cluster, reloadConfig } = io
  const log = lazy.createLogger({ level: config.logLevel, stderr })
  // The workers write their log lines straight to stderr, which would tear the view.
  if (config.dashboard) log.warn('--dashboard does not run with --workers; running without it')
  let status = null
  let passwords
  try {
    passwords = statusPasswords(config)
  } catch (err) {
    return usageError(err, stderr)
  }
  const onReady = async ({ gatherStats, broadcast }) => {
    if (io.onWorkersReady) io.onWorkersReady({ gatherStats, broadcast })
    if (config.status === null) return
    const control = lazy.control.controlFrom(action => everyWorker(broadcast, action))
    status = lazy.createStatusServer({ ...config.status, passwords, stats: gatherStats, control, ...PARSERS, log })
    try {
      await status.listen()
    } catch (err) {
      log.error(err.message)
      signals.emit('SIGTERM')
    }
  }
  const prepareReload = next => {
    const file = statusPasswords(next)
    return () => { if (status !== null) status.setPasswords(file) }
  }
  const code = await lazy.workers.runPrimary(config, {
    stderr, signals, cluster, reloadConfig, exec: io.exec, args: io.args, onReady, prepareReload
  })
  if (status !== null) await status.close()
  return code
}

// One control action on every worker: the first worker's answer, or its error (each
// applies the same change to the same config, so they answer alike). An error that is
// not a control error (a worker gone, a timeout) is answered 500 with its message.
async function everyWorker (broadcast, action) {
  const answers = await broadcast(action)
  const done = answers.find(a => a.error === undefined)
  if (done !== undefined) return done.value
  const { error, code, status = 500 } = answers[0] || { error: 'no worker to ask' }
  const err = fromPlain({ code, message: error, status })
  throw err instanceof ControlError ? err : new ControlError(status, error)
}

// --status-basic-auth: its htpasswd file, read (a UsageError when it cannot be used), or null.
function statusPasswords (config) {
  return config.status === null || config.status.basicAuth === null ? null : lazy.readPasswords(config.status.basicAuth)
}

function usageError (err, stderr) {
  if (!(err instanceof UsageError)) throw err
  stderr.write(`lila: ${err.message}\nTry 'lila --help'.\n`)
  return 2
}

// Run the balancer until SIGTERM or SIGINT, then drain and resolve with the exit code.
// With a config file (`reloadConfig` reads it again), SIGHUP reloads it.
// `onListening(addresses, log)` runs once every listener is bound. io: { stdout,
// stderr, stdin, signals, reloadConfig, listenHint } (the process's streams by default;
// listenHint(err): what the caller adds when a listener cannot bind, or null).
async function serve (config, io, onListening = () => {}) {
  const {
    stdout = process.stdout, stderr = process.stderr, stdin = process.stdin, signals = process, reloadConfig = null,
    listenHint = () => null
  } = io
  // The logger writes through this, so the dashboard can hold its lines while it runs.
  const logOut = { target: stderr, write: text => logOut.target.write(text) }
  const log = lazy.createLogger({ level: config.logLevel, stderr: logOut })
  let lb
  let passwords
  try {
    lb = lazy.createBalancer(config, { log, stdout }) // with the access log config asks for
    passwords = statusPasswords(config)
  } catch (err) {
    return usageError(err, stderr) // a certificate or htpasswd file that cannot be read or used
  }
  let addresses
  // The status listener and the dashboard act through the balancer's own control, as
  // the --workers primary's act through the workers'.
  const control = lazy.control.controlFrom(lb.control)
  // The status listener is bound first: a taken port fails at once, in one line.
  const status = config.status === null
    ? null
    : lazy.createStatusServer({ ...config.status, passwords, stats: lb.stats, control, ...PARSERS, log })
  // Its line comes before the listening line, and a script may signal on either: a
  // SIGHUP while starting is kept for when reloads can be done, not fatal.
  const early = lazy.signals.holdSighup(signals, reloadConfig !== null)
  try {
    if (status !== null) await status.listen()
    addresses = await lb.listen().catch(err => {
      const hint = err instanceof RuntimeError ? listenHint(err) : null
      if (hint !== null) err.message += `; ${hint}`
      throw err
    })
  } catch (err) {
    early.release(false)
    if (status !== null) await status.close()
    if (!(err instanceof RuntimeError)) throw err
    log.error(err.message)
    return 1
  }
  // Signals are handled before the listening line: a script may send SIGHUP (or SIGTERM)
  // the moment it reads it, and a signal with no handler yet would kill the process.
  const prepareReload = next => {
    const file = statusPasswords(next)
    return () => { if (status !== null) status.setPasswords(file) }
  }
  const stopper = untilStopped(lb, signals, log, reloadConfig, prepareReload)
  early.release(true)
  for (const line of lazy.listeningLines(lb, addresses)) log.always(line)
  let dashboard = null
  if (config.dashboard && !stderr.isTTY) {
    log.warn('--dashboard needs a terminal on stderr; running without it')
  } else if (config.dashboard) {
    dashboard = lazy.startDashboard({
      stats: lb.stats,
      control,
      input: stdin,
      output: stderr,
      exitEvents: signals,
      version: VERSION,
      onQuit: () => {
        logOut.target = stderr
        stopper.stop('quit')
      }
    })
    logOut.target = dashboard.logSink
  }
  onListening(addresses, log) // after the dashboard took the log, so that it shows what is said here
  const code = await stopper.done
  if (dashboard !== null) {
    dashboard.stop()
    logOut.target = stderr
  }
  if (status !== null) await status.close()
  return code
}

// First SIGTERM/SIGINT (or stop(), from the dashboard's quit): stop accepting and
// drain for up to shutdownTimeout. A second one: cut every connection now. SIGHUP
// (with a config file): reload it; one reload at a time, an invalid file changes
// nothing. (signals.js)
function untilStopped (lb, signals, log, reloadConfig, prepareReload) {
  let handle
  const done = new Promise(resolve => {
    handle = lazy.signals.onSignals(signals, log, {
      stop: name => {
        const timeout = lb.config.shutdownTimeout
        const closed = lb.close(timeout)
        log.info(`${name}: stopped accepting; letting open connections finish (up to ${timeout / 1000}s)`)
        closed.then(() => {
          handle.off()
          log.info('stopped')
          resolve(0)
        })
      },
      destroy: () => lb.destroy(),
      reload: reloadConfig === null ? null : () => reload(lb, reloadConfig, log, prepareReload)
    })
  })
  return { done, stop: name => handle.stop(name) }
}

// prepareReload(next) -> apply(): what serve() itself reads for a reload (the status
// listener's htpasswd file), checked first, applied once the balancer took the config.
async function reload (lb, reloadConfig, log, prepareReload) {
  try {
    const next = reloadConfig()
    const apply = prepareReload(next)
    const lines = await lb.reload(next)
    apply()
    lazy.reloadLog.logReloaded(log, { lines, logLevel: next.logLevel })
  } catch (err) {
    if (!(err instanceof UsageError) && !(err instanceof RuntimeError)) throw err
    lazy.reloadLog.logRefused(log, err.message)
  }
}

module.exports = { main, serve }
