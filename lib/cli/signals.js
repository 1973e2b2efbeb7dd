'use strict'

// Signals, one way for the single process (main.js serve) and the --workers primary
// (workers.js) alike. `signals` is the process, or an emitter in tests.
//
//   onSignals(signals, log, { stop, destroy, reload, upgrade })
//     first SIGTERM or SIGINT   stop(name): stop accepting, let open connections finish
//     another one               says so, then destroy(): every connection is cut now
//     SIGHUP (with `reload`)    reload(), one at a time; none once stopping
//     SIGUSR2 (with `upgrade`)  upgrade(): a new lila takes over (upgrade.js); none
//                               once stopping
//   -> { stop(name) (as a signal would: the dashboard's quit), off() }
//
//   holdSignals(signals, names) -> { release(replay) }: while starting, SIGHUP and
//     SIGUSR2 (those of `names`) are caught rather than fatal (a process with no handler
//     dies of them), and each replayed once reloads and upgrades can be done.

function onSignals (signals, log, { stop, destroy, reload = null, upgrade = null }) {
  let stopping = false
  let reloading = Promise.resolve()
  const onStop = name => {
    if (stopping) {
      log.warn(`${name} again: closing every connection now`)
      destroy()
      return
    }
    stopping = true
    stop(name)
  }
  const onHup = () => {
    reloading = reloading.then(() => stopping ? null : reload())
  }
  const onUsr2 = () => {
    if (stopping) return log.warn('SIGUSR2: stopping; no upgrade')
    upgrade()
  }
  signals.on('SIGTERM', onStop)
  signals.on('SIGINT', onStop)
  if (reload !== null) signals.on('SIGHUP', onHup)
  if (upgrade !== null) signals.on('SIGUSR2', onUsr2)
  return {
    stop: onStop,
    off () {
      signals.off('SIGTERM', onStop)
      signals.off('SIGINT', onStop)
      if (reload !== null) signals.off('SIGHUP', onHup)
      if (upgrade !== null) signals.off('SIGUSR2', onUsr2)
    }
  }
}

function holdSignals (signals, names) {
  const caught = new Set()
  const holds = names.map(name => [name, () => caught.add(name)])
  for (const [name, hold] of holds) signals.on(name, hold)
  return {
    release (replay) {
      for (const [name, hold] of holds) signals.off(name, hold)
      if (replay) for (const name of caught) signals.emit(name, name)
    }
  }
}

module.exports = { onSignals, holdSignals }
