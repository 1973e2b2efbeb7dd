'use strict'

const { EventEmitter } = require('events')

// Passive health: --eject-after failures of real traffic in a row take a backend out
// for a cool-off; after it, one trial connection is let through (half-open) and its
// success brings the backend back, its failure doubles the cool-off (up to the cap).
const FIRST_COOL_OFF_MS = 5000
const MAX_COOL_OFF_MS = 60000

// A backend's health as one state, whoever found it out: the state machine a Backend
// (backend.js) is built on, driven by probes and by real traffic. One object with the
// Backend, so that admission reads `state` per request as a field, not through
// another object.
//
//   state       'pending' (not checked yet) | 'up' | 'down'
//   downSource  'check' (active probes, health.js) | 'traffic' (passive ejection) | null
//   downReason  why, in words, e.g. "http /health 500"
// Active checks report each probe (checkPassed / checkFailed) and own the state once
// they have taken a backend down: only `rise` passed probes bring it back. Real traffic
// reports through its Lease (succeeded / failed); `ejectAfter` failures in a row eject
// an up backend (see failed() for whose failures count), and only traffic (the
// half-open trial) brings it back, since a probe passing says little about a backend
// whose real connections fail.
// Emits 'down' (reason, previousState) and 'up' (reason, previousState) when the state
// changes, and 'down' again when probes take over a backend that traffic took out;
// 'trial-failed' (reason) when the one connection let through an ejection failed.
class BackendHealth extends EventEmitter {
  // `rise` and `fall` (--rise, --fall) matter only to a `checked` backend; `ejectAfter`
  // (--eject-after) is passive health's, 0 for never.
  constructor ({ now, checked, rise, fall, ejectAfter }) {
    super()
    this.now = now
    this.rise = rise
    this.fall = fall
    this.ejectAfter = ejectAfter

    this.state = checked ? 'pending' : 'up'
    this.downSource = null
    this.downReason = null
    this.changedAt = now()

    this.checkPasses = 0 // consecutive probes passed / failed
    this.checkFails = 0
    this.lastCheck = null // the last probe's result, in words

    this.failures = 0 // of real traffic, ever
    this.consecutiveFailures = 0 // of real traffic
    this.streakCause = null // the cause every failure of the streak had, or null if they differ
    this.streakClient = null // the one client whose requests failed, of those that may be their doing
    this.streakTrusted = false // the streak has failures no single client could have caused
    this.ejections = {} // cause -> how often passive health took this backend out for it
    this.ejectedUntil = 0 // while passive health has this backend out: when a trial may go
    this.coolOff = FIRST_COOL_OFF_MS
    this.trial = null // the one Lease let through to test an ejected backend
  }

  get isUp () {
    return this.state === 'up'
  }

  // A lease on this backend began: the first while it is ejected is the trial.
  leased (lease) {
    if (this.downSource === 'traffic' && this.trial === null) this.trial = lease
  }

  // A lease ended; a trial that ended without a verdict (the client left first) frees
  // the slot.
  leaseDone (lease) {
    if (this.trial === lease) this.trial = null
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

  setThresholds ({ rise, fall, ejectAfter }) {
    this.rise = rise
    this.fall = fall
    this.ejectAfter = ejectAfter
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
  }

  // Up again, from `previous`: what the Backend does first (slow start).
  cameUp (previous) {}

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
    this.cameUp(previous)
    this.emit('up', reason, previous)
  }
}

module.exports = { BackendHealth, FIRST_COOL_OFF_MS }
