'use strict'

// Per-client limits, keyed by the client's address (the one a PROXY header gave, with
// --accept-proxy): how many connections it may hold (--max-conn-per-client) and how
// fast it may send requests, or open connections in tcp mode (--rate-limit). Pure: the
// clock comes in, no sockets. Memory stays bounded however many addresses come by:
// a connection count lives only while the address holds a connection, and a rate
// bucket only while it could still be short of tokens.

// A token bucket per address: `rate` tokens a second, at most `burst` kept.
//   const limiter = new RateLimiter({ rate, burst, now })
//   limiter.take(address) -> 0 when allowed, else the whole seconds until a token
//                            (Retry-After)
//
// Buckets live in two generations, each `span` ms long, the time an empty bucket takes
// to fill. A bucket untouched for a whole generation would be full again, the same as
// no bucket, so each new generation drops the one before the last: at most the
// addresses of two spans are kept, with O(1) work per request and no sweep.
class RateLimiter {
  constructor ({ rate, burst, now = Date.now }) {
    this.rate = rate
    this.burst = burst
    this.now = now
    this.span = Math.max(1000, Math.ceil(burst / rate * 1000))
    this.current = new Map() // address -> { tokens, at }
    this.previous = new Map()
    this.rotatedAt = now()
  }

  take (address) {
    const now = this.now()
    this.rotate(now)
    let bucket = this.current.get(address)
    if (bucket === undefined) {
      bucket = this.previous.get(address)
      if (bucket !== undefined) this.previous.delete(address)
      else bucket = { tokens: this.burst, at: now }
      this.current.set(address, bucket)
    }
    bucket.tokens = Math.min(this.burst, bucket.tokens + (now - bucket.at) / 1000 * this.rate)
    bucket.at = now
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return 0
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.rate))
  }

  rotate (now) {
    if (now - this.rotatedAt < this.span) return
    // Two spans or more without a request: everything kept would be full again.
    this.previous = now - this.rotatedAt >= 2 * this.span ? new Map() : this.current
    this.current = new Map()
    this.rotatedAt = now
  }

  // Addresses with a bucket kept.
  get size () {
    return this.current.size + this.previous.size
  }
}

// Live connections per address, at most `max` each.
class ConnectionCounter {
  constructor (max) {
    this.max = max
    this.counts = new Map()
  }

  // A reload's --max-conn-per-client: counts carry over; an address above the new max
  // keeps its connections and opens no more until below it.
  setMax (max) {
    this.max = max
  }

  // Count one more connection from `address`; false (and nothing counted) over `max`.
  open (address) {
    const count = this.counts.get(address) || 0
    if (count >= this.max) return false
    this.counts.set(address, count + 1)
    return true
  }

  close (address) {
    const count = this.counts.get(address)
    if (count === undefined) return
    if (count <= 1) this.counts.delete(address)
    else this.counts.set(address, count - 1)
  }

  get size () {
    return this.counts.size
  }
}

module.exports = { RateLimiter, ConnectionCounter }
