'use strict'

// The wait queue of one upstream: connections (tcp) or requests (http) waiting for a
// backend slot while every usable backend is at its max-conn, as HAProxy's server queue.
// First come, first served; each waiter gives up after `timeout` ms. A Set keeps
// insertion order and removes a waiter that gave up in O(1). A waiter whose sticky
// cookie names a backend (ctx.stickTo, see upstream.js #stuck) is `pinned`: it may wait
// for that one backend, so it holds up neither the round nor newcomers for others.

// Past this many waiting, a new one is refused at once rather than held without bound.
const MAX_WAITERS = 1024

class WaitQueue {
  constructor ({ timeout, limit = MAX_WAITERS }) {
    this.timeout = timeout
    this.limit = limit
    this.waiters = new Set()
    this.pinned = 0 // waiters with a sticky cookie
    this.timeouts = 0 // waiters that gave up after `timeout`
    this.serving = false
    this.again = false
  }

  // A reload's --queue-timeout: for waiters that come from now on (those waiting keep
  // the timer they have).
  configure (timeout) {
    this.timeout = timeout
  }

  get size () {
    return this.waiters.size
  }

  // Would add() take a waiter now?
  get open () {
    return this.timeout !== 0 && this.waiters.size < this.limit
  }

  // Take a waiter out (it was served, gave up or left): false if it was not there.
  remove (waiter) {
    if (!this.waiters.delete(waiter)) return false
    if (waiter.pinned) this.pinned--
    return true
  }

  // -> Waiter, or null when there is no queue (timeout 0) or it is full.
  // onLease(lease) once a slot is theirs, or onLease(null, reason) when they gave up.
  add (ctx, tried, onLease) {
    if (this.timeout === 0 || this.waiters.size >= this.limit) return null
    const waiter = new Waiter(this, ctx, tried, onLease)
    this.waiters.add(waiter)
    if (waiter.pinned) this.pinned++
    return waiter
  }

  // Offer slots to the waiters in order: take(waiter) returns a Lease or null. The
  // first waiter that nothing can serve stops the round, unless it only could not be
  // served because of the backends it already tried, or it is pinned (another waiter
  // may fit).
  // onLease runs synchronously from here; a serve() from inside one is folded into the
  // round in course.
  serve (take) {
    if (this.serving) {
      this.again = true
      return
    }
    this.serving = true
    try {
      do {
        this.again = false
        for (const waiter of this.waiters) {
          const lease = take(waiter)
          if (lease === null) {
            if (waiter.tried === null && !waiter.pinned) break
            continue
          }
          this.remove(waiter)
          clearTimeout(waiter.timer)
          waiter.onLease(lease)
        }
      } while (this.again && this.waiters.size > 0)
    } finally {
      this.serving = false
    }
  }

  expire (waiter) {
    if (!this.remove(waiter)) return
    this.timeouts++
    waiter.onLease(null, `no backend slot within ${this.timeout}ms`)
  }

  // Every waiter gives up now (the listener is closing).
  clear (reason) {
    for (const waiter of this.waiters) {
      this.remove(waiter)
      clearTimeout(waiter.timer)
      waiter.onLease(null, reason)
    }
  }
}

class Waiter {
  constructor (queue, ctx, tried, onLease) {
    this.queue = queue
    this.ctx = ctx
    this.tried = tried
    this.onLease = onLease
    this.pinned = Boolean(ctx.stickTo)
    this.timer = setTimeout(() => queue.expire(this), queue.timeout)
  }

  // The client left: stop waiting. Idempotent; after a lease was handed over it does
  // nothing (release that lease instead).
  cancel () {
    if (this.queue.remove(this)) clearTimeout(this.timer)
  }
}

module.exports = { WaitQueue }
