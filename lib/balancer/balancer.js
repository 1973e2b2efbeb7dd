'use strict'

// A Balancer: a config's listeners (each made and updated in place by
// listener-maker.js) and their --redirect-http listeners, run together with what they
// are served with (provisions.js: files read, the certificate keeper, --fleet);
// reloaded as a plan (plan.js) that is bound, then applied.
// lib/index.js's createBalancer makes one; the options are described there.

const { RedirectListener } = require('../proxy/redirect')
const { viaToken } = require('../proxy/via')
const { silentLogger } = require('../log')
const { RuntimeError, ControlError } = require('../errors')
const { createControl, OPS } = require('../admin/control')
const { createAccessLog } = require('../admin/access-log')
const { descriptorLimit, listenerShare, limitWarning } = require('../descriptors')
const { planReload, planRedirects } = require('./plan')
const { Apps } = require('./apps')
const { startGained, swapApp } = require('./app-swap')
const { Provisions } = require('./provisions')
const { ListenerMaker } = require('./listener-maker')
const { listeningOn, matchText, leftToDrain } = require('./words')

class Balancer {
  constructor (config, {
    log = silentLogger,
    now = Date.now,
    resolve = null,
    resolveSrv = null,
    via = viaToken(),
    table = true,
    stdout = process.stdout,
    accessLog = defaultAccessLog(config, stdout),
    fileLimit = descriptorLimit(),
    random = Math.random,
    keeperOptions = {},
    stderr = process.stderr,
    env = process.env,
    onAppGiveUp = () => {},
    provisions = new Provisions({ log, now, keeperOptions }),
    tracer = null
  } = {}) {
    this.log = log
    this.now = now
    this.startedAt = now()
    this.table = table
    this.accessLog = accessLog
    this.fileLimit = fileLimit
    this.provisions = provisions
    this.apps = new Apps({ stdout, stderr, env, onGiveUp: onAppGiveUp }) // lila run
    this.apps.nameFor(config)
    const pools = { now, resolve, resolveSrv, table, random } // what every Upstream is made with
    const inForce = () => this.current
    this.maker = new ListenerMaker({ log, pools, via, accessLog, tracer, provisions, apps: this.apps, inForce })
    this.closing = false
    this.current = config
    this.retiring = new Map() // listener removed by a reload -> Promise, while it drains
    this.redirects = new Map() // listener name -> RedirectListener (--redirect-http)
    this.started = false
    this.controls = null
    // Passed around on their own (a status server's stats, a journal's control).
    this.stats = this.stats.bind(this)
    this.control = this.control.bind(this)

    const descriptors = this.descriptorsFor(config.listeners)
    this.running = config.listeners.map(l => this.maker.make(l, provisions.material(l), descriptors))
    // Certificates lila makes (local) or kept (ACME) are there before the first client,
    // once every file was read: a state folder that cannot be used is a UsageError here.
    this.keeperStarted = provisions.startKeeper(config)
  }

  get listeners () { return this.running }
  get config () { return this.current }

  // Bind every listener (so that a taken port fails at once), then resolve names and
  // check every backend once, printing what was found, then serve. Clients that connect
  // meanwhile wait unread.
  // `given`, `redirectsGiven`: Map listener name -> a socket the process was given for
  // it, or for its --redirect-http (bind.js listen).
  async listen (given = new Map(), redirectsGiven = new Map()) {
    const addresses = []
    const warning = limitWarning(this.fileLimit, this.current.listeners.map(l => l.maxConn))
    if (warning !== null) this.log.warn(warning)
    try {
      await this.keeperStarted
      for (const listener of this.running) {
        addresses.push(await listener.listen(given.get(listener.config.name) || null))
      }
      for (const listener of this.running) {
        const { name, redirectHttp } = listener.config
        if (redirectHttp !== null) await this.startRedirect(listener, redirectsGiven.get(name))
      }
      // lila run: listening waits for an instance of each app to be ready.
      await this.apps.startAll()
      await Promise.all(this.running.flatMap(listener => upstreamsOf(listener).map(upstream => upstream.start())))
      for (const listener of this.running) listener.open()
    } catch (err) {
      // Given sockets' files are not this start's to remove.
      await this.close(0, { handOver: given.size + redirectsGiven.size > 0 })
      throw err
    }
    this.started = true
    this.provisions.beginKeeper() // ACME's TLS-ALPN-01 needs the listeners open
    return addresses
  }

