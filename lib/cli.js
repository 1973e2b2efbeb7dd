'use strict'

const { parseCommandLine } = require('./config')
const { UsageError, RuntimeError } = require('./errors')
const { createLogger } = require('./log')
const { createBalancer } = require('./index')
const { helpText } = require('./help')
const { runDemo } = require('./demo')
const { createControl } = require('./control')
const { createStatusServer } = require('./status')
const { createAccessLog } = require('./access-log')
const { startDashboard } = require('./terminal')
const VERSION = require('./version')

// The command line, apart from the process: argv in, exit code out. It never calls
// process.exit; signals arrive through `signals` (the process, or an emitter in tests).
async function main (argv, io = {}) {
  const { stdout = process.stdout, stderr = process.stderr } = io
  let parsed
  try {
    parsed = parseCommandLine(argv)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    stderr.write(`lila: ${err.message}\nTry 'lila --help'.\n`)
    return 2
  }
  switch (parsed.command) {
    case 'help':
      stdout.write(helpText())
      return 0
    case 'version':
      stdout.write(`lila ${VERSION}\n`)
      return 0
    case 'demo':
      return runDemo(parsed.config, io, serve)
    default:
      return serve(parsed.config, io)
  }
}

// Run the balancer until SIGTERM or SIGINT, then drain and resolve with the exit code.
// `onListening(addresses, log)` runs once every listener is bound. io: { stdout,
// stderr, stdin, signals } (the process's by default).
async function serve (config, io, onListening = () => {}) {
  const { stdout = process.stdout, stderr = process.stderr, stdin = process.stdin, signals = process } = io
  // The logger writes through this, so the dashboard can hold its lines while it runs.
  const logOut = { target: stderr, write: text => logOut.target.write(text) }
  const log = createLogger({ level: config.logLevel, stderr: logOut })
  const accessLog = config.accessLog ? createAccessLog({ format: config.accessLog, stdout }) : null
  const lb = createBalancer(config, { log, accessLog })
  let addresses
  // The status listener is bound first: a taken port fails at once, in one line.
  const status = config.status === null ? null : createStatusServer({ ...config.status, stats: lb.stats, control: createControl(lb), log })
  try {
    if (status !== null) await status.listen()
    addresses = await lb.listen()
  } catch (err) {
    if (status !== null) await status.close()
    if (!(err instanceof RuntimeError)) throw err
    log.error(err.message)
    return 1
  }
  config.listeners.forEach((listener, i) => {
    const n = lb.listeners[i].upstream.backends.length
    log.always(`listening on ${addresses[i]} (${listener.protocol}, ${listener.mode}, ${n} backend${n === 1 ? '' : 's'})`)
  })
  const stopper = untilStopped(lb, config, signals, log)
  let dashboard = null
  if (config.dashboard && !stderr.isTTY) {
    log.warn('--dashboard needs a terminal on stderr; running without it')
  } else if (config.dashboard) {
    dashboard = startDashboard({
      stats: lb.stats,
      control: createControl(lb),
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
  if (accessLog !== null) accessLog.flush()
  return code
}

// First SIGTERM/SIGINT (or stop(), from the dashboard's quit): stop accepting and
// drain for up to shutdownTimeout. A second one: cut every connection now.
function untilStopped (lb, config, signals, log) {
  let onSignal
  const done = new Promise(resolve => {
    let stopping = false
    onSignal = name => {
      if (stopping) {
        log.warn(`${name} again: closing every connection now`)
        lb.destroy()
        return
      }
      stopping = true
      const closed = lb.close(config.shutdownTimeout)
      log.info(`${name}: stopped accepting; letting open connections finish (up to ${config.shutdownTimeout / 1000}s)`)
      closed.then(() => {
        signals.off('SIGTERM', onSignal)
        signals.off('SIGINT', onSignal)
        log.info('stopped')
        resolve(0)
      })
    }
    signals.on('SIGTERM', onSignal)
    signals.on('SIGINT', onSignal)
  })
  return { done, stop: name => onSignal(name) }
}

module.exports = { main, serve }
