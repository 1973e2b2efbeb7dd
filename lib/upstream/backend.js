'use strict'

const { EventEmitter } = require('events')
const { createHash } = require('crypto')
const { hashString } = require('./balancers/hash')
const { formatAddress } = require('../address')
const histogram = require('../histogram')
const { Lease } = require('./lease')

// Passive health: --eject-after failures of real traffic in a row take a backend out
// for a cool-off; after it, one trial connection is let through (half-open) and its
// success brings the backend back, its failure doubles the cool-off (up to the cap).
const FIRST_COOL_OFF_MS = 5000
const MAX_COOL_OFF_MS = 60000
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
// now, whether it is healthy, and what it has done. Counters live here so that
// per-connection bookkeeping is a few increments on an object that already exists.
//
// Health is one state, whoever found it out:
//   state       'pending' (not checked yet) | 'up' | 'down'
//   downSource  'check' (active probes, health.js) | 'traffic' (passive ejection) | null
//   downReason  why, in words, e.g. "http /health 500"
// Active checks report each probe (checkPassed / checkFailed) and own the state once
// they have taken a backend down: only `rise` passed probes bring it back. Real traffic
// reports through its Lease (succeeded / failed); `ejectAfter` failures in a row eject
// an up backend (see failed() for whose failures count), and only traffic (the half-open trial) brings it back, since a
// probe passing says little about a backend whose real connections fail.
// Emits 'down' (reason, previousState) and 'up' (reason, previousState) when the state
// changes, and 'down' again when probes take over a backend that traffic took out;
// 'trial-failed' (reason) when the one connection let through an ejection failed.
class Backend extends EventEmitter {
  // `rise` and `fall` (--rise, --fall) matter only to a `checked` backend; `ejectAfter`
  // (--eject-after) is passive health's, 0 for never.
  constructor (spec, {
    now = Date.now, checked = false, rise = null, fall = null, ejectAfter = 0, rampOnFirstUp = false, onFree = null
  } = {}) {
    super()
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
    this.now = now
    this.rise = rise
    this.fall = fall
    this.ejectAfter = ejectAfter

    this.live = 0
    this.total = 0
    this.failures = 0
    this.bytesIn = 0 // client -> backend
    this.bytesOut = 0 // backend -> client

    this.responseTimes = histogram.createCounts() // per bucket, see histogram.js
    this.responseTimeSum = 0 // ms

    this.state = checked ? 'pending' : 'up'
    this.downSource = null
    this.downReason = null
    this.changedAt = now()
    this.retired = false // taken out of the upstream (DNS, reload, operator): no new traffic
    this.retiredWhy = null // what took it out, when not DNS (retire)
    this.admin = null // set by an operator (control.js): 'draining' | 'disabled'; no new traffic
    this.adminAt = null
    this.onFree = onFree // called when a lease is released (the upstream serves its queue)

    this.checkPasses = 0 // consecutive probes passed / failed
    this.checkFails = 0
    this.lastCheck = null // the last probe's result, in words

    this.consecutiveFailures = 0 // of real traffic
    this.streakCause = null // the cause every failure of the streak had, or null if they differ
    this.streakClient = null // the one client whose requests failed, of those that may be their doing
    this.streakTrusted = false // the streak has failures no single client could have caused
    this.ejections = {} // cause -> how often passive health took this backend out for it
    this.ejectedUntil = 0 // while passive health has this backend out: when a trial may go
    this.coolOff = FIRST_COOL_OFF_MS
    this.trial = null // the one Lease let through to test an ejected backend

    this.rampOnFirstUp = rampOnFirstUp // joined after start-up: ramp up like a recovery
    this.rampFrom = null // while slow start ramps the effective weight: when it began
    if (!checked && rampOnFirstUp && slowStart > 0) this.rampFrom = this.changedAt // up unchecked

    this.latency = 0 // peak-EWMA of latency samples, ms, as of latencyAt
    this.latencyAt = null // when the last sample came; null: never measured

    this.fault = null // a fault injected on it (fault.js; the upstream sets and ends it), or null
    this.faultsInjected = {} // kind ('delay', 'error', 'reset') -> requests or connections struck
  }

  get isUp () {
    return this.state === 'up'
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
    if (this.downSource === 'traffic' && this.trial === null) this.trial = lease
    return lease
  }

  // A lease ended (lease.js, once): its counts, and a trial that ended without a
  // verdict (the client left first) frees the slot.
  leaseEnded (lease, bytesIn, bytesOut) {
    this.live--
    this.bytesIn += bytesIn
    this.bytesOut += bytesOut
    if (this.trial === lease) this.trial = null
    if (this.onFree !== null) this.onFree(this)
  }

  // --- passive health: real traffic, reported through the Lease ---

  // Real traffic was served (tcp: the backend sent its first byte or closed cleanly;
  // http: an answer that is not a failure by --eject-on).
  succeeded () {
    this.#endStreak()
    if (this.downSource === 'traffic') this.#becomeUp('a connection succeeded')
  }