  // Apply a new config (as config/builder.js builds it) without dropping a connection.
  // Listeners are matched by name: new ones are bound, checked and opened; removed ones
  // stop accepting and drain (up to shutdownTimeout, as on shutdown); one whose address
  // or protocol changed is replaced so; the others take their new settings in place
  // (upstream.update: backends join and drain; an app started or stopped: app-swap.js).
  // TLS files are read again, so renewed certificates take effect. Rejects, with nothing
  // changed, when a TLS file cannot be used (UsageError), a new port cannot be bound or
  // an app a listener gains does not start (RuntimeError). Resolves with what changed,
  // as log lines.
  async reload (next) {
    if (!this.started) throw new RuntimeError('cannot reload before listen() is done')
    const loaded = this.provisions.materialOf(next) // may throw: nothing has changed yet
    const plan = planReload(this.current, next, this.runningShape())
    const byName = new Map(this.running.map(listener => [listener.config.name, listener]))
    // lila run: the apps kept listeners gain start first (app-swap.js); may throw
    this.apps.nameFor(next)
    const gained = await startGained(this.apps, plan.keep, byName).catch(err => {
      this.apps.nameFor(this.current)
      throw err
    })
    let keeperLines, descriptors, starting, bound
    try {
      // Certificates lila gets itself, before the listeners take the config. (A
      // UsageError here changes nothing: no listener took anything yet.)
      keeperLines = await this.provisions.reloadKeeper(next)
      descriptors = this.descriptorsFor(next.listeners)
      starting = plan.start.map(step =>
        ({ ...step, listener: this.maker.make(step.config, loaded[step.index], descriptors) }))
      bound = await this.bindAllOrNone(starting.filter(step => !step.afterRetire))
    } catch (err) {
      await Promise.all([...gained.values()].map(app => app.stop()))
      this.apps.nameFor(this.current)
      throw err
    }

    // From here on the reload is applied.
    const lines = [...plan.settings]
    const routesStarted = []
    for (const { index, config, routes } of plan.keep) {
      const listener = byName.get(config.name)
      for (const change of await swapApp(this.apps, listener, config, gained.get(listener))) {
        lines.push(`${config.name}: ${change}`)
      }
      const updated = this.maker.update(listener, config, loaded[index], routes, descriptors)
      routesStarted.push(...updated.started)
      for (const change of updated.lines) lines.push(`${config.name}: ${change}`)
    }
    const drained = new Map() // name -> connections left on the listener it replaces
    for (const { name, replaced } of plan.retire) {
      const old = byName.get(name)
      const left = old.sessions.size
      if (replaced) drained.set(name, left)
      else lines.push(`listener ${name} removed${left ? `, ${leftToDrain(left)}` : ''}`)
      this.retire(old, next.shutdownTimeout)
    }
    for (const { config, listener } of starting.filter(step => step.afterRetire)) {
      try {
        bound.push([listener, await listener.listen()])
      } catch (err) {
        lines.push(`listener ${config.name} not started: ${err.message}`)
      }
    }
    const fresh = bound.map(([listener]) => listener)
    await this.apps.start(fresh, lines)
    const starts = fresh.flatMap(listener => upstreamsOf(listener).map(upstream => upstream.start()))
    await Promise.all([...routesStarted, ...starts])
    for (const listener of fresh) listener.open()
    for (const [listener, address] of bound) {
      const left = drained.get(listener.config.name)
      const how = left === undefined ? 'added' : 'replaced'
      const drain = left ? `; ${leftToDrain(left)} on the old one` : ''
      lines.push(`listener ${listener.config.name} ${how}: ${listeningOn(listener, address)}${drain}`)
    }

    for (const listener of fresh) byName.set(listener.config.name, listener)
    const kept = new Set([...plan.keep.map(({ config }) => config.name), ...fresh.map(l => l.config.name)])
    this.running = plan.order.filter(name => kept.has(name)).map(name => byName.get(name))
    for (const { name } of plan.retire) {
      if (!kept.has(name)) this.provisions.certificates.use(name, null) // its certificates are served no more
    }
    this.current = next
    await this.updateRedirects(lines)
    lines.push(...keeperLines)
    this.provisions.beginKeeper() // the listeners of the new config listen
    return lines
  }

