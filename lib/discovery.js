'use strict'

const dns = require('dns')

// Discovery through DNS: a backend given by name is resolved at start and every
// `interval` ms (0: only at start); the upstream turns each answer into backends.
// Without a server, names are looked up as the system does it (getaddrinfo: /etc/hosts,
// search domains), as a connect would. With `server` ("10.0.0.2:53"), A and AAAA
// records are asked of that server directly.
class Discovery {
  constructor ({ interval, server = null, resolve = null }) {
    this.interval = interval
    this.resolver = null
    this.resolve = resolve || this.createResolver(server)
    this.timers = new Map() // watch key -> timer
    this.stopped = new Set() // keys unwatched while a resolution was under way
    this.closed = false
  }

  createResolver (server) {
    if (server === null) {
      return async name => {
        const results = await dns.promises.lookup(name, { all: true, verbatim: true })
        return unique(results.map(r => r.address))
      }
    }
    const resolver = new dns.promises.Resolver({ timeout: 2000, tries: 2 })
    resolver.setServers([server])
    this.resolver = resolver
    return async name => {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)])
      const addresses = unique([...(v4.value || []), ...(v6.value || [])])
      if (addresses.length > 0) return addresses
      // Both failed or both empty: say why, preferring an error over "no data".
      const reasons = [v4.reason, v6.reason].filter(Boolean)
      throw reasons.find(err => err.code !== 'ENODATA') || reasons[0] || Object.assign(new Error('no address'), { code: 'ENODATA' })
    }
  }

  // Resolve `name` now and then every interval; each outcome goes to
  // onResult(error, addresses). Resolves once the first outcome is delivered.
  // `key` names this watch for unwatch() (one name may be watched for two ports).
  watch (name, onResult, key = name) {
    const run = async () => {
      let addresses = null
      let error = null
      try {
        addresses = await this.resolve(name)
      } catch (err) {
        error = err
      }
      if (this.closed || this.stopped.has(key)) return
      onResult(error, addresses)
      if (this.interval > 0) {
        const timer = setTimeout(run, this.interval)
        timer.unref()
        this.timers.set(key, timer)
      }
    }
    this.stopped.delete(key)
    return run()
  }

  // Stop resolving for one watch (its backends were removed by a reload).
  unwatch (key) {
    this.stopped.add(key)
    clearTimeout(this.timers.get(key))
    this.timers.delete(key)
  }

  close () {
    this.closed = true
    for (const timer of this.timers.values()) clearTimeout(timer)
    this.timers.clear()
    if (this.resolver !== null) this.resolver.cancel()
  }
}

function unique (addresses) {
  return [...new Set(addresses)]
}

module.exports = { Discovery }
