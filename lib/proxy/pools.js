'use strict'

const { Router } = require('./router')

// The pools a listener's HTTP requests go to: its own backends (`own`, named null) and
// each --route's ({ name, match, upstream }, balancer.js makes them), each with the
// rules at the edge compiled for it (edge/rules.js compileEdge: `rules`, null when it
// has none), its --max-body-size (`maxBody`, bytes; Infinity: none), its --error-page
// pages (`pages`, `intercept`) and its --canary (`canary`, null: none). Made again at the
// start and on every reload.
class Pools {
  // own: the listener's Upstream; ownRules, routeRules: compileEdge's `own` and `routes`;
  // pages: edge/error-pages.js compilePages's (`pages` of each pool, null: none; and
  // `intercept`, the same with --intercept-errors, else null); canaries: the listener's
  // (canary.js: `canary` of each pool, null: none);
  // config: the listener's (a route's pool settings are in config.routes).
  constructor (own, ownRules, routeRules, routes, config, pages, canaries) {
    const maxBody = settings => settings.maxBodySize ?? Infinity
    const intercept = p => config.interceptErrors ? p : null
    const pools = new Map(config.routes.map(route => [route.name, route.pool]))
    // As routeFor() gives it.
    this.own = {
      name: null,
      match: null,
      upstream: own,
      rules: ownRules,
      maxBody: maxBody(config),
      pages: pages.own,
      intercept: intercept(pages.own),
      canary: canaries.get(null)
    }
    this.routes = routes.map(({ name, match, upstream }) => ({
      name,
      match,
      upstream,
      rules: routeRules.get(name) ?? null,
      maxBody: maxBody(pools.get(name)),
      pages: pages.routes.get(name) ?? null,
      intercept: intercept(pages.routes.get(name) ?? null),
      canary: canaries.get(name)
    }))
    this.router = routes.length === 0 ? null : new Router(this.routes)
  }

  // The pool a request goes to: a route, or the listener's own; null when no route
  // matches and the listener has no backends of its own (`hasOwn` false: answer 404
  // with unrouted()).
  routeFor (head, hasOwn) {
    if (this.router === null) return this.own
    const route = this.router.match(head.host, head.path, head.fields, head.target)
    if (route !== null) return route
    return hasOwn ? this.own : null
  }

  // Why a request went nowhere (routeFor gave null), for the 404 page and the log.
  unrouted (head) {
    const where = `${head.host || '(no host)'}${head.path}`
    return `no route for ${where}; the routes are ${this.routes.map(r => r.name).join(', ')}`
  }
}

module.exports = { Pools }
