'use strict'

const { createHash } = require('crypto')
const histogram = require('../../histogram')
const { throttled } = require('../../log')
const { ChunkedReader } = require('../http1/chunked')

// --compare: what the primary answered against what the mirror answered
// (mirror.js), request by request: the same, a different status, or the same
// status with a different body (by a hash of it). It keeps the counts, the last
// DIVERGENT method and path that diverged (each with its count and both answers), and
// the time each side took, from the request's head to the end of its answer; each
// divergence is a log line, at most one a second (the rest counted in the next).
//   comparison.record(method, path, primary, mirror)   primary, mirror: { status, digest, ms }
//   comparison.snapshot()                              plain, for /status.json
const DIVERGENT = 20
const MAX_PATH = 200 // a path longer than this is shown cut

class Comparison {
  constructor (log, now = Date.now) {
    this.now = now
    this.results = { same: 0, status: 0, body: 0 }
    this.divergences = new Map() // "GET /cart" -> entry, the latest last
    this.primaryTimes = histogram.createCounts()
    this.mirrorTimes = histogram.createCounts()
    this.say = throttled(line => log.warn(line), 1000, now)
  }

  record (method, path, primary, mirror) {
    this.primaryTimes[histogram.bucketOf(primary.ms)]++
    this.mirrorTimes[histogram.bucketOf(mirror.ms)]++
    const ours = primary.digest.result()
    const theirs = mirror.digest.result()
    const result = primary.status !== mirror.status ? 'status' : ours.hash !== theirs.hash ? 'body' : 'same'
    this.results[result]++
    if (result === 'same') return
    const shown = path.length > MAX_PATH ? `${path.slice(0, MAX_PATH)}…` : path
    const name = `${method} ${shown}`
    const before = this.divergences.get(name)
    this.divergences.delete(name) // to the end: the latest
    this.divergences.set(name, {
      name,
      method,
      path: shown,
      result,
      primaryStatus: primary.status,
      mirrorStatus: mirror.status,
      primaryBytes: ours.bytes,
      mirrorBytes: theirs.bytes,
      count: before === undefined ? 1 : before.count + 1,
      seenAt: this.now()
    })
    if (this.divergences.size > DIVERGENT) this.divergences.delete(this.divergences.keys().next().value)
    this.say(result === 'status'
      ? `compare: ${name} ${primary.status} ≠ ${mirror.status} (mirror)`
      : `compare: ${name} ${primary.status}, body of ${ours.bytes} bytes ≠ ${theirs.bytes} bytes (mirror)`)
  }

  snapshot () {
    return {
      ...this.results,
      divergences: [...this.divergences.values()].reverse(), // the latest first
      primaryTime: times(this.primaryTimes),
      mirrorTime: times(this.mirrorTimes)
    }
  }
}

function times (counts) {
  return { p50: histogram.quantile(counts, 0.5), bounds: histogram.BOUNDS_MS, counts: histogram.cumulative(counts) }
}

// A body as it streams by, hashed: its data only, so that the same body compares equal
// however it was framed (`chunked`: the bytes come with HTTP/1.1 chunked framing, as
// lila forwards them, which is taken off here).
class BodyDigest {
  constructor (chunked = false) {
    this.hash = createHash('sha1')
    this.digest = null // the hash in hex, once the body is over
    this.bytes = 0
    this.reader = chunked ? new ChunkedReader(502) : null
    this.onData = chunked ? (buf, start, end) => this.add(buf.subarray(start, end)) : null
  }

  update (chunk) {
    if (this.reader === null) return this.add(chunk)
    try {
      this.reader.read(chunk, 0, chunk.length, this.onData)
    } catch {
      this.reader = null // malformed: the exchange has cut the response already
    }
  }

  add (data) {
    this.bytes += data.length
    this.hash.update(data)
  }

  // { bytes, hash }, once: the body is over.
  result () {
    if (this.hash !== null) {
      this.digest = this.hash.digest('hex')
      this.hash = null
    }
    return { bytes: this.bytes, hash: this.digest }
  }
}

module.exports = { Comparison, BodyDigest, DIVERGENT }
