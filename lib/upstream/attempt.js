'use strict'

const { performance } = require('perf_hooks')

// The one path from a client's connection (tcp) or request (http) to a backend. It
// takes a slot on the backend the mode picks, or a place in the queue while every
// backend is at its max-conn; when the owner reports that the backend failed, it
// decides whom to blame and whether to try another backend (never one that already
// failed this client), within --retries and the retry budget; it gives up with a
// reason. The owner dials and moves the bytes; the attempt decides where, how often,
// and whose fault.
//
//   const attempt = new Attempt(upstream, ctx, owner)
//   attempt.start()           owner.seated(lease) now or once the queue hands a slot,
//                             or owner.unserved(reason): nothing could take it
//   attempt.succeeded(ms)     the backend answered (ms: a latency sample, or -1)
//   attempt.answered(status, how)  http: the backend answered `status`; true when that
//                             answer is to be dropped for a retry elsewhere
//   attempt.failed(reason, how)  the backend failed before answering: blame it, release
//                             its slot and, where safe, seat the client elsewhere
//   attempt.blame(reason, cause)  it failed after it had answered; the slot is kept
//   attempt.resendsAfter(cause)  --retry-on reset: a request of any method may go again
//   attempt.shortage()        lila itself could not connect: release, blame nobody
//   attempt.release(in, out)  the client is done: release the slot (exactly once)
//   attempt.cancel()          the client left while queued (or held by a fault)
//   attempt.queuedMs          how long the backend seated now was waited for (0: not queued)
//
// A fault injected on the backend seated (fault.js) is applied here, where every kind of
// request and connection starts on a backend: its delay holds the client (the slot
// taken) before owner.seated(lease); an error or a reset goes to
// owner.injected({ status }) or owner.injected({ reset: true }) instead: the owner
// answers `status` as the backend's answer (http: through answered(), so --retry-on and
// --eject-on judge it; tcp: as a connection the backend closed at once, through
// failed()), or resets the client. The hold counts in the backend's latency samples.
//
// Whose fault: a backend that fails before the request reached it (a connect refused or
// timed out) is blamed at once. A failure after it (an answer --eject-on counts, a
// close or reset without an answer, a timeout) may be the request's doing, so when
// the request is retried the verdict waits for the next backend: if it serves the
// request, the first one is blamed; if it fails it too, the request is, and neither
// backend is (nor is the request tried further). A failure that could not be compared
// counts against the backend with the client's address, which ejects only together
// with other evidence (Backend.failed): one client cannot take a healthy backend out.
// That is for requests (`perRequest`, http); a tcp connection is opaque to lila, and a
// backend that resets connections after the client's first bytes is blamed for it.
//
// `ctx` is what the mode keys on (clientAddress; http adds path). `owner.unserved`
// hears null when no backend could take it now (none usable, the queue full or off, or
// the tries used up) and the queue's reason when it gave up waiting; and `exhausted`,
// true when backends could take it but every one is at its max-conn and the queue is
// full or off (lila's own capacity, which gRPC calls RESOURCE_EXHAUSTED).
class Attempt {
  // The fields #clear sets, declared so that V8 keeps them in the object itself: set
  // only by a method, they went to an array of their own (24 bytes more an attempt).
  lease; waiter; tried; attempts; lastBackend; lastReason; freshRetried; pending
  retryCause; retrySpends; everywhere; hold; heldMs; queuedAt; queuedMs

  constructor (upstream, ctx, owner, { perRequest = false } = {}) {
    this.upstream = upstream
    this.ctx = ctx
    this.owner = owner
    this.suspect = perRequest ? ctx.clientAddress : null // whose request a failure may be
    this.#clear()
  }

  // The owner's next request, from the same client (an HTTP/1.1 exchange made new,
  // http/forwarding.js): a fresh attempt, in the same object. The last one let go of
  // its slot, its place in the queue and any fault's hold (release, cancel).
  renew (upstream) {
    this.upstream = upstream
    this.#clear()
  }

