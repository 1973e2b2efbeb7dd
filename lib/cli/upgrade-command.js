'use strict'

const path = require('path')
const requests = require('./requests')

// `lila upgrade PID` or `lila upgrade --pid-file FILE`, and the running lila's side of
// it: the request (requests.js) is { exec } (null: lila's own path). A SIGUSR2 without
// a request (kill -USR2) upgrades to lila's own path, and the outcome is in the log only.
//
//   requestUpgrade({ pid, pidFile, exec }, io) -> exit code   (the command)
//   takeRequest({ pid, pidFile }) -> { exec, report(outcome) }  (the running lila)

const WAIT_MS = 120000 // the new lila's start (backends checked) and the settling

function requestUpgrade ({ pid, pidFile, exec }, io) {
  const body = { exec: exec === null ? null : path.resolve(exec) }
  return requests.sendRequest('upgrade', { pid, pidFile, body, what: 'upgrade', waitMs: WAIT_MS }, io)
}

function takeRequest ({ pid = process.pid, pidFile = null } = {}) {
  const request = requests.takeRequest('upgrade', { pid, pidFile })
  if (request === null) return { exec: null, report () {} }
  return { exec: typeof request.body.exec === 'string' ? request.body.exec : null, report: request.report }
}

module.exports = { requestUpgrade, takeRequest }
