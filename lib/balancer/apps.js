'use strict'

const { RuntimeError } = require('../errors')

// lila run, as the balancer holds it: the App (app/app.js) of each listener that runs
// one, made with the listener (its Upstream's source of backends), started before the
// listener opens, stopped once it has drained, rolled on SIGHUP or the control API.
// app/ is loaded only when a listener runs an app.
class Apps {
  // `io`: { stdout, stderr, env, onGiveUp } every App is made with.
  constructor (io) {
    this.io = io
    this.byListener = new Map() // Listener -> App
  }

  get size () {
    return this.byListener.size
  }

  // The App of a listener about to be made; `named`: lines led by the listener's name
  // (several listeners run apps).
  make (listenerConfig, log, named) {
    const { App } = require('../app/app')
    const { check, checkHost, checkTimeout, backendProtocol, run, name } = listenerConfig
    // Ready: its port accepts, or --check passes (as health.js would probe it).
    const base = check === null ? { type: 'tcp' } : check
    const probe = { ...base, host: checkHost, tls: null, http2: backendProtocol === 'h2' }
    return new App(run, { ...this.io, log, check: probe, probeTimeout: checkTimeout, name: named ? name : null })
  }

  attach (listener, app) {
    this.byListener.set(listener, app)
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
      if (app !== null) await app.start().catch(err => lines.push(`listener ${listener.config.name}: ${err.message}`))
    }
  }

  // A rolling restart of every app (SIGHUP, the control API). -> a line each.
  roll (reason, why) {
    return Promise.all([...this.byListener.values()].map(app => app.roll(reason, why)))
  }

  // A reload may change what an app runs, not whether a listener runs one.
  checkKept (running, next) {
    for (const config of next.listeners) {
      const listener = running.find(l => l.config.name === config.name)
      if (listener !== undefined && (listener.config.run === null) !== (config.run === null)) {
        const what = config.run === null ? 'stop running its app' : 'start running an app'
        throw new RuntimeError(`listener ${config.name} cannot ${what} on a reload: restart lila for that`)
      }
    }
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
