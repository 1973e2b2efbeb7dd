'use strict'

// `lila --workers N`: the primary's start. It binds nothing itself (workers.js runs the
// workers and hands them the sockets); it runs the status listener over the workers,
// the PID file and upgrades (upgrade.js) as serve() in main.js does for one process.
//   primary(config, io) -> exit code   (io as main.js's, with cluster, reloadConfig, argv)

const { RuntimeError, ControlError, fromPlain } = require('../errors')
const { createLogger } = require('../log')
const { controlFrom } = require('../admin/control')
const { createStatusServer } = require('../admin/status-server')
const { Journal } = require('../admin/journal')
const { assign } = require('./inherited')
const upgrade = require('./upgrade')
const { onSigusr2 } = require('./restart-app-command')
const { runPrimary } = require('./workers')
const { removePidFile } = require('./pid-file')
const { startTelemetry } = require('./telemetry-parts')
const { processStats } = require('../admin/process-stats')
const { PARSERS, NOTHING_INHERITED, statusPasswords, statusSocket, usageError } = require('./service-parts')

// The --workers primary. The status listener runs here, over the workers: statistics
// summed from their snapshots, control actions sent to each of them. SIGUSR2 hands the
// sockets to a new primary (upgrade.js), which starts workers of its own.
async function primary (config, io) {
  const { stderr, signals, cluster, reloadConfig, program = null, inherited = NOTHING_INHERITED, channel = null } = io
  const log = createLogger({ level: config.logLevel, stderr })
  // The workers write their log lines straight to stderr, which would tear the view.
  if (config.dashboard) log.warn('--dashboard does not run with --workers; running without it')
  let given
  try {
    given = assign(inherited, config)
  } catch (err) {
    if (!(err instanceof RuntimeError)) throw err
    log.error(err.message)
    return 1
  }
  let status = null
  let passwords
  try {
    passwords = statusPasswords(config)
  } catch (err) {
    return usageError(err, stderr)
  }
  // --otlp: the workers make the spans; the primary pushes the metrics summed over them
  const telemetry = startTelemetry(config, { env: io.env || process.env, log, spans: false })
  let entered = false
  let handedOver = false
  const journal = new Journal()
  let upgrader = null
  const onReady = async ({ gatherStats, broadcast, sockets, handOver }) => {
    if (io.onWorkersReady) io.onWorkersReady({ gatherStats, broadcast })
    const stats = async () => telemetry.withTelemetry(await gatherStats())
    telemetry.pushMetrics(stats, processStats)
    const perform = journal.recording(action => everyWorker(broadcast, action))
    if (program !== null) {
      upgrader = upgrade.createUpgrader({
        program,
        args: io.argv,
        pidFile: config.pidFile,
        log,
        sockets: async () => {
          const handed = await sockets()
          handed.push(...statusSocket(status, config))
          return handed
        },
        state: () => journal.entries(),
        handOver: () => {
          handedOver = true
          if (status !== null) status.close({ handOver: true })
          handOver()
        }
      })
    }
    if (config.status !== null) {
      const control = controlFrom(perform)
      status = createStatusServer({ ...config.status, passwords, stats, control, ...PARSERS, log })
      try {
        await status.listen(given.status)
      } catch (err) {
        log.error(err.message)
        signals.emit('SIGTERM')
        return
      }
    }
    if (inherited.upgrade === null) return
    entered = await upgrade.enterService({ inherited, channel, pidFile: config.pidFile, log, perform })
    if (entered) return
    handedOver = true // the sockets go on serving in the lila before
    handOver()
  }
  const prepareReload = next => {
    const file = statusPasswords(next)
    return () => { if (status !== null) status.setPasswords(file) }
  }
  const code = await runPrimary(config, {
    prepareReload,
    stderr,
    signals,
    cluster,
    reloadConfig,
    exec: io.exec,
    args: io.args,
    given: given.listeners,
    givenRedirects: given.redirects,
    // SIGUSR2: lila restart-app is answered (no app runs under --workers), or an upgrade
    upgrade: program === null
      ? null
      : onSigusr2({
        pidFile: config.pidFile,
        restart: () => null,
        upgrade: () => upgrader === null
          ? upgrade.refuseUpgrade({ pidFile: config.pidFile, log }, 'the workers are still starting')
          : upgrader.upgrade()
      }),
    onFailed: io.onFailed,
    // Started afresh, the PID file is written before the line a script waits for.
    onListening: () => {
      if (inherited.upgrade !== null) return true
      entered = upgrade.writePid(config.pidFile, log)
      return entered
    },
    onReady
  })
  if (upgrader !== null) upgrader.cancel()
  await telemetry.close()
  if (status !== null) await status.close({ handOver: handedOver })
  if (config.pidFile !== null) removePidFile(config.pidFile, process.pid)
  return entered ? code : code || 1
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

module.exports = { primary }
