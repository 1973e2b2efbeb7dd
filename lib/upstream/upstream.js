'use strict'

const net = require('net')
const { Backend } = require('./backend')
const { createMode } = require('./balancers')
const { WaitQueue } = require('./queue')
const { HealthChecker } = require('./health')
const { Discovery } = require('./discovery')
const { formatAddress } = require('../address')
const { reasonOf } = require('../errors')
const { silentLogger, formatTable } = require('../log')

// The backends of one listener, and everything that decides which of them may take
// traffic now: health (active checks, passive ejection, panic), max-conn and the wait
// queue, DNS discovery (backends joining and draining). The mode only ranks the
// candidates this file hands it. Both tcp.js and http.js use it the same way:
//
//   const lease = upstream.acquire(ctx, tried)          // sync; a Lease or null
//   if (lease === null) {
//     const waiter = upstream.enqueue(ctx, tried, (lease, reason) => ...)
//     if (waiter === null) -> nothing can take it: close (tcp) / 503 (http)
//     // the client leaves meanwhile: waiter.cancel()
//   }
//   (upstream.seat(session) does exactly this for a session with connect/onQueued.)
//   ... lease.succeeded() | lease.failed(reason); lease.backend.observeLatency(ms)
//   lease.release(bytesIn, bytesOut)                    // exactly once; hands the slot on
//
// `ctx` is what the mode keys on (clientAddress; http adds the path); `tried` is null or
// a Set of Backends that already failed this connection or request.
//
// A reload hands the listener's new settings to update(config): backends join and
// drain as they do when DNS changes, and everything else is changed in place.
class Upstream {
  constructor (config, { now = Date.now, log = silentLogger, resolve = null, balancerOptions = {}, tls = null, table = true } = {}) {
    const settings = settingsOf(config)
    this.mode = settings.mode
    this.hashBalanceFactor = settings.hashBalanceFactor
    this.balancerOptions = balancerOptions
    this.now = now
    this.log = log
    this.table = table // log the start-up table
    this.rise = settings.rise
    this.fall = settings.fall
    this.balancer = createMode(this.mode, { hashBalanceFactor: this.hashBalanceFactor, ...balancerOptions })
    this.queue = new WaitQueue({ timeout: settings.queueTimeout })
    this.checker = settings.check === null ? null : new HealthChecker(checkerOptions(settings, tls))
    this.resolve = resolve
    this.discoveryOptions = { interval: settings.resolveInterval, server: settings.dnsServer, resolve }
    this.discovery = null

    // One group per backend as given: an IP literal is one backend, a name as many as
    // it resolves to. `backends` is every group's, in the order given.
    this.groups = settings.backends.map(newGroup)
    this.backends = []
    this.draining = new Set() // removed from DNS, connections still open
    this.panic = false
    this.checking = false // first checks started: new backends are watched at once
    this.started = false // start-up done: changes are logged
    this.closed = false

    this.scratch = [] // candidates, reused: choose() allocates nothing
    this.onFree = backend => this.#freed(backend)
    this.take = waiter => {
      const backend = this.choose(waiter.ctx, waiter.tried)
      return backend === null ? null : backend.acquire()
    }

    for (const group of this.groups) {
      if (group.name === null) group.backends.push(this.#create(group.spec, group.spec.host, null))
    }
    this.#rebuild()
    this.panic = this.#computePanic()
  }

  // Resolve names and check every backend once, log a table of what was found, then
  // keep doing both in the background.
  async start () {
    await Promise.all(this.groups.filter(g => g.name !== null).map(group => this.#watchName(group)))
    this.checking = true
    await Promise.all(this.backends.map(b => this.#watch(b)))
    this.started = true
    if (this.table) for (const line of formatTable(this.#table())) this.log.info(line)
    this.panic = this.#computePanic()
    if (this.panic) this.log.warn(panicLine(this.backends.length))
  }

  // -> Backend, or null when nothing can take the connection. `tried` holds backends
  // that already failed this connection: a retry never goes back to one of them.
  // Primaries first; backups only when no primary can take it.
  choose (ctx, tried = null) {
    const now = this.now()
    let candidates = this.#candidates(now, tried, false)
    if (candidates.length === 0) candidates = this.#candidates(now, tried, true)
    if (candidates.length <= 1) return candidates.length === 1 ? candidates[0] : null
    return this.balancer.pick(candidates, ctx)
  }

  #candidates (now, tried, backup) {
    const out = this.scratch
    out.length = 0
    for (const backend of this.backends) {
      if (backend.backup !== backup || !backend.usable(now, this.panic)) continue
      if (tried !== null && tried.has(backend)) continue
      out.push(backend)
    }
    return out
  }

  // A slot on a backend now, or null. Synchronous. While others wait in the queue, a
  // newcomer does not overtake them: null, and it queues behind them.
  acquire (ctx, tried = null) {
    if (this.queue.size > 0) return null
    const backend = this.choose(ctx, tried)
    return backend === null ? null : backend.acquire()
  }

  // Wait for a slot: onLease(lease) when one frees (the oldest waiter first), or
  // onLease(null, reason) after --queue-timeout. onLease may run synchronously inside
  // another lease's release(). Returns a Waiter (cancel() it if the client leaves), or
  // null when waiting is pointless: no queue (--queue-timeout 0), the queue is full, or
  // no backend that could take it is merely full (all down, or all tried).
  enqueue (ctx, tried, onLease) {
    if (this.closed || !this.#couldServe(tried)) return null
    return this.queue.add(ctx, tried, onLease)
  }

  // What tcp.js and http/exchange.js do with each connection or request: a slot now
  // (session.connect(lease)) or, when every backend is full, a place in the queue
  // (session.waiter; the slot or the timeout comes to session.onQueued(lease, reason)).
  // False when nothing can take it. `session` is the mode's ctx; `session.tried` the
  // backends that already failed it.
  seat (session) {
    const lease = this.acquire(session, session.tried)
    if (lease !== null) {
      session.connect(lease)
      return true
    }
    session.waiter = this.enqueue(session, session.tried, (lease, reason) => session.onQueued(lease, reason))
    return session.waiter !== null
  }

  #couldServe (tried) {
    const now = this.now()
    for (const backend of this.backends) {
      if (backend.available(now, this.panic) && (tried === null || !tried.has(backend))) return true
    }
    return false
  }

  #serveQueue () {
    if (this.queue.size > 0) this.queue.serve(this.take)
  }

  // A lease was released: the slot goes to the queue; a draining backend may be done.
  #freed (backend) {
    if (backend.live === 0 && (backend.draining ? this.draining.delete(backend) : backend.admin === 'draining')) {
      this.log.info(`backend ${backend.address} drained`)
    }
    this.#serveQueue()
  }

  #create (spec, host, name) {
    const backend = new Backend({ ...spec, host, name }, {
      now: this.now,
      checked: this.checker !== null,
      rise: this.rise,
      fall: this.fall,
      rampOnFirstUp: this.started
    })
    backend.onFree = this.onFree
    backend.on('down', (reason, previous) => this.#changed(backend, 'down', reason, previous))
    backend.on('up', (reason, previous) => this.#changed(backend, 'up', reason, previous))
    backend.on('trial-failed', reason => this.log.info(`backend ${backend.address} still down: ${reason}`))
    this.#watch(backend)
    return backend
  }

  #changed (backend, state, reason, previous) {
    // At start-up, the table says what the first checks found.
    if (this.started || previous !== 'pending') {
      const line = `backend ${backend.address} ${state}: ${reason}`
      if (state === 'down') this.log.warn(line)
      else this.log.info(line)
    }
    this.#updatePanic()
    if (state === 'up') this.#serveQueue()
  }

  #computePanic () {
    let any = false
    for (const backend of this.backends) {
      // Backends an operator took out, or gave no weight, are not "down".
      if (backend.weight === 0 || backend.admin !== null) continue
      if (backend.state === 'up') return false
      any = true
    }
    return any
  }

  #updatePanic () {
    const panic = this.#computePanic()
    if (panic === this.panic) return
    this.panic = panic
    if (!this.started) return
    if (panic) {
      this.log.warn(panicLine(this.backends.length))
      this.#serveQueue()
    } else {
      this.log.info('panic over: a backend is up again')
    }
  }

  // Resolve a group's name now and every --resolve-interval.
  #watchName (group) {
    if (this.discovery === null) this.discovery = new Discovery(this.discoveryOptions)
    return this.discovery.watch(group.name, (err, addresses) => this.#resolved(group, err, addresses), group)
  }

  // A name was resolved (or failed to be): join the new addresses, drain the gone ones.
  #resolved (group, err, addresses) {
    if (this.closed || group.removed) return
    const label = `${group.name}:${group.spec.port}`
    if (err) {
      const reason = reasonOf(err)
      if (group.error !== reason) {
        const kept = group.backends.map(b => b.host)
        this.log.warn(`cannot resolve ${label}: ${reason}; ${kept.length ? `keeping ${kept.join(', ')}` : 'no backend from it yet'}`)
      }
      group.error = reason
      return
    }
    group.error = null
    const added = []
    for (const host of addresses) {
      const address = formatAddress(host, group.spec.port)
      if (group.backends.some(b => b.address === address)) continue
      if (this.backends.some(b => b.address === address)) {
        this.log.debug(`${label}: ${address} is already a backend`)
        continue
      }
      group.backends.push(this.#revive(group, address) || this.#create(group.spec, host, group.name))
      added.push(host)
    }
    const removed = []
    for (const backend of group.backends.slice()) {
      if (addresses.includes(backend.host)) continue
      group.backends.splice(group.backends.indexOf(backend), 1)
      removed.push(backend)
    }
    if (added.length === 0 && removed.length === 0) return
    this.#rebuild()
    const draining = this.#drain(removed)
    if (this.started) {
      const changes = []
      if (added.length) changes.push(`added ${added.join(', ')}`)
      if (removed.length) changes.push(`removed ${removed.map(b => b.host).join(', ')}${draining ? `, ${draining} connection${draining === 1 ? '' : 's'} left to drain` : ''}`)
      this.log.info(`${label} resolves to ${group.backends.map(b => b.host).join(', ') || 'nothing'} (${changes.join('; ')})`)
    }
    this.#updatePanic()
    this.#serveQueue()
  }

  // A group taken out (by a reload, by removeBackend), once it is no longer in
  // this.groups: its name is no longer resolved, its backends drain. Returns how many
  // connections are left to drain.
  #removeGroup (group) {
    group.removed = true
    if (this.discovery !== null && group.name !== null) this.discovery.unwatch(group)
    return this.#drain(group.backends)
  }

  // Backends taken out (of DNS, of the config): no new traffic; open connections
  // finish undisturbed, and the backend is forgotten when the last one ends (#freed).
  // Returns how many connections are left to drain.
  #drain (backends) {
    let draining = 0
    for (const backend of backends) {
      backend.draining = true
      if (this.checker !== null) this.checker.unwatch(backend)
      if (backend.live > 0) this.draining.add(backend)
      draining += backend.live
    }
    return draining
  }

