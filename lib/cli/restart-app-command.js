'use strict'

const requests = require('./requests')

// `lila restart-app PID` or `lila restart-app --pid-file FILE`: a rolling restart of the
// running lila's apps (lila run), as SIGHUP without a config file or POST /app/restart
// do; the command waits for it and says how it went. The running lila's side: its
// SIGUSR2 handler first serves a restart-app request, then upgrades only if an upgrade
// was asked too, or nothing else was (signals sent together may arrive as one).
//
//   requestRestart({ pid, pidFile }, io) -> exit code    (the command)
//   onSigusr2({ pidFile, restart, upgrade }) -> the handler   (the running lila)
//     restart() -> a promise of its lines (one per app, app/roll.js), or null when no
//     listener runs an app

const WAIT_MS = 600000 // a roll: each instance ready (--ready-timeout), each old one drained

function requestRestart ({ pid, pidFile }, io) {
  return requests.sendRequest('restart-app', { pid, pidFile, body: {}, what: 'rolling restart', waitMs: WAIT_MS }, io)
}

function onSigusr2 ({ pidFile, restart, upgrade }) {
  let serving = false // a restart request taken: another SIGUSR2 meanwhile does not take it again
  let upgraded = null // the upgrade request the last upgrade() was for (it may still run)
  return () => {
    const request = serving ? null : requests.takeRequest('restart-app', { pidFile })
    const asked = requests.waiting('upgrade', { pidFile })
    if (request !== null) {
      serving = true
      answer(request, restart).finally(() => { serving = false })
      // Only an upgrade asked for and not yet begun: one under way would answer it no.
      if (asked === null || asked === upgraded) return
    }
    upgraded = asked
    upgrade()
  }
}

async function answer (request, restart) {
  const rolled = restart()
  if (rolled === null) {
    return request.report({ ok: false, message: `pid ${process.pid} runs no app: lila restart-app is for lila run` })
  }
  const lines = await rolled
  const ok = lines.every(line => /^app: rolling restart done/.test(line))
  request.report({ ok, message: lines.join('; ') })
}

module.exports = { requestRestart, onSigusr2 }
