'use strict'

const histogram = require('../histogram')

// The last 15 minutes of each listener, for the status page's charts. Every `every` ms
// (10 s) it reads one snapshot and keeps, per listener, what happened since the last
// one: requests/s (sent to backends, retries included), errors/s (failures and clients
// no backend could take) and the p99 response time of that interval, from the
// difference of the response-time histograms. It reads counters that exist anyway:
// nothing is added per request.
//
//   const history = new History({ stats, every, points })
//   history.start() / history.stop()
//   history.series() -> { [listener name]: [{ at, rps, eps, p99 }] }, oldest first

const EVERY_MS = 10000
const POINTS = 90 // 15 minutes of 10 s

class History {
  constructor ({ stats, every = EVERY_MS, points = POINTS, now = Date.now }) {
    this.stats = stats
    this.every = every
    this.points = points
    this.now = now
    this.last = new Map() // listener name -> { at, requests, errors, counts }
    this.rings = new Map() // listener name -> points, oldest first
    this.timer = null
    this.sampling = false
  }

  start () {
    if (this.timer !== null) return
    this.sample()
    this.timer = setInterval(() => this.sample(), this.every)
    this.timer.unref()
  }

  stop () {
    clearInterval(this.timer)
    this.timer = null
  }

  // One sample; a slow stats() (the cluster primary asks its workers) is not overlapped.
  async sample () {
    if (this.sampling) return
    this.sampling = true
    try {
      this.add(await this.stats(), this.now())
    } catch {
      // a snapshot that could not be had leaves a gap in the charts, nothing more
    } finally {
      this.sampling = false
    }
  }

  add (snapshot, at) {
    for (const listener of snapshot.listeners) {
      const totals = totalsOf(listener, at)
      const last = this.last.get(listener.name)
      this.last.set(listener.name, totals)
      if (last === undefined || totals.requests < last.requests) continue // first, or counts restarted
      const seconds = Math.max(0.001, (at - last.at) / 1000)
      const delta = totals.counts.map((n, i) => n - last.counts[i])
      const point = {
        at,
        rps: (totals.requests - last.requests) / seconds,
        eps: Math.max(0, totals.errors - last.errors) / seconds,
        p99: histogram.quantile(delta, 0.99)
      }
      let ring = this.rings.get(listener.name)
      if (ring === undefined) this.rings.set(listener.name, ring = [])
      ring.push(point)
      if (ring.length > this.points) ring.shift()
    }
  }

  series () {
    return Object.fromEntries(this.rings)
  }
}

// A listener's counters now: requests and errors so far, and its backends' response
// times as per-bucket counts, added up.
function totalsOf (listener, at) {
  let requests = 0
  let errors = listener.unserved
  let counts = null
  for (const b of listener.backends) {
    requests += b.total
    errors += b.failures
    const own = histogram.fromCumulative(b.responseTime.counts)
    if (counts === null) counts = own
    else for (let i = 0; i < counts.length; i++) counts[i] += own[i]
  }
  return { at, requests, errors, counts: counts === null ? histogram.createCounts() : counts }
}

module.exports = { History, EVERY_MS, POINTS }
