'use strict'

// One connection (tcp) or request (http) on a backend: counts it while it lasts and
// carries its verdict to the backend's passive health.
class Lease {
  constructor (backend) {
    this.backend = backend
    this.released = false
    this.verdict = null // 'succeeded' | 'failed': the first one counts
  }

  succeeded () {
    if (this.verdict !== null) return
    this.verdict = 'succeeded'
    this.backend.succeeded()
  }

  // The one connection or request let through to an ejected backend.
  get isTrial () {
    return this.backend.trial === this
  }

  // See Backend.failed for `cause` and `client`.
  failed (reason, cause, client = null) {
    if (this.verdict !== null) return
    this.verdict = 'failed'
    this.backend.failed(reason, this, cause, client)
  }

  release (bytesIn = 0, bytesOut = 0) {
    if (this.released) return
    this.released = true
    this.backend.leaseEnded(this, bytesIn, bytesOut)
  }
}

module.exports = { Lease }
