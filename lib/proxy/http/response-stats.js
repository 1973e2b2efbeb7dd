'use strict'

const histogram = require('../../histogram')

// What the clients of one HTTP listener were answered: responses by status class
// (1xx..5xx, the backend's status or lila's own; 499 when the client left first), per
// listener and per backend, and how long each request took, from its head to its end.
// A request costs a few increments here, on arrays made once.
//   stats.count(status, backend, ms)   backend: the Backend that answered, or null
//   stats.refused(status)               lila refused a request head: no request to time
//   stats.snapshot()                    { responses: { '2xx': n, ... }, requestTime }
//   stats.snapshotOf(backend)           { '2xx': n, ... }
const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx']

class ResponseStats {
  constructor () {
    this.responses = new Float64Array(CLASSES.length)
    this.byBackend = new Map() // Backend -> Float64Array(5)
    this.times = histogram.createCounts() // request duration, ms, per bucket
    this.timeSum = 0
  }

  count (status, backend, ms) {
    const cls = classOf(status)
    this.responses[cls]++
    if (backend !== null) {
      let counts = this.byBackend.get(backend)
      if (counts === undefined) this.byBackend.set(backend, counts = new Float64Array(CLASSES.length))
      counts[cls]++
    }
    this.times[histogram.bucketOf(ms)]++
    this.timeSum += ms
  }

  refused (status) {
    this.responses[classOf(status)]++
  }

  // A backend gone for good (see protocol.js isForgotten).
  forget (backend) {
    this.byBackend.delete(backend)
  }

  snapshot () {
    const counts = histogram.cumulative(this.times)
    return {
      responses: byClass(this.responses),
      requestTime: {
        count: counts[counts.length - 1],
        sum: Math.round(this.timeSum * 1000) / 1000,
        bounds: histogram.BOUNDS_MS,
        counts
      }
    }
  }

  snapshotOf (backend) {
    return byClass(this.byBackend.get(backend) || new Float64Array(CLASSES.length))
  }
}

// 200 -> 1 (the index of '2xx'); a status out of 100..599 counts in the nearest class.
function classOf (status) {
  return Math.min(Math.max(Math.floor(status / 100), 1), 5) - 1
}

function byClass (counts) {
  const out = {}
  for (let i = 0; i < CLASSES.length; i++) out[CLASSES[i]] = counts[i]
  return out
}

module.exports = { ResponseStats }
