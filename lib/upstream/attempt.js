'use strict'

// The one path from a client's connection (tcp) or request (http) to a backend. It
// takes a slot on the backend the mode picks, or a place in the queue while every
// backend is at its max-conn; when the owner reports that the backend failed, it
// blames that backend and tries another (never one that already failed this client)
// while the retry budget and the owner allow; it gives up with a reason. The owner
// dials and moves the bytes; the attempt decides where, how often, and whose fault.
//
//   const attempt = new Attempt(upstream, ctx, owner, retries)
//   attempt.start()           owner.seated(lease) now or once the queue hands a slot,
//                             or owner.unserved(reason): nothing could take it
//   attempt.succeeded(ms)     the backend answered (ms: a latency sample, or -1)
//   attempt.failed(reason, how)  the backend failed before answering: blame it, release
//                             its slot and, where safe, seat the client elsewhere
//   attempt.blame(reason)     it failed after it had answered: blame it, keep the slot
//   attempt.shortage()        lila itself could not connect: release, blame nobody
//   attempt.release(in, out)  the client is done: release the slot (exactly once)
//   attempt.cancel()          the client left while queued
//
// `ctx` is what the mode keys on (clientAddress; http adds path). `owner.unserved`
// hears null when no backend could take it now (none usable, the queue full or off, or
// the tries used up) and the queue's reason when it gave up waiting.
class Attempt {
  constructor (upstream, ctx, owner, retries) {
    this.upstream = upstream
    this.ctx = ctx
    this.owner = owner
    this.retries = retries // other backends that may be tried after the first
    this.lease = null // the current backend's slot
    this.waiter = null // while queued
    this.tried = null // Set of the backends that failed this client
    this.attempts = 0 // backends seated so far
    this.lastBackend = null // the last failure, for the owner's answer
    this.lastReason = null
    this.freshRetried = false // the keep-alive race was retried on this backend
  }

  get backend () {
    return this.lease === null ? null : this.lease.backend
  }

  start () {
    this.#seat()
  }

  #seat () {
    if (this.attempts > this.retries) return this.owner.unserved(null)
    const lease = this.upstream.acquire(this.ctx, this.tried)
    if (lease !== null) return this.#seated(lease)
    this.waiter = this.upstream.enqueue(this.ctx, this.tried, (lease, reason) => this.#queued(lease, reason))
    if (this.waiter === null) this.owner.unserved(null)
  }

  #queued (lease, reason) {
    this.waiter = null
    if (lease === null) return this.owner.unserved(reason)
    this.#seated(lease)
  }

  #seated (lease) {
    this.attempts++
    this.lease = lease
    this.freshRetried = false
    this.owner.seated(lease)
  }

  succeeded (latencyMs = -1) {
    this.lease.succeeded()
    if (latencyMs >= 0) this.lease.backend.observeLatency(latencyMs)
  }

  // The current backend failed the client before answering. It is blamed and its slot
  // released; the client is seated elsewhere (owner.seated, or owner.unserved when no
  // backend is left) when `replayable` (the owner can send what it sent again) and the
  // failure is not `slow`: a backend too slow to answer is not tried elsewhere, which
  // would double the load on a struggling service. The failed slot is released after
  // the retry took its own, so a waiter in the queue does not take the retry's turn.
  // Returns true when it retried; otherwise the owner answers or closes the client.
  failed (reason, { replayable = true, slow = false, bytesIn = 0 } = {}) {
    const lease = this.lease
    this.lease = null
    lease.failed(reason)
    ;(this.tried ||= new Set()).add(lease.backend)
    this.lastBackend = lease.backend.address
    this.lastReason = reason
    const retry = replayable && !slow
    if (retry) this.#seat()
    lease.release(bytesIn, 0)
    return retry
  }

  // A pooled connection the backend had already closed (the keep-alive race) is not the
  // backend failing: the owner may try once more on a fresh connection to the same
  // backend. True the first time for each backend.
  retryFresh () {
    if (this.freshRetried) return false
    this.freshRetried = true
    return true
  }

  // The backend failed after it answered (a reset mid-stream, a cut response): blamed,
  // nothing replayed; the slot is released with the client.
  blame (reason) {
    this.lease.failed(reason)
  }

  // lila itself could not open a backend connection (out of descriptors): not the
  // backend's fault, and no other backend would do better. The slot goes back.
  shortage (bytesIn = 0) {
    const lease = this.lease
    this.lease = null
    lease.release(bytesIn, 0)
  }

  // The client is done. Releasing twice is harmless; the lease stays readable (which
  // backend served it) for the logs.
  release (bytesIn, bytesOut) {
    if (this.lease !== null) this.lease.release(bytesIn, bytesOut)
  }

  cancel () {
    if (this.waiter === null) return
    this.waiter.cancel()
    this.waiter = null
  }
}

module.exports = { Attempt }