  // A reload: this listener's new settings (as config.js builds them), in place. The
  // mode, health checks, queue and discovery take their new settings; backends are
  // matched by how they were given ("10.0.0.1:80", "app.internal:80"): new ones join
  // (checked first, then ramping up with slow-start), removed ones drain, the others
  // take their new weight, max-conn, slow-start and backup flag at once. Open
  // connections are never cut. Returns what changed, as lines for the log.
  update (config, { tls = null } = {}) {
    const changes = []
    const settings = settingsOf(config)
    const { mode, backends, rise, fall, queueTimeout, resolveInterval, dnsServer, hashBalanceFactor } = settings
    if (mode !== this.mode || hashBalanceFactor !== this.hashBalanceFactor) {
      this.balancer = createMode(mode, { hashBalanceFactor, ...this.balancerOptions })
      this.mode = mode
      this.hashBalanceFactor = hashBalanceFactor
    }
    this.queue.timeout = queueTimeout
    this.rise = rise
    this.fall = fall
    for (const backend of this.all()) {
      backend.rise = rise
      backend.fall = fall
    }
    this.#updateChecks(checkerOptions(settings, tls))
    if (resolveInterval !== this.discoveryOptions.interval || dnsServer !== this.discoveryOptions.server) {
      this.discoveryOptions = { interval: resolveInterval, server: dnsServer, resolve: this.resolve }
      if (this.discovery !== null) {
        this.discovery.close()
        this.discovery = null
        for (const group of this.groups) if (group.name !== null) this.#watchName(group)
      }
    }

    const old = new Map(this.groups.map(group => [groupKey(group.spec), group]))
    const groups = []
    const joined = []
    for (const spec of backends) {
      const key = groupKey(spec)
      let group = old.get(key)
      if (group !== undefined) {
        old.delete(key)
        const what = specChanges(group.spec, spec)
        if (what.length > 0) {
          group.spec = spec
          for (const backend of group.backends) Object.assign(backend, { weight: spec.weight, maxConn: spec.maxConn, slowStart: spec.slowStart, backup: spec.backup })
          changes.push(`backend ${key}: ${what.join(', ')}`)
        }
      } else {
        group = newGroup(spec)
        if (group.name === null) group.backends.push(this.#revive(group, key) || this.#create(spec, spec.host, null))
        joined.push(group)
        changes.push(`backend ${key} added`)
      }
      groups.push(group)
    }
    this.groups = groups
    this.#rebuild()
    for (const group of old.values()) {
      const draining = this.#removeGroup(group)
      changes.push(`backend ${groupKey(group.spec)} removed${draining ? `, ${draining} connection${draining === 1 ? '' : 's'} left to drain` : ''}`)
    }
    if (this.checking) for (const group of joined) if (group.name !== null) this.#watchName(group)
    this.#updatePanic()
    this.#serveQueue()
    return changes
  }

  // Health checks on, off or changed by a reload. Turned off, a backend the probes had
  // taken out is up again (passive health goes on); turned on, every backend is probed
  // at once and keeps its state until the probes say otherwise.
  #updateChecks (options) {
    if (options.check === null) {
      if (this.checker === null) return
      this.checker.close()
      this.checker = null
      for (const backend of this.backends) backend.checksOff()
      return
    }
    if (this.checker === null) {
      this.checker = new HealthChecker(options)
      for (const backend of this.backends) this.#watch(backend)
      return
    }
    this.checker.configure(options)
  }

