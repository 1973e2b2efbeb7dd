'use strict'

const { AddressGate } = require('./edge/addresses')

// Seconds a client is told to wait (Retry-After) by a maintenance answer.
const MAINTENANCE_RETRY_AFTER = 60

// Maintenance: a listener, or one of its routes, answers every HTTP request 503 with a
// page and Retry-After, but for clients on --maintenance-allow (the team, testing). One
// per Listener, kept across reloads: run-time state, switched on and off through the
// control API (POST and DELETE /maintenance, admin/control.js), the dashboard, or the
// config ("maintenance", --maintenance), which a reload applies only where it changed
// from the config before it, so a reload does not undo what an operator did.
//
//   maintenance.configure(config, pages)   at the start and on every reload; `pages`
//                      edge/rules.js loadEdge's (the config's pages read)
//   maintenance.set(route, page)           on for the listener (route null) or a route;
//                      page: an edge/error-pages.js Page, or null (the pool's 503
//                      --error-page, else lila's words)
//   maintenance.clear(route)               off again; -> whether it was on
//   maintenance.active                     anything on: what an exchange reads first
//   maintenance.holds(route, address) -> null (serve it), or { page } (answer 503)
//   maintenance.snapshot()
class Maintenance {
  constructor () {
    this.active = false
    this.on = new Map() // null (the listener) or a route's name -> { page, since }
    this.given = new Map() // what the config in force said: the same keys -> its value
    this.allowed = null // --maintenance-allow's AddressGate, or null: nobody
    this.allow = []
  }

  configure (config, pages) {
    this.allow = config.maintenanceAllow
    this.allowed = this.allow.length === 0 ? null : new AddressGate(this.allow, [])
    const given = new Map([[null, config.maintenance], ...config.routes.map(r => [r.name, r.maintenance])])
    for (const [name, value] of given) {
      const before = this.given.get(name)
      if (sameSetting(before, value)) continue
      if (value === null) this.clear(name)
      else this.set(name, value.page === null ? null : pages.get(value.page))
    }
    for (const name of this.on.keys()) if (!given.has(name)) this.on.delete(name) // a route gone
    this.given = given
    this.active = this.on.size > 0
  }

  set (route, page) {
    this.on.set(route, { page, since: Date.now() })
    this.active = true
  }

  clear (route) {
    const was = this.on.delete(route)
    this.active = this.on.size > 0
    return was
  }

  // `route`: the request's route (its name), or null.
  holds (route, address) {
    const state = this.on.get(null) || (route === null ? undefined : this.on.get(route))
    if (state === undefined) return null
    if (this.allowed !== null && this.allowed.judge(address) === null) return null
    return state
  }

  snapshot () {
    const of = name => {
      const state = this.on.get(name)
      return state === undefined ? null : { page: state.page === null ? null : state.page.file, since: state.since }
    }
    const routes = {}
    for (const name of this.on.keys()) if (name !== null) routes[name] = of(name)
    return { listener: of(null), routes, allow: [...this.allow] }
  }
}

function sameSetting (a, b) {
  if (a === undefined) return b === null // a new route, or the start: only "on" is news
  return a === b || (a !== null && b !== null && a.page === b.page)
}

module.exports = { Maintenance, MAINTENANCE_RETRY_AFTER }
