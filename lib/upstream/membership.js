'use strict'

const net = require('net')
const { Backend } = require('./backend')
const { HealthChecker } = require('./health')
const { Discovery } = require('./discovery')
const { PortRange } = require('./port-range')
const { formatPorts } = require('../format')
const { formatAddress, specAddress } = require('../address')
const { reasonOf } = require('../errors')

// Who the backends of one listener are: the groups as given (an IP literal or a Unix
// socket is one backend, a name as many as DNS says, an SRV name one per address of each
// target its records give, a port range one per port that listens), the Backends made
// from them, those retired but
// still finishing connections, and the health checker that probes them. Membership
// changes come from DNS, from probing a port range, from a reload (update) and from an
// operator (add, remove); a backend that leaves is retired: no new traffic, its open
// connections finish.
//
// It decides nothing about traffic. The upstream (upstream.js) hears of changes through
// two callbacks: changed() when the set of backends changed, and state(backend, state)
// when a backend went up or down.
class Membership {
  constructor (settings, { now, log, resolve, resolveSrv = null, tls, started, onFree, changed, state }) {
    this.now = now
    this.log = log
    this.resolve = resolve
    this.isStarted = started // () -> bool: start-up is done, changes are logged
    this.onFree = onFree // given to each Backend: a lease was released
    this.changed = changed
    this.state = state
    this.thresholds = thresholdsOf(settings)
    this.checker = settings.check === null ? null : new HealthChecker(checkerOptions(settings, tls))
    this.resolveSrv = resolveSrv
    this.discoveryOptions = { interval: settings.resolveInterval, server: settings.dnsServer, resolve, resolveSrv }
    this.discovery = null
    this.scanning = scanningOf(settings) // port ranges: { timeout, interval } of their probes
    this.groups = settings.backends.map(newGroup)
    this.backends = [] // every group's, in the order given
    this.retired = new Set() // taken out (DNS, reload, operator), connections still open
    this.checking = false // first checks started: new backends are probed at once
    this.closed = false
    for (const group of this.groups) {
      if (!isWatched(group)) group.backends.push(this.#create(group.spec))
    }
    this.#rebuild()
  }

  // Resolve names and scan port ranges, then probe every backend once.
  async start () {
    await Promise.all(this.groups.filter(isWatched).map(group => this.#discover(group)))
    this.checking = true
    await Promise.all(this.backends.map(b => this.watch(b)))
  }

  // The backend with this address ("10.0.0.1:80", "unix:/run/app.sock"), or null.
  // Retired ones are not found.
  find (address) {
    for (const backend of this.backends) if (backend.address === address) return backend
    return null
  }

  // The backends given as `address`: the one with that address, else those of a name
  // (or SRV name) given so. Empty when none.
  givenAs (address) {
    const backend = this.find(address)
    if (backend !== null) return [backend]
    const i = this.#groupIndex(address)
    return i === -1 ? [] : [...this.groups[i].backends]
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
    if (!isWatched(group) ? this.find(label) !== null : this.given(label)) return null
    this.groups.push(group)
    if (!isWatched(group)) {
      group.backends.push(this.#revive(group, label, null) || this.#create(spec))
      this.#rebuild()
      this.log.info(`backend ${label} added (by an operator)`)
    } else {
      const doing = group.range !== null ? 'probing its ports' : 'resolving it'
      this.log.info(`backend ${label} added (by an operator); ${doing}`)
      await this.#discover(group)
      // (What listens was said as it joined.)
      if (group.range !== null && group.backends.length === 0) this.log.info(rangeLine(group, [], [], 0))
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
    if (group.range !== null) this.log.info(`backend ${groupLabel(group)} removed (${rangeCounts(group.range)})`)
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
    this.scanning = scanningOf(settings)
    const { resolveInterval, dnsServer } = settings
    if (resolveInterval !== this.discoveryOptions.interval || dnsServer !== this.discoveryOptions.server) {
      const { resolve, resolveSrv } = this
      this.discoveryOptions = { interval: resolveInterval, server: dnsServer, resolve, resolveSrv }
      if (this.discovery !== null) {
        this.discovery.close()
        this.discovery = null
        for (const group of this.groups) if (isWatched(group)) this.#discover(group)
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
          for (const backend of group.backends) backend.configure(settingsOf(group, backend.address))
          changes.push(`backend ${key}: ${what.join(', ')}`)
        }
      } else {
        group = newGroup(spec)
        if (!isWatched(group)) group.backends.push(this.#revive(group, key, null) || this.#create(spec))
        joined.push(group)
        changes.push(`backend ${key} added`)
      }
      groups.push(group)
    }
    for (const group of joined) if (group.range !== null) adoptPorts(group, [...old.values()])
    this.groups = groups
    this.#rebuild()
    for (const group of old.values()) {
      const left = this.#removeGroup(group)
      changes.push(`backend ${groupKey(group.spec)} removed${left ? `, ${connections(left)} left to drain` : ''}`)
    }
    if (this.checking) for (const group of joined) if (isWatched(group)) this.#discover(group)
    this.changed()
    return changes
  }

  // The start-up table: a row per backend (and per name that resolved to nothing), and
  // per port range a row saying how many of its ports listen, above theirs: its idle
  // ports are not backends, and have no row.
  table () {
    const rows = [['backend', 'state', 'check']]
    for (const group of this.groups) {
      if (group.range !== null) {
        const { live, idle } = group.range
        const ports = formatPorts(group.range.ports(false))
        const watching = idle === 0 ? 'none idle' : `${idle} idle (${ports}): a port joins when it listens`
        rows.push([groupLabel(group), `${live} live`, watching])
      } else if (group.name !== null && group.backends.length === 0) {
        rows.push([groupLabel(group), '-', `cannot resolve: ${group.error || 'no address'}`])
      }
      for (const b of group.backends) {
        const notes = [b.name, b.backup ? 'backup' : null].filter(Boolean)
        const why = b.state === 'down' ? b.downReason : (b.lastCheck || 'not checked (--check none)')
        rows.push([b.address + (notes.length ? ` (${notes.join(', ')})` : ''), b.state, why])
      }
    }
    return rows
  }

  // Each port range: how many of its ports listen, for the snapshot.
  //   [{ range: '127.0.0.1:3000-3009', ports: 10, live: 2, idle: 8, listening: [3000, 3001] }]
  ranges () {
    return this.groups.filter(g => g.range !== null).map(({ range, spec }) => ({
      range: specAddress(spec),
      ports: range.size,
      live: range.live,
      idle: range.idle,
      listening: range.ports()
    }))
  }

  // Stop probing and resolving.
  close () {
    this.closed = true
    if (this.checker !== null) this.checker.close()
    if (this.discovery !== null) this.discovery.close()
  }

  // `spec`: a backend's settings and where it is (host and port, or path), and `name`:
  // the DNS name it came from (null when given as it is).
  #create (spec) {
    const backend = new Backend(spec, {
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

  // Resolve a group's name (A and AAAA, or SRV) now and every --resolve-interval; scan
  // a port range now and every --check-interval.
  #discover (group) {
    if (this.discovery === null) this.discovery = new Discovery(this.discoveryOptions)
    const onResult = (err, answer) => this.#resolved(group, err, answer)
    if (group.range !== null) {
      return this.discovery.watchRange(group.range, onResult, group, {
        options: () => ({ ...this.scanning, rise: this.thresholds.rise, fall: this.thresholds.fall }),
        interval: () => this.scanning.interval
      })
    }
    if (group.srv) return this.discovery.watchService(group.name, onResult, group)
    return this.discovery.watch(group.name, onResult, group)
  }

  // A name was resolved (or failed to be), or a port range scanned: join the new
  // addresses, retire the gone ones. `answer`: the addresses of a name, the records of
  // an SRV name (discovery.js watchService), whose weights and priorities may change
  // those of backends that stay, or the ports of a range that listen.
  #resolved (group, err, answer) {
    if (this.closed || group.removed) return
    const label = groupLabel(group)
    const shown = backend => group.srv ? backend.address : group.range !== null ? backend.port : backend.host
    if (err) {
      const reason = reasonOf(err)
      if (group.error !== reason) {
        const kept = group.backends.map(shown)
        const keeping = kept.length ? `keeping ${kept.join(', ')}` : 'no backend from it yet'
        this.log.warn(`cannot resolve ${label}: ${reason}; ${keeping}`)
      }
      group.error = reason
      return
    }
    group.error = null
    const wanted = group.srv
      ? this.#srvEndpoints(group, answer)
      : group.range !== null ? rangeEndpoints(group, answer) : nameEndpoints(group, answer)
    const added = []
    const changed = []
    for (const [address, endpoint] of wanted) {
      const { weight, backup } = endpoint
      const have = group.backends.find(b => b.address === address)
      if (have !== undefined) {
        // An SRV record's new weight or priority (an operator's weight stays until then).
        const before = settingsOf(group, address)
        const what = group.records.has(address) ? specChanges(before, { ...before, weight, backup }) : []
        if (what.length > 0) {
          have.configure({ ...group.spec, weight, backup })
          changed.push(`${address} ${what.join(', ')}`)
        }
        continue
      }
      if (this.backends.some(b => b.address === address)) {
        this.log.debug(`${label}: ${address} is already a backend`)
        continue
      }
      const spec = { ...group.spec, host: endpoint.host, port: endpoint.port, name: endpoint.name, weight, backup }
      const revived = this.#revive(group, address, endpoint.name)
      if (revived !== null) revived.configure(spec)
      const backend = revived || this.#create(spec)
      group.backends.push(backend)
      added.push(shown(backend))
    }
    if (group.srv) group.records = new Map([...wanted].map(([address, e]) => [address, recordOf(e)]))
    const removed = group.backends.filter(backend => !wanted.has(backend.address))
    group.backends = group.backends.filter(backend => wanted.has(backend.address))
    if (added.length === 0 && removed.length === 0 && changed.length === 0) return
    this.#rebuild()
    const left = this.#retire(removed, group.range !== null ? 'stopped listening' : null)
    if (this.isStarted() && group.range !== null) {
      this.log.info(rangeLine(group, added, removed.map(shown), left))
    } else if (this.isStarted()) {
      const changes = []
      if (added.length) changes.push(`added ${added.join(', ')}`)
      if (removed.length) {
        const draining = left ? `, ${connections(left)} left to drain` : ''
        changes.push(`removed ${removed.map(shown).join(', ')}${draining}`)
      }
      if (changed.length) changes.push(changed.join(', '))
      const backup = b => group.srv && b.backup ? ' (backup)' : ''
      const hosts = group.backends.map(b => shown(b) + backup(b)).join(', ') || 'nothing'
      this.log.info(`${label} resolves to ${hosts} (${changes.join('; ')})`)
    }
    this.changed()
  }

  // An SRV name's records -> Map address -> { host, port, name, weight, backup }: each
  // address of each target is a backend; the records of the lowest priority are
  // primaries, the others backups (lila has one tier of them). A weight of 0 counts as 1
  // (RFC 2782: the least chance, and an equal share when every record says 0). A target
  // that could not be resolved this time (a timeout, not "no such name") keeps the
  // backends it had.
  #srvEndpoints (group, records) {
    const wanted = new Map()
    const first = Math.min(...records.map(r => r.priority))
    for (const record of records) {
      const settings = {
        port: record.port,
        name: record.target,
        weight: record.weight === 0 ? 1 : record.weight,
        backup: group.spec.backup || record.priority > first,
        lowPriority: record.priority > first
      }
      const hosts = record.addresses !== null
        ? record.addresses
        : group.backends.filter(b => b.name === record.target && b.port === record.port).map(b => b.host)
      if (record.addresses === null) {
        const keeping = hosts.length ? `keeping ${hosts.join(', ')}` : 'no backend from it yet'
        this.log.debug(`${groupLabel(group)}: cannot resolve ${record.target}: ${reasonOf(record.error)}; ${keeping}`)
      }
      for (const host of hosts) {
        const address = formatAddress(host, record.port)
        if (!wanted.has(address)) wanted.set(address, { host, ...settings })
      }
    }
    return wanted
  }

  // A group taken out (reload, remove), once no longer in this.groups: its name is no
  // longer resolved (its range scanned), its backends retire. Returns how many
  // connections are left open.
  #removeGroup (group) {
    group.removed = true
    if (this.discovery !== null && isWatched(group)) this.discovery.unwatch(group)
    return this.#retire(group.backends)
  }

  // Backends taken out: no new traffic, no probes; open connections finish undisturbed
  // and the backend is forgotten when the last one ends (freed). `why` as Backend#retire
  // takes it. Returns how many connections are left open.
  #retire (backends, why = null) {
    let left = 0
    for (const backend of backends) {
      backend.retire(why)
      this.unwatch(backend)
      if (backend.live > 0) this.retired.add(backend)
      left += backend.live
    }
    return left
  }

  // An address that comes back while its connections still finish is the same backend:
  // one max-conn, one set of counters. `name`: the DNS name it comes from now.
  #revive (group, address, name) {
    for (const backend of this.retired) {
      if (backend.address !== address || backend.name !== name) continue
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

// What the port ranges' probes take (discovery.js watchRange): --check-timeout, and
// --check-interval between scans.
function scanningOf ({ checkTimeout, checkInterval }) {
  return { timeout: checkTimeout, interval: checkInterval }
}

function newGroup (spec) {
  const srv = spec.srv !== undefined
  const range = spec.range !== undefined
  return {
    spec,
    srv, // an SRV name: its records give the backends (#srvEndpoints)
    // what is resolved: a name, an SRV name, or null (an IP address, a Unix socket, a
    // port range: its host is dialled as written)
    name: srv ? spec.srv : range || spec.path !== undefined || net.isIP(spec.host) ? null : spec.host,
    range: range ? new PortRange(spec.host, spec.range) : null, // a port range: which of its ports listen
    backends: [],
    error: null, // the last resolution failure, while it lasts
    records: new Map(), // SRV: address -> { weight, lowPriority }, as its records last said
    removed: false // taken out (#removeGroup): its late answers are ignored
  }
}

// Is the group's membership discovered (a name, an SRV name, a port range), rather than
// one backend as given?
function isWatched (group) {
  return group.name !== null || group.range !== null
}

// A backend as it was given: what a reload matches old and new backends by.
function groupKey (spec) {
  return specAddress(spec)
}

// A group's name in log lines: "name:80", an SRV name as it is, a port range as given.
function groupLabel (group) {
  if (group.range !== null) return specAddress(group.spec)
  return group.srv ? group.name : `${group.name}:${group.spec.port}`
}

// A name's addresses -> Map address -> { host, port, name, weight, backup }.
function nameEndpoints (group, addresses) {
  const { port, weight, backup } = group.spec
  return new Map(addresses.map(host => [formatAddress(host, port), { host, port, name: group.name, weight, backup }]))
}

// A port range's ports that listen -> Map address -> { host, port, name, weight, backup }.
function rangeEndpoints (group, ports) {
  const { host, weight, backup } = group.spec
  return new Map(ports.map(port => [formatAddress(host, port), { host, port, name: null, weight, backup }]))
}

// A reload that changed a port range (3000-3009 -> 3000-3019): a port listening in a
// removed range of the same host and in the new one keeps its backend (its state,
// counters and connections), with the new range's settings.
function adoptPorts (group, removed) {
  for (const other of removed) {
    if (other.range === null || other.spec.host !== group.spec.host) continue
    const kept = other.backends.filter(backend => group.range.adopt(backend.port))
    other.backends = other.backends.filter(backend => !kept.includes(backend))
    for (const backend of kept) backend.configure(group.spec)
    group.backends.push(...kept)
  }
}

// "range 127.0.0.1:3000-3009: 3001 listens, joining; 3002 stopped listening, leaving,
// 1 connection left to drain (2 live, 8 idle)": what a scan changed.
function rangeLine (group, joined, left, open) {
  const changes = []
  if (joined.length > 0) changes.push(`${joined.join(', ')} ${joined.length === 1 ? 'listens' : 'listen'}, joining`)
  if (left.length > 0) {
    const draining = open ? `, ${connections(open)} left to drain` : ''
    changes.push(`${left.join(', ')} stopped listening, leaving${draining}`)
  }
  const what = changes.length > 0 ? `${changes.join('; ')} ` : ''
  return `range ${groupLabel(group)}: ${what}(${rangeCounts(group.range)})`
}

// "2 live, 8 idle"
function rangeCounts (range) {
  return `${range.live} live, ${range.idle} idle`
}

// The settings of a group's backend at `address`: the group's, but an SRV name's
// weights and backups are its records' (as last resolved).
function settingsOf (group, address) {
  const record = group.records.get(address)
  if (!group.srv || record === undefined) return group.spec
  return { ...group.spec, weight: record.weight, backup: group.spec.backup || record.lowPriority }
}

// What is kept of an SRV endpoint to see what the next answer changes.
function recordOf ({ weight, lowPriority }) {
  return { weight, lowPriority }
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
