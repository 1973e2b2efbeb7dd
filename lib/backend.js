'use strict'

const { EventEmitter } = require('events')
const { hashString } = require('./balancers/hash')
const { formatAddress } = require('./address')

// Passive health: this many consecutive connect failures take a backend out for a
// cool-off; after it, one trial connection is let through (half-open) and its success
// brings the backend back, its failure doubles the cool-off (up to the cap).
const FAILURES_TO_EJECT = 3
const FIRST_COOL_OFF_MS = 5000
const MAX_COOL_OFF_MS = 60000

// One backend server: where it is, how much traffic it may take, how much it has
// right now, whether it is healthy, and what it has done. Counters live here so that
// per-connection bookkeeping is a few increments on an object that already exists.
// Emits 'down' (reason) and 'up' (reason) when its health flips.
class Backend extends EventEmitter {
  constructor ({ host, port, weight = 1, maxConn = null, backup = false }, { now = Date.now } = {}) {
    super()
    this.host = host
    this.port = port
    this.address = formatAddress(host, port)
    this.weight = weight
    this.maxConn = maxConn
    this.backup = backup
    this.hashSeed = hashString(this.address)
    this.now = now

    this.live = 0
    this.total = 0
    this.failures = 0
    this.bytesIn = 0 // client -> backend
    this.bytesOut = 0 // backend -> client

    this.consecutiveFailures = 0
    this.ejectedUntil = 0 // > 0 while passive health has this backend out (or on trial)
    this.coolOff = FIRST_COOL_OFF_MS
    this.trial = null // the one Lease let through to test an ejected backend
    this.downReason = null
  }

  // The weight balancers use; later it also ramps up after a recovery (slow start).
  get effectiveWeight () {
    return this.weight
  }

  get isUp () {
    return this.ejectedUntil === 0
  }

  // May a new connection go here now? Down backends are skipped until their cool-off
  // ends; then exactly one trial at a time goes through.
  usable (now) {
    if (this.weight === 0) return false
    if (this.maxConn !== null && this.live >= this.maxConn) return false
    if (this.ejectedUntil !== 0) return now >= this.ejectedUntil && this.trial === null
    return true
  }

  // Count a connection on this backend. The returned lease must be released exactly
  // once; releasing it twice is harmless, which is what keeps live counts honest on
  // every path that can end a connection.
  acquire () {
    this.live++
    this.total++
    const lease = new Lease(this)
    if (this.ejectedUntil !== 0) this.trial = lease
    return lease
  }

  // Real traffic reached the backend (reported through the Lease).
  succeeded () {
    this.consecutiveFailures = 0
    if (this.ejectedUntil !== 0) {
      this.ejectedUntil = 0
      this.trial = null
      this.coolOff = FIRST_COOL_OFF_MS
      this.downReason = null
      this.emit('up', 'a connection succeeded')
    }
  }

  // Real traffic failed to reach the backend (refused, reset, timed out). Only the
  // failure of the trial connection extends an ejection; connections that started
  // before it are already counted.
  failed (reason, lease = null) {
    this.failures++
    this.consecutiveFailures++
    if (this.ejectedUntil !== 0) {
      if (lease === null || lease !== this.trial) return
      // the trial failed: out again, for longer
      this.trial = null
      this.coolOff = Math.min(this.coolOff * 2, MAX_COOL_OFF_MS)
      this.ejectedUntil = this.now() + this.coolOff
      this.downReason = reason
    } else if (this.consecutiveFailures >= FAILURES_TO_EJECT) {
      this.ejectedUntil = this.now() + this.coolOff
      this.downReason = `${this.consecutiveFailures} failures in a row (${reason})`
      this.emit('down', `${this.downReason}; next try in ${this.coolOff / 1000}s`)
    }
  }

  snapshot () {
    return {
      address: this.address,
      weight: this.weight,
      maxConn: this.maxConn,
      backup: this.backup,
      up: this.isUp,
      downReason: this.downReason,
      live: this.live,
      total: this.total,
      failures: this.failures,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut
    }
  }
}

class Lease {
  constructor (backend) {
    this.backend = backend
    this.released = false
  }

  succeeded () {
    this.backend.succeeded()
  }

  failed (reason) {
    this.backend.failed(reason, this)
  }

  release (bytesIn = 0, bytesOut = 0) {
    if (this.released) return
    this.released = true
    const backend = this.backend
    backend.live--
    backend.bytesIn += bytesIn
    backend.bytesOut += bytesOut
    // A trial that ended without a verdict (the client left first) frees the slot.
    if (backend.trial === this) backend.trial = null
  }
}

module.exports = { Backend, FAILURES_TO_EJECT, FIRST_COOL_OFF_MS, MAX_COOL_OFF_MS }