  // Stop accepting and drain every listener; stats() still shows them. The access log's
  // last lines are written before it resolves: a process may exit right after.
  // `handOver`: another process listens on the same sockets now (cli/upgrade.js).
  close (timeout = this.current.shutdownTimeout, { handOver = false } = {}) {
    this.closing = true
    this.provisions.closeKeeper()
    const open = this.running.filter(listener => !this.retiring.has(listener))
    const all = open.map(listener => this.retire(listener, timeout, handOver))
    const redirected = [...this.redirects.values()].map(redirect => redirect.close())
    this.redirects.clear()
    return Promise.all([...all, ...this.retiring.values(), ...redirected]).then(() => {
      if (this.accessLog !== null) this.accessLog.flush()
    })
  }

  destroy () {
    for (const listener of new Set([...this.running, ...this.retiring.keys()])) listener.destroy()
    this.apps.killAll()
  }

  // A fresh plain snapshot (README: "Status, metrics and control"). A backend is as its
  // listener's protocol shows it (HTTP adds its keep-alive pool: { sockets, idle,
  // connects, reuses }).
  stats () {
    const now = this.now()
    return {
      startedAt: this.startedAt,
      // Each certificate served: names, issuer, validity, renewal (proxy/tls.js snapshot)
      certificates: this.running.filter(l => l.tls !== null).flatMap(l => l.tls.snapshot(l.name, now)),
      listeners: this.running.map(listener => {
        const backendsOf = upstream => upstream.all().map(backend => listener.protocol.snapshotBackend(backend))
        const app = this.apps.of(listener)
        return {
          ...listener.snapshot(),
          app: app === null ? null : app.snapshot(), // lila run: the instances
          backends: backendsOf(listener.upstream),
          // --route: each route's pool, as a listener shows its own
          routes: listener.routes.map(({ name, match, upstream }) => ({
            name,
            match: matchText(match),
            mode: upstream.mode,
            ...upstream.stats(),
            backends: backendsOf(upstream),
            canary: canaryOf(listener, name, backendsOf)
          })),
          canary: canaryOf(listener, null, backendsOf) // --canary: its side by side, and its pool's backends
        }
      }),
      fleet: this.provisions.fleetSnapshot() // --fleet: Redis, the members
    }
  }

  // One control action, { op, ...request } (control.js), e.g. from the --workers
  // primary: { op: 'drain', backend: '10.0.0.1:80' }. A promise of { message, backends }.
  control ({ op, ...request }) {
    this.controls ||= createControl(this)
    if (!OPS.includes(op)) {
      const message = `unknown control action ${JSON.stringify(op)}: expected one of ${OPS.join(', ')}`
      return Promise.reject(new ControlError(400, message))
    }
    return this.controls[op](request)
  }

  // The listening sockets, to hand to the next lila (cli/upgrade.js): what each is (a
  // listener's, or its --redirect-http's: the listener's name, the address as
  // configured) and its descriptor.
  // `server` rides along (not to be sent anywhere): a --workers worker sends its handle.
  sockets () {
    return [
      ...this.running.map(({ config: { name, protocol, host, port }, descriptor, server }) => ({
        role: 'listener', name, protocol, host, port, fd: descriptor, server
      })),
      ...[...this.redirects].map(([name, redirect]) => ({
        role: 'redirect',
        name,
        host: redirect.host,
        port: redirect.port,
        fd: redirect.descriptor,
        server: redirect.server
      }))
    ]
  }

