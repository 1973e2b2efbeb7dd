'use strict'

const { RateLimiter, ConnectionCounter } = require('./client-limits')

// A listener's per-client limits as applied to its sessions (client-limits.js does the
// counting): --max-conn-per-client counts each session under its client's address until
// it is done, --rate-limit takes a token per request (http) or per connection (tcp), and
// what was turned away is counted for the snapshot. With a shared decider (--fleet:
// fleet/shared-limits.js), both are decided for the whole fleet when it answers in
// time, else by this listener's own bucket and count, which are kept either way.
class ClientAdmission {
  constructor (config, shared = null) {
    this.shared = shared // { decide, open, close } (fleet/shared-limits.js), or null
    this.perClient = null // ConnectionCounter, or null: no limit
    this.counted = new Map() // session -> the address it is counted under
    this.sharedCounted = new Set() // sessions the fleet counts too
    this.rate = null // RateLimiter, or null
    this.limited = { 'max-conn-per-client': 0, 'rate-limit': 0 } // clients or requests turned away
    this.configure(config)
  }

  // At the start and on a reload. Connection counts carry over; a new rate starts with
  // full buckets.
  configure ({ maxConnPerClient, rateLimit }) {
    if (maxConnPerClient === null) this.perClient = null
    else if (this.perClient === null) this.perClient = new ConnectionCounter(maxConnPerClient)
    else this.perClient.setMax(maxConnPerClient)
    const same = this.rate !== null && rateLimit !== null &&
      this.rate.rate === rateLimit.rate && this.rate.burst === rateLimit.burst
    if (!same) this.rate = rateLimit === null ? null : new RateLimiter(rateLimit)
  }

  // A request (http, either version) over --rate-limit: null when it may go on, else
  // what to answer with 429: { detail, retryAfter } (counted); with a shared decider, a
  // Promise of either.
  rateLimited (address) {
    if (this.rate === null) return null
    const wait = this.rate.take(address)
    if (this.shared !== null) {
      const shared = this.shared.decide(address, this.rate.rate, this.rate.burst)
      if (shared !== null) return shared.then(ms => this.verdict(address, ms === null ? wait : Math.ceil(ms / 1000)))
    }
    return this.verdict(address, wait)
  }

  verdict (address, wait) {
    if (wait === 0) return null
    this.limited['rate-limit']++
    return { detail: `${address} sends requests faster than --rate-limit`, retryAfter: wait }
  }

  // May this session's client be served? null, or why not: { limit, detail, retryAfter }
  // (with a shared decider, possibly a Promise of either). Over --max-conn-per-client,
  // or (`perConnection`: tcp, whose unit is the connection) --rate-limit.
  admit (session, perConnection) {
    if (this.perClient === null && this.rate === null) return null // (the address may cost a system call)
    const address = session.clientAddress
    if (this.perClient !== null) {
      if (!this.perClient.open(address)) return this.overConnections(address)
      this.counted.set(session, address)
      const shared = this.shared === null ? null : this.shared.open(address, this.perClient.max)
      if (shared !== null) {
        return shared.then(counted => {
          if (counted === true) this.sharedCounted.add(session)
          if (counted !== false) return this.connectionRate(address, perConnection)
          this.uncount(session)
          return this.overConnections(address)
        })
      }
    }
    return this.connectionRate(address, perConnection)
  }

  overConnections (address) {
    this.limited['max-conn-per-client']++
    const detail = `${address} already holds ${this.perClient.max} connections`
    return { limit: 'max-conn-per-client', detail, retryAfter: 1 }
  }

  connectionRate (address, perConnection) {
    const limited = perConnection ? this.rateLimited(address) : null
    if (limited !== null && typeof limited.then === 'function') {
      return limited.then(later => connectionRefusal(address, later))
    }
    return connectionRefusal(address, limited)
  }

  // A session handed its connection to `next`: still the same client connection,
  // counted once.
  handOver (session, next) {
    const address = this.counted.get(session)
    if (address === undefined) return
    this.counted.delete(session)
    this.counted.set(next, address)
    if (this.sharedCounted.delete(session)) this.sharedCounted.add(next)
  }

  // A session is over: its client holds one connection fewer.
  done (session) {
    this.uncount(session)
  }

  uncount (session) {
    if (this.counted.size === 0) return // no --max-conn-per-client: no lookup per connection
    const address = this.counted.get(session)
    if (address === undefined) return
    this.counted.delete(session)
    if (this.perClient !== null) this.perClient.close(address)
    if (this.sharedCounted.delete(session)) this.shared.close(address)
  }

  snapshot () {
    return {
      limited: { ...this.limited }, // turned away by per-client limits
      limitedClients: {
        connections: this.perClient === null ? 0 : this.perClient.size,
        rate: this.rate === null ? 0 : this.rate.size
      } // addresses tracked for them now
    }
  }
}

function connectionRefusal (address, limited) {
  if (limited === null) return null
  const detail = `${address} opens connections faster than --rate-limit`
  return { limit: 'rate-limit', detail, retryAfter: limited.retryAfter }
}

module.exports = { ClientAdmission }
