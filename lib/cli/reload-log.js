'use strict'

// What lila says about a reload (SIGHUP), alone or as the --workers primary: each
// change, each worker that could not apply it (`failures`, in words), then the count.
// The new log level already applies to these lines.
function logReloaded (log, { lines, logLevel, failures = [] }) {
  log.setLevel(logLevel)
  for (const line of lines) log.info(`reload: ${line}`)
  for (const failure of failures) log.error(`reload: ${failure}`)
  log.info(`reloaded (${lines.length} change${lines.length === 1 ? '' : 's'})`)
}

function logRefused (log, reason) {
  log.error(`reload refused: ${reason}; keeping the running config`)
}

module.exports = { logReloaded, logRefused }
