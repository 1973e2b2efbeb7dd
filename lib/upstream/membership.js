'use strict'

const { Backend } = require('./backend')
const { Checks, thresholdsOf } = require('./checks')
const { Watching } = require('./watching')
const { Group } = require('./group')
const { endpointsOf } = require('./endpoints')
const { diffGroups } = require('./groups-diff')
const words = require('./membership-words')
const { startupTable, shownOf, keeping, answeredLine, rangeLine, rangeCounts, connections, leftOpen } = words
const { specAddress } = require('../address')
const { reasonOf } = require('../errors')

// Who the backends of one listener are: the groups as given (group.js: an IP literal or
// a Unix socket is one backend, a name as many as DNS says, an SRV name one per address
// of each target its records give, a port range one per port that listens), the
// Backends made from them, those retired but still finishing connections, the checks
// that probe them (checks.js) and the names and ranges watched (watching.js).
// Membership changes come from DNS, from probing a port range, from a reload (update)
// and from an operator (add, remove); a backend that leaves is retired: no new
// traffic, its open connections finish.
//
// It decides nothing about traffic. The upstream (upstream.js) hears of changes through
// two callbacks: changed() when the set of backends changed, and state(backend, state)
// when a backend went up or down.
class Membership {
  constructor (settings, { now, log, resolve, resolveSrv = null, tls, started, onFree, changed, state, app = null }) {
    this.now = now
    this.app = app // `lila run`: the App (app/app.js) whose ready instances the app group stands for
    this.log = log
    this.isStarted = started // () -> bool: start-up is done, changes are logged
    this.onFree = onFree // given to each Backend: a lease was released
    this.changed = changed
    this.state = state
    this.thresholds = thresholdsOf(settings)
    this.checks = new Checks(settings, tls)
    this.watching = new Watching(settings, { resolve, resolveSrv })
    this.groups = settings.backends.map(spec => new Group(spec))
    this.backends = [] // every group's, in the order given
    this.retired = new Set() // taken out (DNS, reload, operator), connections still open
    this.closed = false
    for (const group of this.groups) {
      if (!group.watched) group.join(this.#create(group.spec))
    }
    this.#rebuild()
  }

  // Resolve names and scan port ranges, then probe every backend once: those that
  // joined meanwhile too (an app's instance ready while the first were probed), so that
  // the start-up table shows what each was found to be.
  async start () {
    await Promise.all(this.groups.filter(group => group.watched).map(group => this.#discover(group)))
    this.checks.start()
    const probed = new Set()
    for (let round = 0; round < 100; round++) {
      const fresh = this.backends.filter(b => !probed.has(b))
      if (fresh.length === 0) break
      for (const backend of fresh) probed.add(backend)
      await Promise.all(fresh.map(b => this.watch(b)))
    }
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

  // Are backends probed (not --check none)?
  get checked () {
    return this.checks.on
  }

  // Probe a backend (checks.js). Resolves once its first probe has reported.
  watch (backend) {
    return this.checks.watch(backend)
  }

  unwatch (backend) {
    this.checks.unwatch(backend)
  }

  // Resolves once every backend had its first probe.
  probed () {
    return Promise.all(this.backends.map(b => this.watch(b)))
  }

  // `lila run`: the App the app group follows, given or taken away by a reload.
  useApp (app) {
    this.app = app
  }

  // Add a backend as given on the command line (an operator's). Resolves with its
  // backends once each was probed; null when it is already a backend.
  async add (spec) {
    const group = new Group(spec)
    const label = group.key
    if (!group.watched ? this.find(label) !== null : this.given(label)) return null
    this.groups.push(group)
    if (!group.watched) {
      group.join(this.#revive(label, null) || this.#create(spec))
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
    if (group.range !== null) this.log.info(`backend ${group.label} removed (${rangeCounts(group.range)})`)
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
    this.checks.update(settings, tls, this.backends)
    if (this.watching.update(settings)) {
      for (const group of this.groups) if (group.watched && !group.app) this.#discover(group)
    }

    const { matched, removed } = diffGroups(this.groups, settings.backends)
    const joined = []
    this.groups = matched.map(({ spec, key, group }) => {
      if (group !== null) {
        const what = group.reconfigure(spec)
        if (what.length > 0) changes.push(`backend ${key}: ${what.join(', ')}`)
        return group
      }
      const joining = new Group(spec)
      if (!joining.watched) joining.join(this.#revive(key, null) || this.#create(spec))
      joined.push(joining)
      changes.push(`backend ${key} added`)
      return joining
    })
    for (const group of joined) if (group.range !== null) group.adoptPorts(removed)
    this.#rebuild()
    for (const group of removed) {
      const left = this.#removeGroup(group)
      changes.push(`backend ${group.key} removed${left ? `, ${connections(left)} left to drain` : ''}`)
    }
    if (this.checks.started) for (const group of joined) if (group.watched) this.#discover(group)
    this.changed()
    return changes
  }

  // The start-up table (membership-words.js).
  table () {
    const instanceOf = port => this.app === null ? null : this.app.instanceAt(port)
    return startupTable(this.groups, { checked: this.checks.on, instanceOf })
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
    for (const group of this.groups) if (group.unwatchApp !== null) group.unwatchApp()
    this.checks.close()
    this.watching.close()
  }

  // `spec`: a backend's settings and where it is (host and port, or path), and `name`:
  // the DNS name it came from (null when given as it is).
  #create (spec) {
    const backend = new Backend(spec, {
      now: this.now,
      checked: this.checks.on,
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

  // Resolve a group's name or scan its port range (watching.js), or hear from the app
  // which of its instances are ready, now and on every change.
  #discover (group) {
    if (group.app) return this.#follow(group)
    const onResult = (err, answer) => this.#resolved(group, err, answer)
    return this.watching.watch(group, onResult, () => ({ rise: this.thresholds.rise, fall: this.thresholds.fall }))
  }

  // The app group: its ports are those of the app's ready instances; the app asks, per
  // port, whether its backend is up and how many connections it still has.
  #follow (group) {
    if (this.app === null) throw new Error('an app group needs the app') // (the builder makes both)
    const { host } = group.spec
    const backendAt = port => this.backends.find(b => b.port === port && b.host === host) || null
    group.unwatchApp = this.app.watch((err, ports) => this.#resolved(group, err, ports), {
      up: port => {
        const backend = backendAt(port)
        return backend !== null && backend.state === 'up'
      },
      live: port => {
        let sum = 0
        for (const backend of this.all()) if (backend.port === port && backend.host === host) sum += backend.live
        return sum
      }
    })
    return Promise.resolve()
  }

  // A name was resolved (or failed to be), or a port range scanned: join the new
  // addresses, retire the gone ones. `answer`: the addresses of a name, the records of
  // an SRV name (discovery.js watchService), whose weights and priorities may change
  // those of backends that stay, or the ports of a range that listen.
  #resolved (group, err, answer) {
    if (this.closed || group.removed) return
    const label = group.label
    const shown = shownOf(group)
    if (err) {
      const reason = reasonOf(err)
      const kept = group.backends.map(shown)
      if (group.failed(reason)) this.log.warn(`cannot resolve ${label}: ${reason}; ${keeping(kept)}`)
      return
    }
    const wanted = endpointsOf(group, answer, (record, hosts) => {
      this.log.debug(`${label}: cannot resolve ${record.target}: ${reasonOf(record.error)}; ${keeping(hosts)}`)
    })
    const added = []
    const changed = []
    for (const [address, endpoint] of wanted) {
      const { weight, backup } = endpoint
      const have = group.backends.find(b => b.address === address)
      if (have !== undefined) {
        // An SRV record's new weight or priority (an operator's weight stays until then).
        const what = group.recordChanges(address, endpoint)
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
      const revived = this.#revive(address, endpoint.name)
      if (revived !== null) revived.configure(spec)
      const backend = revived || this.#create(spec)
      group.join(backend)
      added.push(shown(backend))
    }
    const removed = group.answered(wanted)
    if (added.length === 0 && removed.length === 0 && changed.length === 0) return
    this.#rebuild()
    const why = group.range !== null ? 'stopped listening' : group.app ? 'its instance is leaving' : null
    const left = this.#retire(removed, why)
    if (group.app) {
      // The app says what its instances do (app/app.js).
      this.log.debug(`app: backends ${group.backends.map(shown).join(', ') || 'none'}`)
    } else if (this.isStarted()) {
      this.log.info(answeredLine(group, { added, removed: removed.map(shown), changed, left }))
    }
    this.changed()
  }

  // A group taken out (reload, remove), once no longer in this.groups: its name is no
  // longer resolved (its range scanned), its backends retire. Returns how many
  // connections are left open.
  #removeGroup (group) {
    group.remove()
    if (group.unwatchApp !== null) group.unwatchApp()
    if (group.watched) this.watching.unwatch(group)
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
  #revive (address, name) {
    for (const backend of this.retired) {
      if (backend.address !== address || backend.name !== name) continue
      this.retired.delete(backend)
      backend.revive()
      this.watch(backend)
      return backend
    }
    return null
  }

  #rebuild () {
    this.backends = this.groups.flatMap(g => g.backends)
  }

  #groupIndex (address) {
    return this.groups.findIndex(g => g.key === address)
  }
}

module.exports = { Membership }
