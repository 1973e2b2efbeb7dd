'use strict'

const { parseCommandLine } = require('../config/argv')
const { UsageError, RuntimeError } = require('../errors')
const {
  PARSERS, NOTHING_INHERITED, statusPasswords, statusSocket, usageError, workerCount
} = require('./service-parts')
const VERSION = require('../version')

// The rest is required where it is used: `lila --version` and usage errors then load
// none of the balancer (nor net, tls, cluster, crypto...), which keeps start-up short.
const lazy = {
  get readConfigFile () { return require('../config/file').readConfigFile },
  get createLogger () { return require('../log').createLogger },
  get createBalancer () { return require('../index').createBalancer },
  get listeningLines () { return require('../index').listeningLines },
  get primary () { return require('./primary').primary },
  get worker () { return require('./worker') },
  get help () { return require('./help') },
  get completionScript () { return require('./completion').completionScript },
  get runDemo () { return require('./demo').runDemo },
  get control () { return require('../admin/control') },
  get createStatusServer () { return require('../admin/status-server').createStatusServer },
  get startDashboard () { return require('../admin/terminal').startDashboard },
  get reloadLog () { return require('./reload-log') },
  get signals () { return require('./signals') },
  get heap () { return require('./heap') },
  get inherited () { return require('./inherited') },
  get upgrade () { return require('./upgrade') },
  get upgradeCommand () { return require('./upgrade-command') },
  get restartAppCommand () { return require('./restart-app-command') },
  get pidFile () { return require('./pid-file') },
  get Journal () { return require('../admin/journal').Journal },
  get Provisions () { return require('../balancer/provisions').Provisions },
  get startTelemetry () { return require('./telemetry-parts').startTelemetry },
  get processStats () { return require('../admin/process-stats').processStats }
}

// The command line, apart from the process: argv in, exit code out. It never calls
// process.exit; signals arrive through `signals` (the process, or an emitter in tests).
// io: { stdout, stderr, stdin, signals, env, cluster, readFile, collectIdle, program,
// channel } (readFile: for the config file; collectIdle: the process is lila's own, so
// it may give memory back once traffic stops, heap.js; program: the executable's path,
// which SIGUSR2 starts again (upgrade.js); bin.js sets both, tests running main
// in-process not; channel: the IPC channel to a lila handing over, by default the
// process's)
async function main (argv, io = {}) {
  const { stdout = process.stdout, signals = process, env = process.env } = io
  let { stderr = process.stderr } = io
  // A worker of `--workers` takes its config from the primary (worker.js).
  if (env.LILA_WORKER && require('cluster').isWorker) {
    if (io.collectIdle) lazy.heap.startIdleCollector()
    return lazy.worker.runWorker({ stderr, signals })
  }

  // Sockets given by systemd or by the lila this one takes over from (inherited.js).
  const inherited = lazy.inherited.takeInherited(env, process.pid)
  if (inherited.from !== 'upgrade') return run(argv, { ...io, stdout, stderr, signals, env, inherited })
  // A new lila of an upgrade: why it could not start goes to the lila that started it too.
  const channel = io.channel || (process.send ? process : { connected: false })
  const said = lazy.upgrade.rememberLastLine(stderr)
  stderr = said.stream
  const onFailed = message => said.note(message) // a worker's, said on its own stderr
  const code = await run(argv, { ...io, stdout, stderr, signals, env, inherited, channel, onFailed })
  if (code !== 0) await lazy.upgrade.reportFailure(channel, said.last() || `exited with code ${code}`)
  return code
}

async function run (argv, io) {
  const { stdout, stderr, signals, env } = io
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
        if (parsed.pidFile !== null) fromFile.pidFile = parsed.pidFile
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
      try { // stdout.columns: a terminal's width; undefined when not one
        const { helpText, topicText } = lazy.help
        stdout.write(parsed.topic === undefined ? helpText(stdout.columns) : topicText(parsed.topic, stdout.columns))
      } catch (err) {
        return usageError(err, stderr)
      }
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
    case 'upgrade':
      return lazy.upgradeCommand.requestUpgrade(parsed, { stdout, stderr })
    case 'restart-app':
      return lazy.restartAppCommand.requestRestart(parsed, { stdout, stderr })
    case 'demo':
      return lazy.runDemo(config, { ...io, stdout, stderr, signals }, serve)
    default:
      if (io.collectIdle) lazy.heap.startIdleCollector()
      if (workerCount(config.workers) > 1) {
        const cluster = io.cluster || require('cluster')
        return lazy.primary(config, { ...io, stderr, signals, cluster, reloadConfig, argv })
      }
      return serve(config, { ...io, stdout, stderr, signals, reloadConfig, args: argv })
  }
}

