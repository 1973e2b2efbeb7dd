'use strict'

// --retry-budget: retries of requests that a backend already saw (it answered badly,
// closed, reset) may be at most `percent` of the requests of the last 10 seconds, plus
// a floor of 10 so that a quiet listener can still retry. Without a cap, every retry
// during an outage doubles the load on the backends that are left (Finagle's and
// Envoy's retry budgets work the same way). Retries of a connect that failed are not
// counted: that backend did no work.
//
// Ten one-second buckets in a ring, turned by the clock when it is read.
const WINDOW_S = 10
const FLOOR = 10

class RetryBudget {
  // percent: 0 to 100, or null for no cap.
  constructor (percent, now = Date.now) {
    this.percent = percent
    this.now = now
    this.requests = new Array(WINDOW_S).fill(0)
    this.retries = new Array(WINDOW_S).fill(0)
    this.second = Math.floor(now() / 1000)
    this.exhausted = 0 // retries refused for want of budget
  }

  // A reload. The counts carry over (none are kept while there is no cap).
  setPercent (percent) {
    this.percent = percent
  }

  // One more request (a client's, not a retry).
  request () {
    if (this.percent === null) return
    this.requests[this.#turn()]++
  }

  // May a retry go now? Counts a refusal.
  allows () {
    if (this.percent === null) return true
    this.#turn()
    let requests = 0
    let retries = 0
    for (let i = 0; i < WINDOW_S; i++) {
      requests += this.requests[i]
      retries += this.retries[i]
    }
    if (retries < Math.floor(requests * this.percent / 100) + FLOOR) return true
    this.exhausted++
    return false
  }

  // A retry went.
  spend () {
    if (this.percent === null) return
    this.retries[this.#turn()]++
  }

  // The bucket of the current second, after clearing those of the seconds gone by. A
  // clock that steps back keeps the current bucket.
  #turn () {
    const second = Math.floor(this.now() / 1000)
    if (second > this.second) {
      const steps = Math.min(second - this.second, WINDOW_S)
      for (let k = 1; k <= steps; k++) {
        const i = (this.second + k) % WINDOW_S
        this.requests[i] = 0
        this.retries[i] = 0
      }
      this.second = second
    }
    return this.second % WINDOW_S
  }
}

module.exports = { RetryBudget, WINDOW_S, FLOOR }
