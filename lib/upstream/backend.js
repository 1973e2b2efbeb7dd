'use strict'

const { createHash } = require('crypto')
const { hashString } = require('./balancers/hash')
const { formatAddress } = require('../address')
const histogram = require('../histogram')
const { Lease } = require('./lease')
const { BackendHealth } = require('./backend-health')

// Latency: the time constant of the decaying peak average (Finagle's default).
const LATENCY_DECAY_MS = 10000
// Slow start: a backend that comes back starts at this share of its weight.
const SLOW_START_FLOOR = 0.1

// What a sticky cookie (--sticky) says for the backend at `address`: the first 12 hex
// digits of its SHA-256. Derived from the address alone, so every lila with the same
// backends gives and honours the same values, with nothing shared; and it does not show
// the address to clients.
function stickyId (address) {
  return createHash('sha256').update(address).digest('hex').slice(0, 12)
}

// One backend server: where it is, how much traffic it may take, how much it has right
// now, and what it has done; whether it is healthy is the state machine it is built on
// (backend-health.js: its state, probes' and traffic's verdicts, its events). Counters
// live here so that per-connection bookkeeping is a few increments on an object that
// already exists.
class Backend extends BackendHealth {
  // `rise` and `fall` (--rise, --fall) matter only to a `checked` backend; `ejectAfter`
  // (--eject-after) is passive health's, 0 for never.
  constructor (spec, {
    now = Date.now, checked = false, rise = null, fall = null, ejectAfter = 0, rampOnFirstUp = false, onFree = null
  } = {}) {
    super({ now, checked, rise, fall, ejectAfter })
    const { host, port, path = null, weight = 1, maxConn = null, backup = false, slowStart = 0, name = null } = spec
    this.host = host // null for a Unix socket
    this.port = port // null for a Unix socket
    this.path = path // a Unix socket's path, or null
    this.address = path !== null ? `unix:${path}` : formatAddress(host, port)
    this.name = name // the DNS name this address came from (SRV: the target), or null for an IP literal
    // The backend as a Host: what an HTTP request that has none, a probe and
    // --host-header backend send: the name as written with the port (api.internal:8080),
    // the address for an IP literal, or localhost for a Unix socket (which has no name).
    this.hostHeader = path !== null ? 'localhost' : name !== null ? formatAddress(name, port) : this.address
    this.weight = weight
    this.maxConn = maxConn
    this.backup = backup
    this.slowStart = slowStart
    this.hashSeed = hashString(this.address)
    this.stickyId = stickyId(this.address)

    this.live = 0
    this.total = 0
    this.bytesIn = 0 // client -> backend
    this.bytesOut = 0 // backend -> client

    this.responseTimes = histogram.createCounts() // per bucket, see histogram.js
    this.responseTimeSum = 0 // ms

    this.retired = false // taken out of the upstream (DNS, reload, operator): no new traffic
    this.retiredWhy = null // what took it out, when not DNS (retire)
    this.admin = null // set by an operator (control.js): 'draining' | 'disabled'; no new traffic
    this.adminAt = null
    this.onFree = onFree // called when a lease is released (the upstream serves its queue)

    this.rampOnFirstUp = rampOnFirstUp // joined after start-up: ramp up like a recovery
    this.rampFrom = null // while slow start ramps the effective weight: when it began
    if (!checked && rampOnFirstUp && slowStart > 0) this.rampFrom = this.changedAt // up unchecked

    this.latency = 0 // peak-EWMA of latency samples, ms, as of latencyAt
    this.latencyAt = null // when the last sample came; null: never measured

    this.fault = null // a fault injected on it (fault.js; the upstream sets and ends it), or null
    this.faultsInjected = {} // kind ('delay', 'error', 'reset') -> requests or connections struck
  }

  get full () {
    return this.maxConn !== null && this.live >= this.maxConn
  }

  // The weight balancers use: the configured weight, ramped up from a tenth of it over
  // `slowStart` ms after the backend comes back.
  get effectiveWeight () {
    if (this.rampFrom === null) return this.weight
    const elapsed = this.now() - this.rampFrom
    if (elapsed >= this.slowStart) {
      this.rampFrom = null
      return this.weight
    }
    return this.weight * Math.max(SLOW_START_FLOOR, elapsed / this.slowStart)
  }

  // May this backend be given traffic now, leaving max-conn aside? In panic (every
  // backend down) health is ignored. An ejected backend lets one trial through once
  // its cool-off is over.
  available (now, panic = false) {
    if (this.weight === 0 || this.retired || this.admin !== null) return false
    if (panic || this.state === 'up') return true
    return this.downSource === 'traffic' && now >= this.ejectedUntil && this.trial === null
  }

  // May a new connection go here now?
  usable (now, panic = false) {
    return !this.full && this.available(now, panic)
  }

  // Count a connection on this backend. The returned lease must be released exactly
  // once; releasing it twice is harmless, which is what keeps live counts honest on
  // every path that can end a connection.
  acquire () {
    this.live++
    this.total++
    const lease = new Lease(this)
    this.leased(lease) // the trial, when ejected
    return lease
  }

  // A lease ended (lease.js, once): its counts, and the trial's slot.
  leaseEnded (lease, bytesIn, bytesOut) {
    this.live--
    this.bytesIn += bytesIn
    this.bytesOut += bytesOut
    this.leaseDone(lease)
    if (this.onFree !== null) this.onFree(this)
  }