  // An address that comes back while its connections still drain is the same backend:
  // one max-conn, one set of counters.
  #revive (group, address) {
    for (const backend of this.draining) {
      if (backend.address !== address || backend.name !== group.name) continue
      this.draining.delete(backend)
      backend.draining = false
      this.#watch(backend)
      return backend
    }
    return null
  }

  #rebuild () {
    this.backends = this.groups.flatMap(g => g.backends)
  }

  #table () {
    const rows = [['backend', 'state', 'check']]
    for (const group of this.groups) {
      if (group.name !== null && group.backends.length === 0) {
        rows.push([`${group.name}:${group.spec.port}`, '-', `cannot resolve: ${group.error || 'no address'}`])
      }
      for (const b of group.backends) {
        const notes = [b.name, b.backup ? 'backup' : null].filter(Boolean)
        const why = b.state === 'down' ? b.downReason : (b.lastCheck || 'not checked (--check none)')
        rows.push([b.address + (notes.length ? ` (${notes.join(', ')})` : ''), b.state, why])
      }
    }
    return rows
  }

  // --- changes an operator makes at run time (control.js), and config reloads ---

  // The backend with this address ("10.0.0.1:80", "[::1]:80"), or null. Backends that
  // DNS or removeBackend() took away, still draining, are not found: they are leaving.
  find (address) {
    for (const backend of this.backends) if (backend.address === address) return backend
    return null
  }

  // No new traffic; open connections finish. Probes go on, so its state stays current
  // and enable() gives it traffic at once. 'backend ... drained' is said when its last
  // connection ends.
  drain (backend) {
    if (backend.admin === 'draining') return
    const was = backend.admin
    backend.setAdmin('draining')
    if (was === 'disabled') this.#watch(backend) // its probes resume
    this.log.info(`backend ${backend.address} draining (by an operator)${leftOpen(backend)}`)
    if (backend.live === 0) this.log.info(`backend ${backend.address} drained`)
    this.#updatePanic()
  }

  // An operator's "down": no new traffic, open connections go on undisturbed; probes
  // pause (a backend under maintenance may be stopped without lila calling it down),
  // so enable() checks it again before it takes traffic.
  disable (backend) {
    if (backend.admin === 'disabled') return
    backend.setAdmin('disabled')
    if (this.checker !== null) this.checker.unwatch(backend)
    this.log.info(`backend ${backend.address} disabled (by an operator)${leftOpen(backend)}`)
    this.#updatePanic()
  }

  // Back to its health state: at once after a drain; after a disable, once a probe has
  // passed (at once too with --check none). Resolves when it can take traffic or its
  // first probe failed.
  async enable (backend) {
    const was = backend.admin
    if (was === null) return
    backend.setAdmin(null)
    this.log.info(`backend ${backend.address} enabled (by an operator)`)
    if (was === 'disabled' && this.checker !== null) {
      backend.recheck()
      this.#updatePanic()
      this.#serveQueue()
      await this.#watch(backend)
      return
    }
    this.#updatePanic()
    this.#serveQueue()
  }

  setWeight (backend, weight) {
    if (backend.weight === weight) return
    this.log.info(`backend ${backend.address} weight ${backend.weight} -> ${weight} (by an operator)`)
    backend.weight = weight
    this.#updatePanic()
    this.#serveQueue()
  }

  // Add a backend as given on the command line: an IP address is one backend, a name
  // as many as it resolves to (and is resolved again every --resolve-interval). New
  // backends are checked before they take traffic; resolves with them once they were
  // (their state says how it went). Throws a RangeError if it is already a backend.
  async addBackend (spec) {
    const group = newGroup(spec)
    const label = groupKey(spec)
    const taken = group.name === null ? this.find(label) !== null : this.given(label)
    if (taken) throw new RangeError(`${label} is already a backend`)
    this.groups.push(group)
    if (group.name === null) {
      group.backends.push(this.#revive(group, label) || this.#create(spec, spec.host, null))
      this.#rebuild()
      this.log.info(`backend ${label} added (by an operator)`)
    } else {
      this.log.info(`backend ${label} added (by an operator); resolving it`)
      await this.#watchName(group)
    }
    this.#updatePanic()
    await Promise.all(group.backends.map(backend => this.#watch(backend)))
    this.#serveQueue()
    return group.backends
  }

  // Remove a backend as it was given ("10.0.0.1:80", or "name:80" for every address of
  // a name): no new traffic, open connections finish, as when DNS drops an address.
  // Returns the backends removed (empty when nothing matched).
  removeBackend (address) {
    const i = this.#groupIndex(address)
    if (i === -1) return []
    const [group] = this.groups.splice(i, 1)
    this.#rebuild()
    this.#removeGroup(group)
    for (const backend of group.backends) this.log.info(`backend ${backend.address} removed${leftOpen(backend)}`)
    this.#updatePanic()
    this.#serveQueue()
    return group.backends
  }

  // Was this backend given (on the command line, by addBackend) as `address`?
  given (address) {
    return this.#groupIndex(address) !== -1
  }

  #groupIndex (address) {
    return this.groups.findIndex(g => groupKey(g.spec) === address)
  }

  // Probe a backend now (unless probes are off or already on it); resolves once the
  // first probe has reported.
  // Probe a backend, unless there is nothing to probe with yet, or an operator disabled
  // it (probes pause until it is enabled).
  #watch (backend) {
    if (this.checker === null || this.closed || !this.checking || backend.admin === 'disabled') return Promise.resolve()
    return this.checker.watch(backend)
  }

  // Stop probing and resolving; every waiter gives up.
  close () {
    this.closed = true
    if (this.checker !== null) this.checker.close()
    if (this.discovery !== null) this.discovery.close()
    this.queue.clear('lila is shutting down')
  }

  get live () {
    let sum = 0
    for (const backend of this.backends) sum += backend.live
    for (const backend of this.draining) sum += backend.live
    return sum
  }

  // Live figures of the upstream as a whole, for the listener's snapshot.
  stats () {
    return { panic: this.panic, queued: this.queue.size, queueTimeouts: this.queue.timeouts }
  }

  // Every backend, those still draining after their removal last.
  all () {
    return [...this.backends, ...this.draining]
  }

  snapshot () {
    return this.all().map(b => b.snapshot())
  }
}

