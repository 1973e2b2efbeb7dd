'use strict'

const net = require('net')

// Discovery through DNS: a backend given by name is resolved at start and every
// `interval` ms (0: only at start); the upstream turns each answer into backends. A
// port range is discovered the same way, by probing its ports (watchRange).
// Without a server, names are looked up as the system does it (getaddrinfo: /etc/hosts,
// search domains), as a connect would. With `server` ("10.0.0.2:53"), A and AAAA
// records are asked of that server directly.
//
// An SRV name (_service._proto.name) is asked for its SRV records, of `server` or of
// the system's DNS servers (/etc/resolv.conf; SRV has no getaddrinfo), and each target
// is then resolved as a name is above. Node does not give SRV records' TTLs, so they
// are asked again every `interval` as names are.
//
// `resolve` (name -> Promise of addresses) and `resolveSrv` (name -> Promise of records
// as dns.resolveSrv gives them) replace DNS, for tests.
class Discovery {
  constructor ({ interval, server = null, resolve = null, resolveSrv = null }) {
    this.interval = interval
    this.resolver = null
    this.resolve = resolve || this.createResolver(server)
    this.srvResolver = null
    this.resolveSrv = resolveSrv || this.createSrvResolver(server)
    this.watches = new Map() // watch key -> { timer, stopped }: one record per watch()
    this.closed = false
  }

  createResolver (server) {
    if (server === null) {
      return async name => {
        // dns is required with the first name to look up: backends given as addresses never load it.
        const results = await require('dns').promises.lookup(name, { all: true, verbatim: true })
        return unique(results.map(r => r.address))
      }
    }
    const resolver = this.dnsResolver(server)
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

  // SRV records are asked of `server`, or of the servers the system is set up with.
  createSrvResolver (server) {
    return name => {
      this.srvResolver ||= this.dnsResolver(server)
      return this.srvResolver.resolveSrv(name)
    }
  }

  // One dns.Resolver per server (so that close() can cancel what it asks).
  dnsResolver (server) {
    if (server !== null && this.resolver !== null) return this.resolver
    const resolver = new (require('dns').promises.Resolver)({ timeout: 2000, tries: 2 })
    if (server === null) return resolver
    resolver.setServers([server])
    this.resolver = resolver
    return resolver
  }

  // An SRV name's records, each with its target's addresses:
  //   [{ target, port, priority, weight, addresses, error }]
  // A target that does not exist or has no address has none (`error` says why); one
  // that could not be resolved this time (a timeout, a server failure) has null. A
  // target "." (RFC 2782: the service is decidedly not here) gives no record. Rejects
  // when the SRV records cannot be had or give no target, or no target could be resolved.
  async resolveService (name) {
    let records
    try {
      records = await this.resolveSrv(name)
    } catch (err) {
      throw err.code === 'ENODATA' ? new Error('no SRV records') : err
    }
    records = records.filter(r => r.name !== '' && r.name !== '.')
    if (records.length === 0) throw new Error('no SRV target (the service is not available)')
    const targets = unique(records.map(r => r.name.toLowerCase().replace(/\.$/, '')))
    const resolved = new Map(await Promise.all(targets.map(async target => {
      try {
        return [target, { addresses: net.isIP(target) ? [target] : await this.resolve(target), error: null }]
      } catch (err) {
        const none = err.code === 'ENOTFOUND' || err.code === 'ENODATA'
        return [target, { addresses: none ? [] : null, error: err }]
      }
    })))
    const answer = records.map(r => {
      const target = r.name.toLowerCase().replace(/\.$/, '')
      return { target, port: r.port, priority: r.priority, weight: r.weight, ...resolved.get(target) }
    })
    // No target resolved: nothing is known, as when the SRV query fails.
    const failed = answer.find(r => r.addresses === null)
    if (answer.every(r => r.addresses === null)) throw failed.error
    return answer
  }

  // Resolve `name` now and then every interval; each outcome goes to
  // onResult(error, addresses). Resolves once the first outcome is delivered.
  // `key` names this watch for unwatch() (one name may be watched for two ports);
  // watching a key again ends its earlier watch.
  watch (name, onResult, key = name) {
    return this.#watch(() => this.resolve(name), onResult, key)
  }

  // The same for an SRV name: onResult(error, records) with records as resolveService
  // gives them.
  watchService (name, onResult, key = name) {
    return this.#watch(() => this.resolveService(name), onResult, key)
  }

  // The same for a port range (port-range.js): onResult(null, ports) with the ports
  // listening, after each scan; `options()` gives the scan's { rise, fall, timeout }
  // and `interval()` the time between scans, as they are now (a reload changes them).
  watchRange (range, onResult, key, { options, interval }) {
    return this.#watch(() => range.scan(options()), onResult, key, interval)
  }

  #watch (lookup, onResult, key, interval = () => this.interval) {
    this.unwatch(key)
    const watch = { timer: null, stopped: false }
    this.watches.set(key, watch)
    const run = async () => {
      let answer = null
      let error = null
      try {
        answer = await lookup()
      } catch (err) {
        error = err
      }
      // Its own record: unwatched meanwhile, this watch is over even if the key is
      // watched again.
      if (this.closed || watch.stopped) return
      onResult(error, answer)
      const every = interval()
      if (every > 0) {
        watch.timer = setTimeout(run, every)
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
    if (this.srvResolver !== null && this.srvResolver !== this.resolver) this.srvResolver.cancel()
  }
}

function unique (addresses) {
  return [...new Set(addresses)]
}

module.exports = { Discovery }
