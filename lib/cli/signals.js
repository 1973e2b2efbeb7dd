'use strict'

// Signals, one way for the single process (main.js serve) and the --workers primary
// (workers.js) alike. `signals` is the process, or an emitter in tests.
//
//   onSignals(signals, log, { stop, destroy, reload })
//     first SIGTERM or SIGINT   stop(name): stop accepting, let open connections finish
//     another one               says so, then destroy(): every connection is cut now
//     SIGHUP (with `reload`)    reload(), one at a time; none once stopping
//   -> { stop(name) (as a signal would: the dashboard's quit), off() }
//
//   holdSighup(signals, on) -> { release(replay) }: while starting, a SIGHUP is caught
//     rather than fatal (a process with no handler dies of it), and replayed once
//     reloads can be done.

function onSignals (signals, log, { stop, destroy, reload = null }) {
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
  signals.on('SIGTERM', onStop)
  signals.on('SIGINT', onStop)
  if (reload !== null) signals.on('SIGHUP', onHup)
  return {
    stop: onStop,
    off () {
      signals.off('SIGTERM', onStop)
      signals.off('SIGINT', onStop)
      if (reload !== null) signals.off('SIGHUP', onHup)
    }
  }
}

function holdSighup (signals, on) {
  let caught = false
  const hold = () => { caught = true }
  if (on) signals.on('SIGHUP', hold)
  return {
    release (replay) {
      if (!on) return
      signals.off('SIGHUP', hold)
      if (replay && caught) signals.emit('SIGHUP', 'SIGHUP')
    }
  }
}

module.exports = { onSignals, holdSighup }