  // Real traffic failed: `cause` is a word for the metrics ('connect', 'closed',
  // 'reset', 'timeout', 'invalid', or the status answered, e.g. '503'). `client` is
  // null when the failure cannot be the request's doing (a connect refused; a request
  // that another backend served); otherwise the client's address: failures that may be
  // a request's doing eject only together with others, so that one client sending
  // requests a backend chokes on cannot take a healthy backend out, whatever it sends.
  // Only the failure of the trial connection extends an ejection; connections that
  // started before it are already counted.
  failed (reason, lease = null, cause = 'failed', client = null) {
    this.failures++
    this.consecutiveFailures++
    if (this.consecutiveFailures === 1) this.streakCause = cause
    else if (this.streakCause !== cause) this.streakCause = null
    if (client === null) this.streakTrusted = true
    else if (this.streakClient === null) this.streakClient = client
    else if (this.streakClient !== client) this.streakTrusted = true
    if (this.state === 'down') {
      if (this.downSource !== 'traffic' || lease === null || lease !== this.trial) return
      // the trial failed: out again, for longer
      this.trial = null
      this.coolOff = Math.min(this.coolOff * 2, MAX_COOL_OFF_MS)
      this.ejectedUntil = this.now() + this.coolOff
      this.downReason = `${reason} (trial); next try in ${this.coolOff / 1000}s`
      this.emit('trial-failed', this.downReason)
    } else if (this.ejectAfter > 0 && this.consecutiveFailures >= this.ejectAfter && this.streakTrusted) {
      this.ejectedUntil = this.now() + this.coolOff
      this.ejections[cause] = (this.ejections[cause] || 0) + 1
      this.#becomeDown('traffic', `${this.#streak(reason)}; next try in ${this.coolOff / 1000}s`)
    }
  }

  // "5 answers of 503 in a row", or "5 failures in a row (connection refused)".
  #streak (reason) {
    const n = this.consecutiveFailures
    const cause = this.streakCause
    if (cause !== null && /^\d+$/.test(cause)) return `${n} answers of ${cause} in a row`
    return `${n} failures in a row (${reason})`
  }

  #endStreak () {
    this.consecutiveFailures = 0
    this.streakCause = null
    this.streakClient = null
    this.streakTrusted = false
  }

  // --- active health: one call per probe, from health.js ---

  checkPassed (reason) {
    this.lastCheck = reason
    this.checkFails = 0
    this.checkPasses++
    if (this.state === 'pending') this.#becomeUp(reason)
    else if (this.downSource === 'check' && this.checkPasses >= this.rise) this.#becomeUp(reason)
  }

  checkFailed (reason) {
    this.lastCheck = reason
    this.checkPasses = 0
    this.checkFails++
    if (this.state === 'pending') this.#becomeDown('check', reason)
    else if (this.downSource === 'check') this.downReason = reason // still down, for the latest reason
    else if (this.checkFails >= this.fall) this.#becomeDown('check', reason)
  }

  // Active checks were turned off (a reload): a backend they had taken out, or had not
  // checked yet, is up; passive health goes on.
  checksOff () {
    this.checkPasses = 0
    this.checkFails = 0
    if (this.state === 'pending' || this.downSource === 'check') this.#becomeUp('health checks turned off')
  }

  // Down, or still down for another reason: when probes confirm a backend that traffic
  // took out, they own it from then on (it comes back after `rise` passed probes, not
  // through a trial) and that is said too, as a 'down' from 'down'.
  #becomeDown (source, reason) {
    const previous = this.state
    const previousSource = this.downSource
    this.state = 'down'
    this.downSource = source
    this.downReason = reason
    if (source === 'check') {
      this.ejectedUntil = 0
      this.trial = null
    }
    if (previous !== 'down') this.changedAt = this.now()
    if (previous !== 'down' || previousSource !== source) this.emit('down', reason, previous)
  }

  #becomeUp (reason) {
    const previous = this.state
    this.state = 'up'
    this.downSource = null
    this.downReason = null
    this.ejectedUntil = 0
    this.trial = null
    this.coolOff = FIRST_COOL_OFF_MS
    this.#endStreak()
    this.changedAt = this.now()
    if (this.slowStart > 0 && (previous === 'down' || this.rampOnFirstUp)) this.rampFrom = this.changedAt
    this.emit('up', reason, previous)
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

  setThresholds ({ rise, fall, ejectAfter }) {
    this.rise = rise
    this.fall = fall
    this.ejectAfter = ejectAfter
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
  // disable, during which probes were paused and the state went stale).
  recheck () {
    this.state = 'pending'
    this.downSource = null
    this.downReason = null
    this.ejectedUntil = 0
    this.trial = null
    this.checkPasses = 0
    this.checkFails = 0
    this.#endStreak()
    this.changedAt = this.now()
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

module.exports = { stickyId, Backend, FIRST_COOL_OFF_MS }
