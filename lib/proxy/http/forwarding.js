'use strict'

const { reasonOf } = require('../../errors')
const { Attempt } = require('../../upstream/attempt')
const { fieldOf } = require('./edge-calls')

// Retry-After (seconds) on lila's own 503s: no backend could take the request, or lila
// was short of descriptors or memory.
const UNAVAILABLE_RETRY_AFTER = 5
// attempt.answered's `how`, read there at once: one for every answer.
const ANSWER = { replayable: false, bytesIn: 0, latencyMs: -1 }

// An exchange's way to a backend: the owner of its Attempt (lib/upstream/attempt.js,
// which decides where the request goes, how often it is tried and whom a failure
// blames), the leg it holds on the backend seated, and what a failure there makes of
// the request: a retry on a fresh connection or elsewhere, lila's own 502/503/504, or,
// once the response started, the client cut (an HTTP/1.1 connection, an HTTP/2 stream;
// a gRPC call's ends UNAVAILABLE): a truncated response must not look complete. `x` is
// the exchange (exchange.js): read here, moved through its methods.
class Forwarding {
  constructor (x, upstream) {
    this.x = x
    this.attempt = new Attempt(upstream, x, this, { perRequest: true })
    this.spareLeg = null // a leg whose response completed: the next request's (seated)
    this.#clear()
  }

  // The exchange's next request (exchange.js begin): a new attempt, in the same objects.
  renew (upstream) {
    this.attempt.renew(upstream)
    this.#clear()
  }