  // What runs now, as plan.js reads it.
  runningShape () {
    return {
      listeners: this.running.map(listener => ({
        config: listener.config,
        routes: listener.routes.map(({ name, match, upstream }) => ({ name, match, mode: upstream.mode }))
      }))
    }
  }

  // The limit on open files, and each listener's share of it (descriptors.js): what
  // --max-conn defaults to.
  descriptorsFor (configs) {
    return { limit: this.fileLimit, share: listenerShare(this.fileLimit, configs.length) }
  }

  // lila run: a rolling restart of every running listener's app (SIGHUP, after its
  // reload). -> its lines.
  rollApps (reason, why) {
    return this.apps.roll(reason, why, this.running)
  }

  // Does a running listener run an app?
  get runsApp () {
    return this.running.some(listener => this.apps.of(listener) !== null)
  }

  // New listeners bound, all or none: -> [[listener, address]].
  async bindAllOrNone (steps) {
    const bound = []
    try {
      for (const { listener } of steps) bound.push([listener, await listener.listen()])
    } catch (err) {
      await Promise.all(bound.map(([listener]) => listener.close(0)))
      throw err
    }
    return bound
  }

  retire (listener, timeout, handOver = false) {
    for (const upstream of upstreamsOf(listener)) upstream.close()
    // lila run: the app's instances stop once the listener has drained (an upgrade's
    // new lila runs its own; a listener that replaces this one, its own).
    const stopApp = () => this.apps.stop(listener)
    const closed = listener.close(timeout, { handOver }).then(stopApp).then(() => { this.retiring.delete(listener) })
    this.retiring.set(listener, closed)
    return closed
  }

  // --redirect-http of a listener, bound: ACME HTTP-01 and a 308 to its https port.
  // `given`: a socket the process was given for it (an upgrade), or undefined.
  async startRedirect (listener, given = null) {
    const { name, host, redirectHttp } = listener.config
    const { challenges } = this.provisions.certificates
    const { port: httpsPort, log } = listener
    const redirect = new RedirectListener({ host, port: redirectHttp, httpsPort, challenges, log })
    const bound = await redirect.listen(given || null)
    this.redirects.set(name, redirect)
    if (this.table) {
      listener.log.info(`redirect-http on ${bound}: ACME HTTP-01, and a 308 to https on port ${listener.port}`)
    }
    return redirect
  }

  // After a reload: redirect listeners follow their listeners' --redirect-http.
  async updateRedirects (lines) {
    const running = [...this.redirects].map(([name, { host, port }]) => ({ name, host, port }))
    const plan = planRedirects(running, this.running.map(listener => listener.config))
    const byName = new Map(this.running.map(listener => [listener.config.name, listener]))
    for (const name of plan.follow) this.redirects.get(name).httpsPort = byName.get(name).port
    for (const { name, off } of plan.stop) {
      const redirect = this.redirects.get(name)
      this.redirects.delete(name)
      await redirect.close()
      if (off) lines.push(`${name}: redirect-http off`)
    }
    for (const name of plan.start) {
      try {
        const redirect = await this.startRedirect(byName.get(name))
        lines.push(`${name}: redirect-http on ${redirect.bound}`)
      } catch (err) {
        lines.push(`${name}: redirect-http not started: ${err.message}`)
      }
    }
  }
}

// Every pool of a listener: its own backends', its routes' and their canaries'.
const upstreamsOf = listener =>
  [listener.upstream, ...listener.routes.map(route => route.upstream), ...listener.canaryUpstreams.values()]

// A pool's --canary as stats() shows it, or null.
function canaryOf (listener, name, backendsOf) {
  const canary = listener.canaries.get(name)
  return canary === null ? null : canary.snapshot(backendsOf(canary.upstream))
}

function defaultAccessLog (config, stdout) {
  return config.accessLog ? createAccessLog({ format: config.accessLog, stdout }) : null
}

module.exports = { Balancer }
