'use strict'

// A fault injected on one backend (the admin API's POST /backends/ADDR/fault, the
// dashboard's `f`, --fault), to rehearse failures: lila's own behaviour in place of
// the backend's, for a share of the requests (http) or connections (tcp) the mode gives
// that backend. attempt.js applies it where a seated attempt starts, the one place
// every kind of request and connection passes (see docs/faults.md):
//   delay   held that long before it goes to the backend (its slot taken meanwhile);
//           the hold counts in the backend's latency samples
//   status  http: lila answers this status in the backend's place, and --retry-on and
//           --eject-on judge it as the backend's answer; tcp: the connection is closed
//           at once, as by a backend that closed it without a byte (retried, blamed)
//   reset   the client's connection is reset (an HTTP/2 stream: RST_STREAM); nothing is
//           retried, no backend blamed
// A delay comes first, then a status or a reset when there is one. `rate` (0 to 1) of
// them are struck, each drawn with `random`. It ends by itself after `duration` ms (0:
// only when cleared). Health probes never see it: they reach the real backend.
class Fault {
  constructor ({ delay = 0, status = 0, reset = false, rate = 1, duration = 0 }, {
    now = Date.now, random = Math.random
  } = {}) {
    this.delay = delay
    this.status = status
    this.reset = reset
    this.rate = rate
    this.duration = duration
    this.random = random
    this.startedAt = now()
    this.endsAt = duration > 0 ? this.startedAt + duration : null
    this.struck = 0 // requests or connections it struck, for the line that ends it
    this.timer = null
    this.held = new Set() // what its delay holds now: a function each that lets it go on
  }

  // Does it strike this request or connection?
  strikes () {
    if (this.rate < 1 && !(this.random() < this.rate)) return false
    this.struck++
    return true
  }

  // onEnd() once its duration is over (none without one). The timer does not hold the
  // process up.
  arm (onEnd) {
    if (this.endsAt === null) return
    this.timer = setTimeout(onEnd, this.duration)
    this.timer.unref()
  }

  // A request or connection its delay holds: `go(true)` lets it go on to the backend
  // as soon as the fault ends (cleared, over, replaced), so that no hold outlives it.
  hold (go) {
    this.held.add(go)
  }

  letGo (go) {
    this.held.delete(go)
  }

  // It ends (upstream.js clearFault, setFault): no timer left, and what it holds goes on.
  end () {
    clearTimeout(this.timer)
    this.timer = null
    for (const go of [...this.held]) go(true)
  }

  // Plain, for /status.json, the page and the dashboard (format.js describeFault).
  snapshot (now) {
    return {
      delayMs: this.delay,
      errorStatus: this.status,
      reset: this.reset,
      rate: this.rate,
      endsAt: this.endsAt,
      leftMs: this.endsAt === null ? null : Math.max(0, this.endsAt - now),
      struck: this.struck,
      holding: this.held.size // requests or connections its delay holds now
    }
  }
}

module.exports = { Fault }