  // Up again: slow start ramps the effective weight from a tenth (a recovery, or a
  // backend that joined after start-up).
  cameUp (previous) {
    if (this.slowStart > 0 && (previous === 'down' || this.rampOnFirstUp)) this.rampFrom = this.changedAt
  }

  // --- latency, for least-time ---

  // One latency sample in ms (tcp: connect time plus the wait for the backend's first
  // byte; http: time to the response headers). A peak-EWMA: a sample above the current
  // estimate replaces it at once; lower ones pull it down with a time constant of 10s.
  observeLatency (ms) {
    const now = this.now()
    const w = this.latencyAt === null ? 0 : Math.exp(-Math.max(0, now - this.latencyAt) / LATENCY_DECAY_MS)
    const current = this.latency * w
    this.latency = ms > current ? ms : current + ms * (1 - w)
    this.latencyAt = now
    // The same sample feeds the response-time histogram of /status and /metrics.
    this.responseTimes[histogram.bucketOf(ms)]++
    this.responseTimeSum += ms
  }

  // The estimate now, in ms, or null when never measured. It decays toward zero while
  // no sample comes, so a backend that was slow once is tried again later.
  latencyEstimate () {
    if (this.latencyAt === null) return null
    return this.latency * Math.exp(-Math.max(0, this.now() - this.latencyAt) / LATENCY_DECAY_MS)
  }

  // --- settings: the command line, a reload, an operator ---

  // New settings from a reload (weight, max-conn, slow-start, backup), at once.
  configure ({ weight, maxConn, slowStart, backup }) {
    this.weight = weight
    this.maxConn = maxConn
    this.slowStart = slowStart
    this.backup = backup
  }

  setWeight (weight) {
    this.weight = weight
  }

  // Taken out of the upstream (no new traffic; open connections finish), or back in
  // before its last connection ended. `why`: what took it out, in words, when not DNS
  // (a port range's port that "stopped listening").
  retire (why = null) {
    this.retired = true
    this.retiredWhy = why
  }

  revive () {
    this.retired = false
    this.retiredWhy = null
  }

  // --- what an operator sets (control.js) ---

  // A Fault (fault.js) to apply to its traffic, or null. attempt.js reads `fault` and
  // says what it did with faultStruck(kind).
  setFault (fault) {
    this.fault = fault
  }

  faultStruck (kind) {
    this.faultsInjected[kind] = (this.faultsInjected[kind] || 0) + 1
  }

  // 'draining' or 'disabled': no new traffic either way, open connections go on. null
  // gives the backend back to its health state.
  setAdmin (admin) {
    this.admin = admin
    this.adminAt = admin === null ? null : this.now()
  }

  // Forget the health state and be checked again before taking traffic (after a
  // disable, during which probes were paused and the state went stale); ramp up then.
  recheck () {
    super.recheck()
    this.rampOnFirstUp = true
  }

  // The one word a person reads first: what the operator set, else whether DNS removed
  // it, else its health.
  get status () {
    if (this.admin === 'disabled') return 'disabled'
    if (this.admin === 'draining' || this.retired) return this.live > 0 ? 'draining' : 'drained'
    return this.state
  }

  // Why, in words, or null when there is nothing to say.
  get reason () {
    const left = this.live === 1 ? '1 connection left' : `${this.live} connections left`
    if (this.admin === 'disabled') return `by an operator${this.live > 0 ? `; ${left} open` : ''}`
    if (this.admin === 'draining') return `by an operator${this.live > 0 ? `; ${left}` : ''}`
    if (this.retired) {
      const why = this.retiredWhy || `no longer in DNS${this.name ? ` for ${this.name}` : ''}`
      return `${why}${this.live > 0 ? `; ${left}` : ''}`
    }
    if (this.state === 'pending') return 'not checked yet'
    if (this.state === 'down') return this.downSource === 'traffic' ? `ejected: ${this.downReason}` : this.downReason
    if (this.weight === 0) return 'weight 0: no new traffic'
    if (this.full) return `at max-conn ${this.maxConn}`
    return null
  }

  snapshot () {
    const latency = this.latencyEstimate()
    const times = this.responseTimes
    const counts = histogram.cumulative(times) // its last element counts them all
    return {
      address: this.address,
      name: this.name,
      stickyId: this.stickyId,
      weight: this.weight,
      effectiveWeight: this.effectiveWeight,
      maxConn: this.maxConn,
      slowStart: this.slowStart,
      backup: this.backup,
      state: this.state,
      up: this.isUp,
      downSource: this.downSource,
      downReason: this.downReason,
      changedAt: this.changedAt,
      lastCheck: this.lastCheck,
      draining: this.retired,
      latency: latency === null ? null : Math.round(latency * 1000) / 1000,
      live: this.live,
      total: this.total,
      failures: this.failures,
      ejections: { ...this.ejections },
      fault: this.fault === null ? null : this.fault.snapshot(this.now()),
      faultsInjected: { ...this.faultsInjected },
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      admin: this.admin,
      adminAt: this.adminAt,
      status: this.status,
      reason: this.reason,
      responseTime: {
        count: counts[counts.length - 1],
        sum: Math.round(this.responseTimeSum * 1000) / 1000,
        p50: histogram.quantile(times, 0.5),
        p90: histogram.quantile(times, 0.9),
        p99: histogram.quantile(times, 0.99),
        bounds: histogram.BOUNDS_MS,
        counts
      }
    }
  }
}

module.exports = { stickyId, Backend }
