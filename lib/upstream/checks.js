'use strict'

const { HealthChecker } = require('./health')

// The health checks of one membership's backends: the HealthChecker (health.js) made,
// changed or taken away by a reload, and which backends it probes. Probes start once
// start() is called (the first checks of lila's start, or of a backend added): from
// then on a new backend is probed at once.
class Checks {
  constructor (settings, tls) {
    this.checker = settings.check === null ? null : new HealthChecker(checkerOptions(settings, tls))
    this.started = false
    this.closed = false
  }

  // Are backends probed (not --check none)?
  get on () {
    return this.checker !== null
  }

  start () {
    this.started = true
  }

  // Probe a backend (unless there is nothing to probe with yet, or an operator disabled
  // it: probes pause until it is enabled). Resolves once its first probe has reported.
  watch (backend) {
    if (this.checker === null || this.closed || !this.started || backend.admin === 'disabled') return Promise.resolve()
    return this.checker.watch(backend)
  }

  unwatch (backend) {
    if (this.checker !== null) this.checker.unwatch(backend)
  }

  // A reload turned checks on, off or changed them. Turned off, a backend the probes had
  // taken out is up again (passive health goes on); turned on, every backend is probed
  // at once and keeps its state until the probes say otherwise.
  update (settings, tls, backends) {
    const options = checkerOptions(settings, tls)
    if (options.check === null) {
      if (this.checker === null) return
      this.checker.close()
      this.checker = null
      for (const backend of backends) backend.checksOff()
      return
    }
    if (this.checker === null) {
      this.checker = new HealthChecker(options)
      for (const backend of backends) this.watch(backend)
      return
    }
    this.checker.configure(options)
  }

  close () {
    this.closed = true
    if (this.checker !== null) this.checker.close()
  }
}

// What HealthChecker takes (constructor and configure).
function checkerOptions ({ check, checkInterval, checkTimeout, checkHost, proxyProtocol, backendProtocol }, tls) {
  const http2 = backendProtocol === 'h2' // --check http speaks HTTP/2 to them
  return { check, interval: checkInterval, timeout: checkTimeout, host: checkHost, tls, proxyProtocol, http2 }
}

// What health decides by: --rise, --fall (probes) and --eject-after (traffic).
function thresholdsOf ({ rise, fall, ejectAfter }) {
  return { rise, fall, ejectAfter }
}

module.exports = { Checks, thresholdsOf }
