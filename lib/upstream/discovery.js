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
    this.watches = new Map() // watch key -> { timer, stopped }: one record per watch()
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
      throw reasons.find(err => err.code !== 'ENODATA') || reasons[0] ||
        Object.assign(new Error('no address'), { code: 'ENODATA' })
    }
  }

  // Resolve `name` now and then every interval; each outcome goes to
  // onResult(error, addresses). Resolves once the first outcome is delivered.
  // `key` names this watch for unwatch() (one name may be watched for two ports);
  // watching a key again ends its earlier watch.
  watch (name, onResult, key = name) {
    this.unwatch(key)
    const watch = { timer: null, stopped: false }
    this.watches.set(key, watch)
    const run = async () => {
      let addresses = null
      let error = null
      try {
        addresses = await this.resolve(name)
      } catch (err) {
        error = err
      }
      // Its own record: unwatched meanwhile, this watch is over even if the key is
      // watched again.
      if (this.closed || watch.stopped) return
      onResult(error, addresses)
      if (this.interval > 0) {
        watch.timer = setTimeout(run, this.interval)
        watch.timer.unref()
      }
    }
    return run()
  }

  // Stop resolving for one watch (its backends were removed); a resolution under way
  // is not reported.
  unwatch (key) {
    const watch = this.watches.get(key)
    if (watch === undefined) return
    watch.stopped = true
    clearTimeout(watch.timer)
    this.watches.delete(key)
  }

  close () {
    this.closed = true
    for (const key of [...this.watches.keys()]) this.unwatch(key)
    if (this.resolver !== null) this.resolver.cancel()
  }
}

function unique (addresses) {
  return [...new Set(addresses)]
}

module.exports = { Discovery }
