'use strict'

const { Fault } = require('./fault')
const { describeFault, formatDuration } = require('../format')

// The faults (fault.js) on one listener's backends, as an operator or --fault sets
// them: one at a time on a backend, each ending by itself after its duration or when
// cleared, and the lines that say so. `unit`: what a fault strikes ('connection' for
// tcp, 'request' for http), in the line that ends it; `random` draws which ones.
class Faults {
  constructor ({ now, random, log, unit }) {
    this.now = now
    this.random = random
    this.log = log
    this.unit = unit
  }

  // A fault on this backend's traffic from now on, in place of any it had. Returns it.
  set (backend, spec) {
    const was = backend.fault
    const fault = new Fault(spec, { now: this.now, random: this.random })
    backend.setFault(fault)
    if (was !== null) was.end()
    fault.arm(() => this.clear(backend, true))
    const now = this.now()
    const replacing = was === null ? '' : `, replacing ${describeFault(was.snapshot(now))}`
    this.log.info(`backend ${backend.address} fault injected: ${describeFault(fault.snapshot(now), now)}${replacing}`)
    return fault
  }

  // The fault ends: its time is over (`expired`) or it is cleared. False when there
  // was none.
  clear (backend, expired = false) {
    const fault = backend.fault
    if (fault === null) return false
    backend.setFault(null)
    fault.end()
    const how = expired ? `ended after ${formatDuration(fault.duration)}` : 'cleared'
    const struck = `${fault.struck} ${this.unit}${fault.struck === 1 ? '' : 's'} struck`
    this.log.info(`backend ${backend.address} fault ${how}: ${describeFault(fault.snapshot(this.now()))}; ${struck}`)
    return true
  }

  // Shutting down: every fault ends without a word (what their delays hold goes on,
  // to be drained).
  endAll (backends) {
    for (const backend of backends) if (backend.fault !== null) backend.fault.end()
  }
}

module.exports = { Faults }
