'use strict'

const net = require('net')
const { Backend } = require('./backend')
const { HealthChecker } = require('./health')
const { Discovery } = require('./discovery')
const { formatAddress } = require('../address')
const { reasonOf } = require('../errors')

// Who the backends of one listener are: the groups as given (an IP literal is one
// backend, a name as many as DNS says), the Backends made from them, those retired but
// still finishing connections, and the health checker that probes them. Membership
// changes come from DNS, from a reload (update) and from an operator (add, remove); a
// backend that leaves is retired: no new traffic, its open connections finish.
//
// It decides nothing about traffic. The upstream (upstream.js) hears of changes through
// two callbacks: changed() when the set of backends changed, and state(backend, state)
// when a backend went up or down.
class Membership {
  constructor (settings, { now, log, resolve, tls, started, onFree, changed, state }) {
    this.now = now
    this.log = log
    this.resolve = resolve
    this.isStarted = started // () -> bool: start-up is done, changes are logged
    this.onFree = onFree // given to each Backend: a lease was released
    this.changed = changed
    this.state = state
    this.thresholds = thresholdsOf(settings)
    this.checker = settings.check === null ? null : new HealthChecker(checkerOptions(settings, tls))
    this.discoveryOptions = { interval: settings.resolveInterval, server: settings.dnsServer, resolve }
    this.discovery = null
    this.groups = settings.backends.map(newGroup)
    this.backends = [] // every group's, in the order given
    this.retired = new Set() // taken out (DNS, reload, operator), connections still open
    this.checking = false // first checks started: new backends are probed at once
    this.closed = false
    for (const group of this.groups) {
      if (group.name === null) group.backends.push(this.#create(group.spec, group.spec.host, null))
    }
    this.#rebuild()
  }

  // Resolve names, then probe every backend once.
  async start () {
    await Promise.all(this.groups.filter(g => g.name !== null).map(group => this.#watchName(group)))
    this.checking = true
    await Promise.all(this.backends.map(b => this.watch(b)))
  }

  // The backend with this address ("10.0.0.1:80"), or null. Retired ones are not found.
  find (address) {
    for (const backend of this.backends) if (backend.address === address) return backend
    return null
  }

  // Was a backend given (on the command line, by add) as `address`?
  given (address) {
    return this.#groupIndex(address) !== -1
  }

  // Every backend, the retired ones still finishing last.
  all () {
    return [...this.backends, ...this.retired]
  }

  get live () {
    let sum = 0
    for (const backend of this.backends) sum += backend.live
    for (const backend of this.retired) sum += backend.live
    return sum
  }

  // A lease on `backend` was released: a retired backend with nothing left is forgotten.
  // Returns true when it just drained.
  freed (backend) {
    return backend.live === 0 && backend.retired && this.retired.delete(backend)
  }

  // Probe a backend (unless there is nothing to probe with yet, or an operator disabled
  // it: probes pause until it is enabled). Resolves once its first probe has reported.
  watch (backend) {
    if (this.checker === null || this.closed || !this.checking || backend.admin === 'disabled') return Promise.resolve()
    return this.checker.watch(backend)
  }

  unwatch (backend) {
    if (this.checker !== null) this.checker.unwatch(backend)
  }

  // Add a backend as given on the command line (an operator's). Resolves with its
  // backends once each was probed; null when it is already a backend.
  async add (spec) {
    const group = newGroup(spec)
    const label = groupKey(spec)
    if (group.name === null ? this.find(label) !== null : this.given(label)) return null
    this.groups.push(group)
    if (group.name === null) {
      group.backends.push(this.#revive(group, label) || this.#create(spec, spec.host, null))
      this.#rebuild()
      this.log.info(`backend ${label} added (by an operator)`)
    } else {
      this.log.info(`backend ${label} added (by an operator); resolving it`)
      await this.#watchName(group)
    }
    this.changed()
    await Promise.all(group.backends.map(backend => this.watch(backend)))
    return group.backends
  }

  // Remove a backend as it was given ("10.0.0.1:80", or "name:80" for every address of
  // a name). Returns the backends removed (empty when nothing matched).
  remove (address) {
    const i = this.#groupIndex(address)
    if (i === -1) return []
    const [group] = this.groups.splice(i, 1)
    this.#rebuild()
    this.#removeGroup(group)
    for (const backend of group.backends) this.log.info(`backend ${backend.address} removed${leftOpen(backend)}`)
    this.changed()
    return group.backends
  }

  // A reload: new thresholds, checks, discovery and backends. Backends are matched by
  // how they were given: new ones join (probed first, then ramping up with slow-start),
  // removed ones retire, the others take their new settings at once. Returns what
  // changed, as lines for the log.
  update (settings, tls) {
    const changes = []
    this.thresholds = thresholdsOf(settings)
    for (const backend of this.all()) backend.setThresholds(this.thresholds)
    this.#updateChecks(checkerOptions(settings, tls))
    const { resolveInterval, dnsServer } = settings
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
    for (const spec of settings.backends) {
      const key = groupKey(spec)
      let group = old.get(key)
      if (group !== undefined) {
        old.delete(key)
        const what = specChanges(group.spec, spec)
        if (what.length > 0) {
          group.spec = spec
          for (const backend of group.backends) backend.configure(spec)
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
      const left = this.#removeGroup(group)
      changes.push(`backend ${groupKey(group.spec)} removed${left ? `, ${connections(left)} left to drain` : ''}`)
    }
    if (this.checking) for (const group of joined) if (group.name !== null) this.#watchName(group)
    this.changed()
    return changes
  }

  // The start-up table: a row per backend (and per name that resolved to nothing).
  table () {
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

  // Stop probing and resolving.
  close () {
    this.closed = true
    if (this.checker !== null) this.checker.close()
    if (this.discovery !== null) this.discovery.close()
  }

  #create (spec, host, name) {
    const backend = new Backend({ ...spec, host, name }, {
      now: this.now,
      checked: this.checker !== null,
      ...this.thresholds,
      rampOnFirstUp: this.isStarted(),
      onFree: this.onFree
    })
    backend.on('down', (reason, previous) => this.state(backend, 'down', reason, previous))
    backend.on('up', (reason, previous) => this.state(backend, 'up', reason, previous))
    backend.on('trial-failed', reason => this.log.info(`backend ${backend.address} still down: ${reason}`))
    this.watch(backend)
    return backend
  }

  // Resolve a group's name now and every --resolve-interval.
  #watchName (group) {
    if (this.discovery === null) this.discovery = new Discovery(this.discoveryOptions)
    return this.discovery.watch(group.name, (err, addresses) => this.#resolved(group, err, addresses), group)
  }

  // A name was resolved (or failed to be): join the new addresses, retire the gone ones.
  #resolved (group, err, addresses) {
    if (this.closed || group.removed) return
    const label = `${group.name}:${group.spec.port}`
    if (err) {
      const reason = reasonOf(err)
      if (group.error !== reason) {
        const kept = group.backends.map(b => b.host)
        const keeping = kept.length ? `keeping ${kept.join(', ')}` : 'no backend from it yet'
        this.log.warn(`cannot resolve ${label}: ${reason}; ${keeping}`)
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
    const removed = group.backends.filter(backend => !addresses.includes(backend.host))
    group.backends = group.backends.filter(backend => addresses.includes(backend.host))
    if (added.length === 0 && removed.length === 0) return
    this.#rebuild()
    const left = this.#retire(removed)
    if (this.isStarted()) {
      const changes = []
      if (added.length) changes.push(`added ${added.join(', ')}`)
      if (removed.length) {
        const draining = left ? `, ${connections(left)} left to drain` : ''
        changes.push(`removed ${removed.map(b => b.host).join(', ')}${draining}`)
      }
      const hosts = group.backends.map(b => b.host).join(', ') || 'nothing'
      this.log.info(`${label} resolves to ${hosts} (${changes.join('; ')})`)
    }
    this.changed()
  }

  // A group taken out (reload, remove), once no longer in this.groups: its name is no
  // longer resolved, its backends retire. Returns how many connections are left open.
  #removeGroup (group) {
    group.removed = true
    if (this.discovery !== null && group.name !== null) this.discovery.unwatch(group)
    return this.#retire(group.backends)
  }

  // Backends taken out: no new traffic, no probes; open connections finish undisturbed
  // and the backend is forgotten when the last one ends (freed). Returns how many
  // connections are left open.
  #retire (backends) {
    let left = 0
    for (const backend of backends) {
      backend.retire()
      this.unwatch(backend)
      if (backend.live > 0) this.retired.add(backend)
      left += backend.live
    }
    return left
  }

  // An address that comes back while its connections still finish is the same backend:
  // one max-conn, one set of counters.
  #revive (group, address) {
    for (const backend of this.retired) {
      if (backend.address !== address || backend.name !== group.name) continue
      this.retired.delete(backend)
      backend.revive()
      this.watch(backend)
      return backend
    }
    return null
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
      for (const backend of this.backends) this.watch(backend)
      return
    }
    this.checker.configure(options)
  }

  #rebuild () {
    this.backends = this.groups.flatMap(g => g.backends)
  }

  #groupIndex (address) {
    return this.groups.findIndex(g => groupKey(g.spec) === address)
  }
}

// What HealthChecker takes (constructor and configure).
function checkerOptions ({ check, checkInterval, checkTimeout, checkHost, proxyProtocol, backendProtocol }, tls) {
  const http2 = backendProtocol === 'h2' // --check http speaks HTTP/2 to them
  return { check, interval: checkInterval, timeout: checkTimeout, host: checkHost, tls, proxyProtocol, http2 }
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

function connections (n) {
  return `${n} connection${n === 1 ? '' : 's'}`
}

// "; 2 connections left open", or nothing.
function leftOpen (backend) {
  return backend.live === 0 ? '' : `; ${connections(backend.live)} left open`
}

// What health decides by: --rise, --fall (probes) and --eject-after (traffic).
function thresholdsOf ({ rise, fall, ejectAfter }) {
  return { rise, fall, ejectAfter }
}

module.exports = { Membership, leftOpen }
