'use strict'

const { parseCommandLine, logsName } = require('./config')
const { readConfigFile } = require('./config-file')
const { UsageError, RuntimeError } = require('./errors')
const { createLogger } = require('./log')
const { createBalancer } = require('./index')
const { runPrimary, runWorker, workerCount } = require('./workers')
const { helpText } = require('./help')
const { runDemo } = require('./demo')
const VERSION = require('./version')

// The command line, apart from the process: argv in, exit code out. It never calls
// process.exit; signals arrive through `signals` (the process, or an emitter in tests).
// io: { stdout, stderr, signals, env, cluster, readFile } (readFile: for the config file)
async function main (argv, io = {}) {
  const { stdout = process.stdout, stderr = process.stderr, signals = process, env = process.env, cluster = require('cluster') } = io
  // A worker of `--workers` takes its config from the primary (workers.js).
  if (cluster.isWorker && env.LILA_WORKER) return runWorker({ stderr, signals })

  let parsed
  let config
  let reloadConfig = null
  try {
    parsed = parseCommandLine(argv)
    if (parsed.configFile !== undefined) {
      // --log-level beside --config wins over the file, at start and on every reload.
      reloadConfig = () => {
        const fromFile = readConfigFile(parsed.configFile, { readFile: io.readFile })
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
      stdout.write(helpText())
      return 0
    case 'version':
      stdout.write(`lila ${VERSION}\n`)
      return 0
    case 'demo':
      return runDemo(config, { stdout, stderr, signals }, serve)
    default:
      if (workerCount(config.workers) > 1) {
        return runPrimary(config, { stderr, signals, cluster, reloadConfig, exec: io.exec, args: io.args, onReady: io.onWorkersReady })
      }
      return serve(config, { stdout, stderr, signals, reloadConfig })
  }
}

function usageError (err, stderr) {
  if (!(err instanceof UsageError)) throw err
  stderr.write(`lila: ${err.message}\nTry 'lila --help'.\n`)
  return 2
}

// Run the balancer until SIGTERM or SIGINT, then drain and resolve with the exit code.
// With a config file (`reloadConfig` reads it again), SIGHUP reloads it.
// `onListening(addresses, log)` runs once every listener is bound.
async function serve (config, { stderr, signals, reloadConfig = null }, onListening = () => {}) {
  const log = createLogger({ level: config.logLevel, stderr })
  let lb
  let addresses
  try {
    lb = createBalancer(config, { log })
  } catch (err) {
    return usageError(err, stderr) // a certificate that cannot be read or used
  }
  try {
    addresses = await lb.listen()
  } catch (err) {
    if (!(err instanceof RuntimeError)) throw err
    log.error(err.message)
    return 1
  }
  config.listeners.forEach((listener, i) => {
    const n = lb.listeners[i].upstream.backends.length
    log.info(`${logsName(listener, config.listeners.length) ? `${listener.name}: ` : ''}listening on ${addresses[i]} (${listener.protocol}, ${listener.mode}, ${n} backend${n === 1 ? '' : 's'})`)
  })
  onListening(addresses, log)
  return untilStopped(lb, config, signals, log, reloadConfig)
}

// First SIGTERM/SIGINT: stop accepting and drain for up to shutdownTimeout. A second
// one: cut every connection now. SIGHUP (with a config file): reload it; one reload at
// a time, an invalid file changes nothing.
function untilStopped (lb, config, signals, log, reloadConfig) {
  return new Promise(resolve => {
    let stopping = false
    let reloading = Promise.resolve()
    const onSignal = name => {
      if (stopping) {
        log.warn(`${name} again: closing every connection now`)
        lb.destroy()
        return
      }
      stopping = true
      const timeout = lb.config.shutdownTimeout
      const closed = lb.close(timeout)
      log.info(`${name}: stopped accepting; letting open connections finish (up to ${timeout / 1000}s)`)
      closed.then(() => {
        signals.off('SIGTERM', onSignal)
        signals.off('SIGINT', onSignal)
        if (reloadConfig !== null) signals.off('SIGHUP', onHup)
        log.info('stopped')
        resolve(0)
      })
    }
    const onHup = () => {
      reloading = reloading.then(() => stopping ? null : reload(lb, reloadConfig, log))
    }
    signals.on('SIGTERM', onSignal)
    signals.on('SIGINT', onSignal)
    if (reloadConfig !== null) signals.on('SIGHUP', onHup)
  })
}

async function reload (lb, reloadConfig, log) {
  try {
    const next = reloadConfig()
    const lines = await lb.reload(next)
    log.setLevel(next.logLevel)
    for (const line of lines) log.info(`reload: ${line}`)
    log.info(`reloaded (${lines.length} change${lines.length === 1 ? '' : 's'})`)
  } catch (err) {
    if (!(err instanceof UsageError) && !(err instanceof RuntimeError)) throw err
    log.error(`reload refused: ${err.message}; keeping the running config`)
  }
}

module.exports = { main, serve }