// Run the balancer until SIGTERM or SIGINT, then drain and resolve with the exit code.
// With a config file (`reloadConfig` reads it again), SIGHUP reloads it; with `program`
// (the executable's path), SIGUSR2 has a new lila take over (upgrade.js).
// `onListening(addresses, log)` runs once every listener is bound. io: { stdout,
// stderr, stdin, signals, reloadConfig, listenHint, program, inherited, channel } (the
// process's streams by default; listenHint(err): what the caller adds when a listener
// cannot bind, or null; inherited: the sockets the process was given, inherited.js;
// channel: the one to the lila this one takes over from).
async function serve (config, io, onListening = () => {}) {
  const {
    stdout = process.stdout, stderr = process.stderr, stdin = process.stdin, signals = process, reloadConfig = null,
    listenHint = () => null, program = null, inherited = NOTHING_INHERITED, channel = null, env = process.env
  } = io
  // The logger writes through this, so the dashboard can hold its lines while it runs.
  const logOut = { target: stderr, write: text => logOut.target.write(text) }
  const log = lazy.createLogger({ level: config.logLevel, stderr: logOut })
  let lb
  let given
  let passwords
  // lila run with --exit-on-crash-loop: every instance crash-looping ends lila, exit 1.
  let gaveUp = false
  let stopper = null
  const onAppGiveUp = reason => {
    log.error(`${reason}: exiting`)
    gaveUp = true
    if (stopper !== null) stopper.stop('crash loop')
  }
  let provisions = null
  // --otlp: spans from the listeners, the metrics pushed (telemetry-parts.js)
  const telemetry = lazy.startTelemetry(config, { env, log })
  const stats = () => telemetry.withTelemetry(lb.stats())
  try {
    given = lazy.inherited.assign(inherited, config)
    // the files read, certificates kept, and --fleet (balancer/provisions.js)
    provisions = new lazy.Provisions({ log, fleet: config.fleet, about: () => aboutOf(lb) })
    // with the access log config asks for; lila run's app prints through logOut too
    lb = lazy.createBalancer(config, {
      log, stdout, stderr: logOut, env, onAppGiveUp, provisions, tracer: telemetry.tracer
    })
    passwords = statusPasswords(config)
    provisions.startFleet() // Redis is tried from now on, never waited for
  } catch (err) {
    // a certificate or htpasswd file that cannot be read or used
    if (!(err instanceof RuntimeError)) return usageError(err, stderr)
    log.error(err.message) // a socket given that fits no listener
    return 1
  }
  let addresses
  // The status listener and the dashboard act through the balancer's own control, as
  // the --workers primary's act through the workers'; what they change is kept for an
  // upgrade (journal.js).
  // With --fleet, what they change is shared, and what other lilas change is made here.
  const journal = new lazy.Journal()
  const perform = journal.recording(lb.control)
  const control = lazy.control.controlFrom(provisions.sharing(perform))
  // The status listener is bound first: a taken port fails at once, in one line.
  const status = config.status === null
    ? null
    : lazy.createStatusServer({ ...config.status, passwords, stats, control, ...PARSERS, log })
  // Its line comes before the listening line, and a script may signal on either: a
  // SIGHUP or SIGUSR2 while starting is kept for when it can be acted on, not fatal.
  const runsApp = lb.apps.size > 0
  const early = lazy.signals.holdSignals(signals, handled(reloadConfig, program, runsApp))
  try {
    if (status !== null) await status.listen(given.status)
    addresses = await lb.listen(given.listeners, given.redirects).catch(err => {
      const hint = err instanceof RuntimeError ? listenHint(err) : null
      if (hint !== null) err.message += `; ${hint}`
      throw err
    })
  } catch (err) {
    early.release(false)
    if (status !== null) await status.close()
    await provisions.closeFleet()
    await telemetry.close()
    if (!(err instanceof RuntimeError)) throw err
    log.error(err.message)
    return 1
  }
  // Handing over to a new lila (SIGUSR2): the status listener stops at once, the
  // listeners stop accepting and drain; nobody removes a socket file the new one uses.
  let handedOver = false
  const upgrader = program === null
    ? null
    : lazy.upgrade.createUpgrader({
      program,
      args: io.args,
      pidFile: config.pidFile,
      log,
      sockets: async () => [...lb.sockets(), ...statusSocket(status, config)],
      state: () => journal.entries(),
      handOver: () => {
        handedOver = true
        if (status !== null) status.close({ handOver: true })
        stopper.stop('handed over')
      }
    })
  // Signals are handled before the listening line: a script may send SIGHUP (or SIGTERM)
  // the moment it reads it, and a signal with no handler yet would kill the process.
  // Until this lila took over from the one before, the sockets are that one's.
  let entered = false
  const handingOver = () => handedOver || (inherited.upgrade !== null && !entered)
  const prepareReload = next => {
    const file = statusPasswords(next)
    return () => { if (status !== null) status.setPasswords(file) }
  }
  const { pidFile } = config
  stopper = untilStopped(lb, signals, log, { reloadConfig, prepareReload, upgrader, handingOver, runsApp, pidFile })
  early.release(true)
  // Started afresh, the PID file is written before the line a script waits for; taking
  // over from the lila before, once that one lets go.
  const enter = () => lazy.upgrade.enterService({ inherited, channel, pidFile: config.pidFile, log, perform })
  provisions.hearChanges(perform) // --fleet: once the backends were checked
  if (inherited.upgrade === null) entered = await enter()
  for (const line of lazy.listeningLines(lb, addresses)) log.always(line)
  if (inherited.upgrade !== null) entered = await enter()
  if (!entered) stopper.stop('not started')
  let dashboard = null
  if (config.dashboard && inherited.upgrade !== null) {
    log.warn('--dashboard: not drawn by a lila that took over from another (the terminal was its)')
  } else if (config.dashboard && !stderr.isTTY) {
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
  telemetry.pushMetrics(stats, lazy.processStats)
  const code = await stopper.done
  await telemetry.close() // the last spans and metrics
  if (dashboard !== null) {
    dashboard.stop()
    logOut.target = stderr
  }
  if (status !== null) await status.close({ handOver: handingOver() })
  await provisions.closeFleet()
  if (config.pidFile !== null) lazy.pidFile.removePidFile(config.pidFile, process.pid)
  return entered && !gaveUp ? code : 1
}

// What a fleet's member says of itself (fleet/members.js): where it listens, and its
// requests (or tcp connections) so far.
function aboutOf (lb) {
  const { listeners } = lb.stats()
  const requests = listeners.reduce((sum, l) => sum + l.backends.reduce((n, b) => n + b.total, 0), 0)
  return { listeners: lb.listeners.map(l => l.bound || l.name), requests }
}

// The signals a process acts on besides SIGTERM and SIGINT.
function handled (reloadConfig, program, runsApp) {
  return [...(reloadConfig === null && !runsApp ? [] : ['SIGHUP']), ...(program === null ? [] : ['SIGUSR2'])]
}

// First SIGTERM/SIGINT (or stop(), from the dashboard's quit, or a new lila that took
// over): stop accepting and drain for up to shutdownTimeout. A second one: cut every
// connection now. SIGHUP (with a config file): reload it; one reload at a time, an
// invalid file changes nothing; under lila run, then a rolling restart of the app (a
// changed command or environment takes effect through it). SIGUSR2 (with an upgrader):
// lila restart-app's rolling restart, or a new lila takes over; one under way is
// stopped with this one. (signals.js)
function untilStopped (lb, signals, log, { reloadConfig, prepareReload, upgrader, handingOver, runsApp, pidFile }) {
  const onHup = async () => {
    if (reloadConfig !== null) await reload(lb, reloadConfig, log, prepareReload)
    if (lb.runsApp) await lb.rollApps('signal', 'SIGHUP') // (a reload may have started or stopped one)
  }
  let handle
  const done = new Promise(resolve => {
    handle = lazy.signals.onSignals(signals, log, {
      stop: name => {
        if (upgrader !== null) upgrader.cancel()
        const timeout = lb.config.shutdownTimeout
        const closed = lb.close(timeout, { handOver: handingOver() })
        log.info(`${name}: stopped accepting; letting open connections finish (up to ${timeout / 1000}s)`)
        closed.then(() => {
          handle.off()
          log.info('stopped')
          resolve(0)
        })
      },
      destroy: () => lb.destroy(),
      reload: reloadConfig === null && !runsApp ? null : onHup,
      // lila restart-app's request (restart-app-command.js), or an upgrade
      upgrade: upgrader === null
        ? null
        : lazy.restartAppCommand.onSigusr2({
          pidFile,
          restart: () => lb.runsApp ? lb.rollApps('command', 'lila restart-app') : null,
          upgrade: () => upgrader.upgrade()
        })
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

module.exports = { main }
