'use strict'

// A listener's timeouts, by sweeping rather than per-socket timers: a timer per socket
// is re-armed on every read and write, a sweep costs a counter store per chunk. Each
// sweep tells every session (onIdleSweep), which counts its own idle sweeps, then runs
// the protocol's sweep() (HTTP: backends silent for --timeout, idle pooled
// connections). Sweeps come every eighth of the shortest timeout (10 ms to 1 s): a
// timeout fires between its time and one sweep later.
class Sweep {
  constructor () {
    this.timer = null
    this.every = 1000 // ms between sweeps
  }

  get running () {
    return this.timer !== null
  }

  // (Re)start for these settings: `sessions` (a Set, read at every sweep), the
  // protocol, and the config's --idle-timeout and the protocol's timeouts.
  start (config, protocol, sessions, listener) {
    this.stop()
    const timeouts = [config.idleTimeout, ...protocol.timeouts(config)].filter(ms => ms > 0)
    if (timeouts.length === 0) return
    this.every = Math.min(1000, Math.max(10, Math.floor(Math.min(...timeouts, 8000) / 8)))
    const idle = config.idleTimeout
    const idleLimit = idle > 0 ? this.ticksFor(idle) : Infinity
    this.timer = setInterval(() => {
      for (const session of sessions) {
        session.onIdleSweep(idleLimit)
      }
      protocol.sweep(listener)
    }, this.every)
    this.timer.unref()
  }

  stop () {
    clearInterval(this.timer)
    this.timer = null
  }

  // How many sweeps make `ms`: never fewer than it takes.
  ticksFor (ms) {
    return Math.ceil(ms / this.every) + 1
  }
}

module.exports = { Sweep }
