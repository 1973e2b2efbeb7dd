'use strict'

// lila run, as the balancer holds it: the App (app/app.js) of each listener that runs
// one, made with the listener (its Upstream's source of backends), started before the
// listener opens, stopped once it has drained, rolled on SIGHUP or the control API.
// app/ is loaded only when a listener runs an app.
class Apps {
  // `io`: { stdout, stderr, env, onGiveUp } every App is made with.
  constructor (io) {
    this.io = io
    this.byListener = new Map() // Listener -> App
    this.fresh = new Set() // Apps a reload just started: the roll after it leaves them be
    this.named = false // app lines are led by their listener's name: several run apps
  }

  // The config in force, or the one a reload applies: app lines say their listener's
  // name from now on when it runs several apps (each line asks: App name()).
  nameFor (config) {
    this.named = config.listeners.filter(l => l.run !== null).length > 1
  }

  get size () {
    return this.byListener.size
  }

  // The App of a listener about to be made.
  make (listenerConfig, log) {
    const { App } = require('../app/app')
    const { check, checkHost, checkTimeout, backendProtocol, run, name } = listenerConfig
    // Ready: its port accepts, or --check passes (as health.js would probe it).
    const base = check === null ? { type: 'tcp' } : check
    const probe = { ...base, host: checkHost, tls: null, http2: backendProtocol === 'h2' }
    const named = () => this.named ? name : null
    return new App(run, { ...this.io, log, check: probe, probeTimeout: checkTimeout, name: named })
  }

  attach (listener, app) {
    this.byListener.set(listener, app)
  }

  // A kept listener's app a reload started (app-swap.js): the roll after it leaves it be.
  adopt (listener, app) {
    this.attach(listener, app)
    this.fresh.add(app)
  }

  of (listener) {
    return this.byListener.get(listener) || null
  }

  // Each listener's app: one instance of each ready. Rejects when an app did not start.
  startAll () {
    return Promise.all([...this.byListener.values()].map(app => app.start()))
  }

  // New listeners of a reload: an app that does not start is a line, not a failure.
  async start (listeners, lines) {
    for (const listener of listeners) {
      const app = this.of(listener)
      if (app === null) continue
      this.fresh.add(app)
      await app.start().catch(err => lines.push(`listener ${listener.config.name}: ${err.message}`))
    }
  }

  // A rolling restart of the apps of `listeners` (those running; SIGHUP after its
  // reload), but those the reload just started: they run the new command already.
  // -> a line each.
  roll (reason, why, listeners) {
    const apps = listeners.map(listener => this.of(listener)).filter(app => app !== null && !this.fresh.has(app))
    this.fresh.clear()
    return Promise.all(apps.map(app => app.roll(reason, why)))
  }

  // The listener has drained: its app's instances stop (an upgrade's new lila runs its own).
  async stop (listener) {
    const app = this.of(listener)
    if (app === null) return
    await app.stop()
    this.byListener.delete(listener)
  }

  killAll () {
    for (const app of this.byListener.values()) app.kill()
  }
}

module.exports = { Apps }
