'use strict'

const { parseCommandLine } = require('./config')
const { UsageError, RuntimeError } = require('./errors')
const { createLogger } = require('./log')
const { createBalancer } = require('./index')
const { helpText } = require('./help')
const { runDemo } = require('./demo')
const VERSION = require('./version')

// The command line, apart from the process: argv in, exit code out. It never calls
// process.exit; signals arrive through `signals` (the process, or an emitter in tests).
async function main (argv, io = {}) {
  const { stdout = process.stdout, stderr = process.stderr, signals = process } = io
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
      return runDemo(parsed.config, { stdout, stderr, signals }, serve)
    default:
      return serve(parsed.config, { stdout, stderr, signals })
  }
}

// Run the balancer until SIGTERM or SIGINT, then drain and resolve with the exit code.
// `onListening(addresses, log)` runs once every listener is bound.
async function serve (config, { stderr, signals }, onListening = () => {}) {
  const log = createLogger({ level: config.logLevel, stderr })
  const lb = createBalancer(config, { log })
  let addresses
  try {
    addresses = await lb.listen()
  } catch (err) {
    if (!(err instanceof RuntimeError)) throw err
    log.error(err.message)
    return 1
  }
  config.listeners.forEach((listener, i) => {
    const n = lb.listeners[i].upstream.backends.length
    log.always(`listening on ${addresses[i]} (${listener.protocol}, ${listener.mode}, ${n} backend${n === 1 ? '' : 's'})`)
  })
  onListening(addresses, log)
  return untilStopped(lb, config, signals, log)
}

// First SIGTERM/SIGINT: stop accepting and drain for up to shutdownTimeout. A second
// one: cut every connection now.
function untilStopped (lb, config, signals, log) {
  return new Promise(resolve => {
    let stopping = false
    const onSignal = name => {
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
}

module.exports = { main, serve }
