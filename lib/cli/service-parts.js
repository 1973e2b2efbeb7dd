'use strict'

// What lila's one process (main.js serve) and the --workers primary (primary.js) share
// as they start: how many processes serve (so which of the two starts), the parsers the
// status listener takes, the status listener's htpasswd file and socket, the words of a
// usage error.

const { parseBackend, parseFaultSettings } = require('../config/backend-spec')
const { UsageError } = require('../errors')

// What the status listener parses a backend and a fault's settings with.
const PARSERS = { parseBackend, parseFault: parseFaultSettings }

// No socket was given to the process (inherited.js takeInherited's shape).
const NOTHING_INHERITED = Object.freeze({ from: null, sockets: [], upgrade: null })

// --status-basic-auth: its htpasswd file, read (a UsageError when it cannot be used), or null.
// (Required here, not above: `lila --version` loads none of proxy/.)
function statusPasswords (config) {
  if (config.status === null || config.status.basicAuth === null) return null
  return require('../proxy/edge/rules').readPasswords(config.status.basicAuth)
}

// How many processes serve: --workers, 'auto' being one a core. Here, not in workers.js,
// so that a lila of one process does not load the primary's modules to learn it.
function workerCount (workers) {
  return workers === 'auto' ? require('os').availableParallelism() : workers
}

function usageError (err, stderr) {
  if (!(err instanceof UsageError)) throw err
  stderr.write(`lila: ${err.message}\nTry 'lila --help'.\n`)
  return 2
}

// The status listener's socket, to hand over (upgrade.js).
function statusSocket (status, config) {
  if (status === null) return []
  return [{ role: 'status', name: 'status', host: config.status.host, port: config.status.port, fd: status.descriptor }]
}

module.exports = { PARSERS, NOTHING_INHERITED, statusPasswords, statusSocket, usageError, workerCount }
