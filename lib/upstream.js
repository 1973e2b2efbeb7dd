'use strict'

const { Backend } = require('./backend')
const { createMode } = require('./balancers')

// The backends of one listener and the mode that picks among them. choose() is the one
// place that decides which backends may take traffic right now (usable, not already
// tried by this connection, primaries before backups); the mode only ranks them.
class Upstream {
  constructor ({ mode, backends, now = Date.now, balancerOptions }) {
    this.mode = mode
    this.now = now
    this.balancer = createMode(mode, balancerOptions)
    this.backends = backends.map(spec => new Backend(spec, { now }))
  }

  // -> Backend, or null when nothing can take the connection. `tried` holds backends
  // that already failed this connection: a retry never goes back to one of them.
  choose (ctx, tried = null) {
    const now = this.now()
    let candidates = this.candidates(now, tried, false)
    if (candidates.length === 0) candidates = this.candidates(now, tried, true)
    if (candidates.length <= 1) return candidates[0] || null
    return this.balancer.pick(candidates, ctx)
  }

  candidates (now, tried, backup) {
    const out = []
    for (const backend of this.backends) {
      if (backend.backup !== backup || !backend.usable(now)) continue
      if (tried !== null && tried.has(backend)) continue
      out.push(backend)
    }
    return out
  }

  get live () {
    let sum = 0
    for (const backend of this.backends) sum += backend.live
    return sum
  }

  snapshot () {
    return this.backends.map(b => b.snapshot())
  }
}

module.exports = { Upstream }