  #clear () {
    this.leg = null // the request on the backend seated
    this.clientSpan = null // --otlp: the attempt's CLIENT span, the backend's parent (message/rewrite.js)
    this.interceptedBy = null // --intercept-errors: the Backend whose answer was replaced by a page
    this.lastStatus = 502 // what the last failure answers when no backend is left
  }

  // Nothing could take the request: 503 if nothing was tried, else the failure seen.
  unserved (queueReason, exhausted) {
    const { attempt, x } = this
    if (attempt.attempts === 0) {
      x.listener.countUnserved()
      const detail = queueReason === null ? '' : ` (${queueReason})`
      return x.answer(503, `no backend available${detail}`, { retryAfter: UNAVAILABLE_RETRY_AFTER, exhausted })
    }
    x.answer(this.lastStatus, attempt.failure)
  }

  // A slot on a backend: a leg to it.
  seated (lease) {
    const { x } = this
    if (x.trace !== null) this.clientSpan = x.trace.seated(x, lease)
    const { Leg } = x.listener.protocol
    const { backend } = lease
    const spare = this.spareLeg
    this.spareLeg = null
    // (Not one of the class a reload replaced: --backend-protocol changed.)
    this.leg = spare !== null && spare.constructor === Leg ? spare.renew(backend) : new Leg(x, backend, false)
    this.leg.start()
  }

  // A fault injected on the backend seated (attempt.js, upstream/fault.js): lila answers
  // `status` as that backend's answer (which the attempt judges, and may retry
  // elsewhere), or resets the client (its connection, or its HTTP/2 stream), blaming
  // nothing.
  injected ({ status = 0, reset = false }) {
    const { x } = this
    if (reset) {
      this.release()
      x.client.reset(x)
      return x.finish(false)
    }
    if (this.judged(status, { replayable: x.body.canRepeat(), bytesIn: x.bytesIn })) return
    this.release()
    x.answer(status, `a fault injected on backend ${this.attempt.backend.address}`, { quiet: true })
  }

  // The backend answered `status` (`how`: attempt.answered's): true when the answer is
  // dropped for a retry elsewhere.
  judged (status, how) {
    this.lastStatus = status // what the client gets if no other backend answers
    return this.attempt.answered(status, how)
  }

  // The backend's final head `res` came (the leg's report, through the exchange): true
  // when it is dropped, the request retried elsewhere (the leg it came on abandoned), or
  // lila's --intercept-errors page answered for it.
  answered (status, latencyMs, res) {
    const { x } = this
    const leg = this.leg
    const how = ANSWER
    how.replayable = x.body.canRepeat()
    how.bytesIn = x.bytesIn
    how.latencyMs = latencyMs
    if (x.trace !== null) x.trace.answered(status)
    const retried = this.judged(status, how)
    if (x.trace !== null) x.trace.judged(x, `answered ${status}`, retried)
    if (retried) {
      leg.abandon()
      return true
    }
    const { intercept } = x.pool // --intercept-errors: a page for the backend's status
    if (intercept === null || x.grpc !== null || intercept.get(status) === undefined) return false
    // The backend's answer is dropped for the --error-page of its status, its
    // Retry-After kept. It counts as the backend's answer (the status is), as HAProxy's
    // and nginx's count what the server said.
    this.interceptedBy = this.attempt.backend
    this.legDone(true)
    this.release()
    const retryAfter = fieldOf(res.fields, 'retry-after')
    const fields = retryAfter === undefined ? null : [['retry-after', retryAfter]]
    x.answer(status, `the backend answered ${status}`, { quiet: true, page: intercept.get(status), fields })
    return true
  }

  // The leg failed: `cause` says how (see Backend.failed; 'connect': before the request
  // went out). Before any response byte, the attempt retries where safe; `reused`: on a
  // connection that had served before, which may be the keep-alive race, tried once
  // more on a fresh one to the same backend. After the response started, the client
  // is cut so that it cannot mistake the rest for complete.
  failed (reason, cause, reused) {
    const { leg, x, attempt } = this
    if (x.done || leg === null) return
    this.leg = null
    leg.abandon()
    const backend = attempt.backend
    const { log } = x.listener
    if (x.responseStarted) {
      log.warn(`${x.head.method} ${x.path} from ${x.clientAddress}: backend ${backend.address} ${reason}; response cut`)
      attempt.blame(reason, cause)
      if (x.trace !== null) x.trace.failed(reason)
      this.release()
      return x.cutOff('backend', `backend ${backend.address} ${reason}; the answer was cut`)
    }
    // Safe to send again: nothing of the response came back, and the body allows it
    // (request-body.js: all of it held; not sent at all ('connect'), or idempotent, or
    // none of it sent yet); or the backend began an answer none of which reached the
    // client (http2/leg.js holds a small one until its end), and the request is one
    // that may be repeated. Or any request all of whose body is held, after a reset,
    // when --retry-on says reset (attempt.js resendsAfter).
    const { body } = x
    const replayable = (leg.gotBytes
      ? body.canRepeat()
      : cause === 'connect' ? body.kept : body.canReplay()) || (body.kept && attempt.resendsAfter(cause))
    if (reused && cause !== 'timeout' && replayable && attempt.retryFresh()) {
      log.debug(`${backend.address}: reused connection ${reason}; retrying on a fresh one`)
      this.leg = leg.again()
      return this.leg.start()
    }
    const status = cause === 'timeout' ? 504 : 502
    this.lastStatus = status
    if (x.trace !== null) x.trace.failed(reason)
    const retried = attempt.failed(reason, { cause, sent: cause !== 'connect', replayable, bytesIn: x.bytesIn })
    if (x.trace !== null) x.trace.judged(x, reason, retried)
    if (retried) log.debug(`${backend.address} ${reason}; retrying ${x.head.method} ${x.path} elsewhere`)
    else x.answer(status, attempt.failure)
  }

  // lila itself could not open a backend connection (out of descriptors): the backend
  // is not blamed, and another would fare no better: 503, to try again later. The leg
  // let its connection go.
  shortOf (err) {
    const { x } = this
    this.leg = null
    if (x.trace !== null) x.trace.failed(`lila is short of resources (${reasonOf(err)})`)
    this.attempt.shortage(x.bytesIn)
    x.listener.short(err, 'cannot open a backend connection')
    x.answer(503, `lila is short of resources (${reasonOf(err)})`, { retryAfter: UNAVAILABLE_RETRY_AFTER, quiet: true })
  }

  // The leg is done with: it gave its connection back (the response complete, a
  // tunnel's backend side closed), or its answer is dropped (`abandoned`).
  legDone (abandoned = false) {
    if (abandoned) this.leg.abandon()
    this.leg = null
  }

  // The leg's response is complete and its connection given back (or closed): no socket
  // event reaches it any more, so it may carry this exchange's next request (renew).
  legFinished () {
    this.spareLeg = this.leg
    this.leg = null
  }

  // The request will not be sent, or its answer is dropped: the leg goes (a connection
  // being opened for it closed), and its slot or place in the queue is let go.
  abandon () {
    const leg = this.leg
    this.leg = null
    if (leg !== null) leg.abandon()
    this.attempt.cancel()
  }

  // Both: the client is gone, or its request failed before it could go on.
  drop () {
    this.abandon()
    this.release()
  }

  release () {
    this.attempt.release(this.x.bytesIn, this.x.bytesOut)
  }
}

module.exports = { Forwarding }
