'use strict'

const histogram = require('../histogram')

// The last 15 minutes of each listener and each of its backends, for the status page's
// charts. Every `every` ms (10 s) it reads one snapshot and keeps what happened since
// the last one: requests/s (sent to backends, retries included), errors/s (failed
// tries, and what clients got as errors: http, 5xx answers; tcp, no backend at all)
// and the p99 response time of that interval, from the difference of the
// response-time histograms. It reads counters that exist anyway: nothing is added per
// request.
//
//   const history = new History({ stats, every, points })
//   history.start() / history.stop()
//   history.series() -> { [listener name]: { points, backends: { [address]: points },
//                         routes: { [route name]: { [address]: points } } } }
//     points: [{ at, rps, eps, p99 }], oldest first
//
// A listener or backend the snapshot no longer has (a reload, a DNS change) is
// forgotten at once, so the rings stay as many as what is configured.

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
    const seen = new Set()
    for (const listener of snapshot.listeners) {
      const routes = listener.routes || []
      const all = [...listener.backends, ...routes.flatMap(r => r.backends)]
      // http: lila's own answers to the unserved are among the 5xx
      const errors = listener.responses ? serverErrors(listener) : listener.unserved
      this.track(listener.name, totalsOf(all, at, errors), seen)
      for (const b of listener.backends) {
        this.track(backendKey(listener.name, b.address), totalsOf([b], at, serverErrors(b)), seen)
      }
      for (const route of routes) {
        for (const b of route.backends) {
          this.track(backendKey(listener.name, b.address, route.name), totalsOf([b], at, serverErrors(b)), seen)
        }
      }
    }
    for (const key of this.last.keys()) {
      if (seen.has(key)) continue
      this.last.delete(key)
      this.rings.delete(key)
    }
  }

  // One counter set's new totals -> a point in its ring, from the last totals.
  track (key, totals, seen) {
    seen.add(key)
    const last = this.last.get(key)
    this.last.set(key, totals)
    if (last === undefined || totals.requests < last.requests) return // first, or counts restarted
    const seconds = Math.max(0.001, (totals.at - last.at) / 1000)
    const delta = totals.counts.map((n, i) => n - last.counts[i])
    let ring = this.rings.get(key)
    if (ring === undefined) this.rings.set(key, ring = [])
    ring.push({
      at: totals.at,
      rps: (totals.requests - last.requests) / seconds,
      eps: Math.max(0, totals.errors - last.errors) / seconds,
      p99: histogram.quantile(delta, 0.99)
    })
    if (ring.length > this.points) ring.shift()
  }

  series () {
    const out = {}
    for (const [key, points] of this.rings) {
      const [listener, address, route] = key.split('\n')
      out[listener] ??= { points: [], backends: {}, routes: {} }
      if (address === undefined) out[listener].points = points
      else if (route === undefined) out[listener].backends[address] = points
      else (out[listener].routes[route] ??= {})[address] = points
    }
    return out
  }
}

// A listener's name never holds a newline, so this key cannot be taken for another.
// A backend of a route (--route) is kept apart from the same address elsewhere.
const backendKey = (listener, address, route = null) => `${listener}\n${address}${route === null ? '' : `\n${route}`}`

// http: the 5xx answers a listener's clients got, or a backend gave them; 0 for tcp.
const serverErrors = ({ responses }) => responses ? responses['5xx'] || 0 : 0

// Counters now: requests and errors so far (the backends' failures, and `more`, what
// clients got as errors), and the backends' response times as per-bucket counts,
// added up.
function totalsOf (backends, at, more = 0) {
  let requests = 0
  let errors = more
  let counts = null
  for (const b of backends) {
    requests += b.total
    errors += b.failures
    const own = histogram.fromCumulative(b.responseTime.counts)
    if (counts === null) counts = own
    else for (let i = 0; i < counts.length; i++) counts[i] += own[i]
  }
  return { at, requests, errors, counts: counts === null ? histogram.createCounts() : counts }
}

module.exports = { History }