  #clear () {
    this.lease = null // the current backend's slot
    this.waiter = null // while queued
    this.tried = null // Set of the backends that failed this client
    this.attempts = 0 // backends seated so far
    this.lastBackend = null // the last failure, for the owner's answer
    this.lastReason = null
    this.freshRetried = false // the keep-alive race was retried on this backend
    this.pending = null // { lease, reason, cause, counts }: a failure waiting for the next backend's verdict
    this.retryCause = null // why the next seat is a retry, and whether it spends budget
    this.retrySpends = false
    this.everywhere = null // the request failed on two backends: ['A reason', 'B reason']
    this.hold = null // { timer, fault, go } while a fault's delay holds the client
    this.heldMs = 0 // how long a fault held it on the current backend (for its latency)
    this.queuedAt = -1 // when it went into the queue (performance.now()), while it waits
    this.queuedMs = 0 // how long the current seat was waited for in the queue
  }

  get backend () {
    return this.lease === null ? null : this.lease.backend
  }

  // What the owner tells the client when it gives up.
  get failure () {
    if (this.everywhere !== null) return `the request failed on every backend it tried: ${this.everywhere.join('; ')}`
    return `backend ${this.lastBackend} ${this.lastReason}`
  }

  start () {
    this.upstream.budget.request()
    this.#seat()
  }

  #seat () {
    if (this.attempts > this.upstream.retries) return this.#unserved(null)
    const lease = this.upstream.acquire(this.ctx, this.tried)
    if (lease !== null) return this.#seated(lease)
    this.waiter = this.upstream.enqueue(this.ctx, this.tried, (lease, reason) => this.#queued(lease, reason))
    if (this.waiter !== null) this.queuedAt = performance.now()
    // No place to wait: while a backend could take it, they are all full (exhausted).
    if (this.waiter === null) this.#unserved(null, this.upstream.couldServe(this.tried))
  }

  #queued (lease, reason) {
    this.waiter = null
    if (lease === null) return this.#unserved(reason)
    this.#seated(lease)
  }

  #seated (lease) {
    this.attempts++
    this.lease = lease
    this.queuedMs = this.queuedAt < 0 ? 0 : performance.now() - this.queuedAt
    this.queuedAt = -1
    this.freshRetried = false
    this.heldMs = 0
    if (this.retryCause !== null) {
      this.upstream.retried(this.retryCause, this.retrySpends)
      this.retryCause = null
    }
    const fault = lease.backend.fault
    if (fault !== null && fault.strikes()) return this.#inject(lease, fault)
    this.owner.seated(lease)
  }

  // A fault strikes this client on this backend (see the top): held for its delay
  // first, if it has one.
  // The fault ending meanwhile lets it go on to the backend at once (`over`).
  #inject (lease, fault) {
    if (fault.delay === 0) return this.#strike(lease, fault)
    lease.backend.faultStruck('delay')
    const since = Date.now()
    const go = (over = false) => {
      this.#unhold()
      if (this.lease !== lease) return
      this.heldMs = over ? Date.now() - since : fault.delay
      if (over) this.owner.seated(lease)
      else this.#strike(lease, fault)
    }
    this.hold = { timer: setTimeout(go, fault.delay), fault, go }
    fault.hold(go)
  }

  #strike (lease, fault) {
    if (fault.status > 0) {
      lease.backend.faultStruck('error')
      this.owner.injected({ status: fault.status })
    } else if (fault.reset) {
      lease.backend.faultStruck('reset')
      this.owner.injected({ reset: true })
    } else {
      this.owner.seated(lease)
    }
  }

  #unhold () {
    const hold = this.hold
    if (hold === null) return
    this.hold = null
    clearTimeout(hold.timer)
    hold.fault.letGo(hold.go)
  }

  #unserved (reason, exhausted = false) {
    this.#settle()
    this.owner.unserved(reason, exhausted)
  }

  #retry (cause, spends) {
    this.retryCause = cause
    this.retrySpends = spends
    this.#seat()
  }

  // May the client go to another backend? Tries left, one that could take it, and for
  // a request the backend saw (`spends`), the retry budget.
  #mayRetry (spends) {
    if (this.attempts > this.upstream.retries || !this.upstream.couldServe(this.tried)) return false
    return !spends || this.upstream.budget.allows()
  }

  // The current backend is out of the running for this client.
  #leave () {
    const lease = this.lease
    this.lease = null
    ;(this.tried ||= new Set()).add(lease.backend)
    this.lastBackend = lease.backend.address
    return lease
  }

  succeeded (latencyMs = -1) {
    this.lease.succeeded()
    if (latencyMs >= 0) this.lease.backend.observeLatency(latencyMs + this.heldMs)
    // Another backend served what the pending one failed: that one is to blame.
    const pending = this.pending
    this.pending = null
    if (pending !== null && pending.counts) pending.lease.failed(pending.reason, pending.cause)
  }

  // http: the backend answered `status`. An answer --eject-on names is a failure of the
  // backend; one --retry-on names is tried on another backend when `replayable` (the
  // owner can send the request again), before any byte of it reached the client.
  // Returns true when it retried (the owner drops this answer: owner.seated comes with
  // the next backend), false when the owner forwards the answer.
  answered (status, { replayable, bytesIn = 0, latencyMs = -1 }) {
    const { upstream } = this
    const counts = upstream.ejectOn.has(status)
    const retryable = upstream.retryOn.has(status)
    if (!counts && !retryable) {
      this.succeeded(latencyMs)
      return false
    }
    const reason = `answered ${status}`
    const cause = String(status)
    if (this.pending !== null) {
      this.#blameRequest(this.lease, reason)
      return false
    }
    const lease = this.lease
    ;(this.tried ||= new Set()).add(lease.backend) // a retry goes to another backend
    if (retryable && replayable && this.#mayRetry(true)) {
      this.#leave()
      this.lastReason = reason
      this.#defer(lease, reason, cause, counts)
      this.#retry(cause, true)
      lease.release(bytesIn, 0)
      return true
    }
    if (counts) lease.failed(reason, cause, this.suspect)
    else this.succeeded(latencyMs)
    return false
  }

  // The current backend failed the client before answering; its slot is released.
  // `sent`: the request (tcp: the client's bytes) had reached it, so the failure may
  // be the request's doing (see the top). `cause`: a word for the metrics, see
  // Backend.failed. The client is seated elsewhere (owner.seated, or owner.unserved
  // when no backend is left) when `replayable` (the owner can send what it sent again),
  // the failure is not a timeout (a backend too slow to answer is not tried elsewhere,
  // which would double the load on a struggling service), and --retries and the budget
  // allow. The failed slot is released after the retry took its own, so a waiter in the
  // queue does not take the retry's turn. Returns true when it retried; otherwise the
  // owner answers or closes the client (attempt.failure says why).
  failed (reason, { cause = 'connect', sent = false, replayable = true, bytesIn = 0 } = {}) {
    const lease = this.#leave()
    this.lastReason = reason
    let retry = false
    if (!sent) {
      lease.failed(reason, cause)
      retry = replayable && this.#mayRetry(false)
    } else if (this.pending !== null) {
      this.#blameRequest(lease, reason)
    } else {
      retry = replayable && cause !== 'timeout' && this.#mayRetry(true)
      if (retry) this.#defer(lease, reason, cause, true)
      else lease.failed(reason, cause, this.suspect)
    }
    if (retry) this.#retry(cause, sent)
    else this.#settle()
    lease.release(bytesIn, 0)
    return retry
  }

  // --retry-on reset (Envoy's retry_on: reset, HAProxy's retry-on): may a request the
  // owner would not send again (a POST, a gRPC call: the backend may have acted on it)
  // go to another backend all the same, after its backend closed or reset (`cause`)
  // before any answer reached the client? The user said so, knowing it may then run
  // twice; within --retries and the budget, as failed() decides. Not after a timeout:
  // a slow backend is not given a second backend's load.
  resendsAfter (cause) {
    return this.upstream.retryReset && (cause === 'reset' || cause === 'closed')
  }

  // The verdict on a failure waits for the next backend's. Not a trial's: a backend
  // that traffic took out and that fails its one trial stays out, for longer, at once.
  #defer (lease, reason, cause, counts) {
    if (lease.isTrial) {
      if (counts) lease.failed(reason, cause)
    } else {
      this.pending = { lease, reason, cause, counts }
    }
  }

  // The request failed on two backends after reaching them: it is to blame, not them.
  // Neither lease gets a verdict.
  #blameRequest (lease, reason) {
    const first = this.pending
    this.pending = null
    this.everywhere = [`${first.lease.backend.address} ${first.reason}`, `${lease.backend.address} ${reason}`]
    this.upstream.failedEverywhere()
  }

  // A pending failure that no other backend could judge counts, as the client's.
  #settle () {
    const pending = this.pending
    this.pending = null
    if (pending !== null && pending.counts) pending.lease.failed(pending.reason, pending.cause, this.suspect)
  }

  // A pooled connection the backend had already closed (the keep-alive race) is not the
  // backend failing: the owner may try once more on a fresh connection to the same
  // backend. True the first time for each backend.
  retryFresh () {
    if (this.freshRetried) return false
    this.freshRetried = true
    return true
  }

  // The backend failed after it answered (a reset mid-stream, a cut response): blamed as
  // the client's (the request may have led to it), nothing replayed; the slot is
  // released with the client.
  blame (reason, cause = 'reset') {
    this.lease.failed(reason, cause, this.suspect)
  }

  // lila itself could not open a backend connection (out of descriptors): not the
  // backend's fault, and no other backend would do better. The slot goes back.
  shortage (bytesIn = 0) {
    const lease = this.lease
    this.lease = null
    lease.release(bytesIn, 0)
    this.#settle()
  }

  // The client is done. Releasing twice is harmless; the lease stays readable (which
  // backend served it) for the logs.
  release (bytesIn, bytesOut) {
    this.#unhold()
    if (this.lease !== null) this.lease.release(bytesIn, bytesOut)
    this.#settle()
  }

  cancel () {
    this.#unhold()
    this.#settle()
    if (this.waiter === null) return
    this.waiter.cancel()
    this.waiter = null
  }
}

module.exports = { Attempt }