// A listener's settings (as config.js builds them), with the defaults for what the
// in-process API may leave out.
function settingsOf (config) {
  const {
    mode, backends, check = null, checkInterval = 2000, checkTimeout = 2000, checkHost = null, rise = 2, fall = 3,
    queueTimeout = 0, resolveInterval = 0, dnsServer = null, hashBalanceFactor = null
  } = config
  return { mode, backends, check, checkInterval, checkTimeout, checkHost, rise, fall, queueTimeout, resolveInterval, dnsServer, hashBalanceFactor }
}

// What HealthChecker takes (constructor and configure), from settingsOf().
function checkerOptions ({ check, checkInterval, checkTimeout, checkHost }, tls) {
  return { check, interval: checkInterval, timeout: checkTimeout, host: checkHost, tls }
}

function leftOpen (backend) {
  const n = backend.live
  return n === 0 ? '' : `; ${n} connection${n === 1 ? '' : 's'} left open`
}

function newGroup (spec) {
  return {
    spec,
    name: net.isIP(spec.host) ? null : spec.host,
    backends: [],
    error: null, // the last resolution failure, while it lasts
    removed: false // taken out (#removeGroup): its late answers are ignored
  }
}

// A backend as it was given: what a reload matches old and new backends by.
function groupKey (spec) {
  return formatAddress(spec.host, spec.port)
}

// "weight 1 -> 3, backup": what a reload changes in a backend's settings.
function specChanges (before, after) {
  const out = []
  const ms = v => v === 0 ? 'off' : `${v / 1000}s`
  if (before.weight !== after.weight) out.push(`weight ${before.weight} -> ${after.weight}`)
  if (before.maxConn !== after.maxConn) out.push(`max-conn ${before.maxConn ?? 'none'} -> ${after.maxConn ?? 'none'}`)
  if (before.slowStart !== after.slowStart) out.push(`slow-start ${ms(before.slowStart)} -> ${ms(after.slowStart)}`)
  if (before.backup !== after.backup) out.push(after.backup ? 'now a backup' : 'no longer a backup')
  return out
}

function panicLine (n) {
  return `panic: every backend is down (${n}); sending traffic to them anyway`
}

module.exports = { Upstream }
