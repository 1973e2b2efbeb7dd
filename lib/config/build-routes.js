'use strict'

// Routes (--route, "routes"), checked and each given its own pool: buildRoutes, and the
// options a route may set (ROUTE_OPTIONS, which file.js accepts in a route).

const { LISTENER_OPTIONS } = require('./options')
const { quote } = require('./values')
const { parseRouteMatch } = require('./route-spec')
const { listenerFrom } = require('./defaults')
const { parseValue, parseValues, shown } = require('./given-values')
const { buildMode, buildBackends, isHashMode } = require('./build-pool')

// Options a route may set for its own pool, in place of its listener's: how its
// backends are chosen, retried and checked (in the config file), and those marked
// `route: 'instead'` in OPTIONS (--max-body-size; also a --route word). Timeouts and
// the other limits stay the listener's.
const POOL_OPTIONS = LISTENER_OPTIONS.filter(o => ((o.group === 'balancing' || o.group === 'health') &&
  o.name !== 'connect-timeout') || o.route === 'instead')
// Rules at the edge a route may add to its listener's (`route: true` in OPTIONS): judged
// after the listener's, never inherited from them.
const EDGE_OPTIONS = LISTENER_OPTIONS.filter(o => o.route === true)
// A route's own (`route: 'own'`): neither inherited nor added to (--canary).
const OWN_OPTIONS = LISTENER_OPTIONS.filter(o => o.route === 'own')
const ROUTE_OPTIONS = [...POOL_OPTIONS, ...EDGE_OPTIONS, ...OWN_OPTIONS]
const CANARY = OWN_OPTIONS.find(o => o.name === 'canary')

// Routes (--route, "routes"): each its own pool, with the listener's settings (and
// mode, unless it has one) but for its own mode, backends and POOL_OPTIONS; and its own
// rules at the edge (EDGE_OPTIONS, strip). `entries`: [{ at, match, name, mode,
// backends, values, strip }], each part { value, at } as for a listener (name, mode and
// strip may be undefined; values a Map of ROUTE_OPTIONS given).
//   -> [{ name, match: { host, wildcard, path, condition }, pool, strip, allow, deny,
//      basicAuth, forwardAuth, errorPage, maintenance, canary }], `pool` a listener's
//      settings as an Upstream takes them (listenerFrom's shape, named after the route);
//      canary as buildCanary makes it, or null
function buildRoutes (entries, listenerValues, settings, listenerMode, src) {
  const routes = []
  for (const entry of entries) {
    if (settings.protocol !== 'http' && settings.protocol !== 'grpc') {
      throw src.fail(entry.at, `routes need ${src.setting('protocol', 'http')}: they match a request's Host and path`)
    }
    let match
    try {
      match = parseRouteMatch(entry.match.value)
    } catch (err) {
      throw src.fail(entry.match.at, err.message)
    }
    const name = entry.name === undefined ? entry.match.value : entry.name.value
    if (entry.name !== undefined && (typeof name !== 'string' || !ROUTE_NAME.test(name))) {
      throw src.fail(entry.name.at, `invalid route name ${shown(name)}: expected letters, digits and . _ - (up to 64)`)
    }
    const same = routes.find(r => r.name === name || sameMatch(r.match, match))
    if (same !== undefined) {
      throw src.fail(entry.at, `duplicate route ${quote(name)}: expected each match once`)
    }
    const values = new Map([...listenerValues].filter(([key]) => POOL_OPTIONS.some(o => o.name === key)))
    for (const [key, value] of entry.values) values.set(key, value)
    // A hash-balance-factor of the listener's applies to a route only in a hash mode.
    const routeSettings = { ...settings, hashBalanceFactor: null }
    for (const o of POOL_OPTIONS) {
      if (entry.values.has(o.name)) routeSettings[o.key] = parseValue(o, entry.values.get(o.name), src)
    }
    const edge = {}
    for (const o of EDGE_OPTIONS) {
      edge[o.key] = entry.values.has(o.name) ? parseValues(o, entry.values.get(o.name), src) : o.default
    }
    const strip = buildStrip(entry.strip, match, name, src)
    const at = key => values.get(key).at
    const mode = entry.mode === undefined ? listenerMode : buildMode(entry.mode, routeSettings, at, src)
    if (routeSettings.hashBalanceFactor === null && isHashMode(mode)) {
      routeSettings.hashBalanceFactor = settings.hashBalanceFactor
    }
    if (entry.backends.length === 0) {
      const example = quote(`${entry.match.value}=10.0.0.1:80`)
      throw src.fail(entry.at, `route ${quote(name)} has no backend: expected at least one, e.g. ${example}`)
    }
    const backends = buildBackends(entry.backends, src)
    // --fault names the listener's own backends only.
    const pool = listenerFrom({ ...routeSettings, name, fault: [], canary: null }, {
      mode, backends, tls: null, backendTls: null, routes: []
    })
    const given = entry.values.get('canary')
    const canary = given === undefined
      ? null
      : buildCanary(parseValue(CANARY, given, src), routeSettings, mode, name, src, given.at)
    routes.push({
      name,
      match,
      pool,
      strip,
      allow: edge.allow.flat(),
      deny: edge.deny.flat(),
      basicAuth: edge.basicAuth,
      forwardAuth: edge.forwardAuth,
      errorPage: edge.errorPage,
      maintenance: edge.maintenance,
      canary
    })
  }
  return routes
}

// --canary (a listener's, or a route's own): its backends checked, and a pool of its
// own with the settings of the pool it stands beside (`settings`, `mode`; `name` that
// pool's name, or null for a listener's own backends).
//   -> { share, backends, pool } (pool: listenerFrom's shape, named "NAME canary")
function buildCanary (canary, settings, mode, name, src, at) {
  if (canary === null) return null
  const backends = buildBackends(canary.backends.map(value => ({ value, at })), src)
  const poolName = name === null ? 'canary' : `${name} canary`
  const pool = listenerFrom({ ...settings, name: poolName, fault: [], canary: null }, {
    mode, backends, tls: null, backendTls: null, routes: []
  })
  return { share: canary.share, backends, pool }
}

// A route's strip ({ value, at } or undefined): true takes its path prefix off, so it
// needs one.
function buildStrip (entry, match, name, src) {
  if (entry === undefined) return false
  if (typeof entry.value !== 'boolean') throw src.fail(entry.at, `expected true or false, got ${shown(entry.value)}`)
  if (entry.value && (match.path === null || match.path === '/')) {
    const example = match.host === null ? '/api' : `${match.host}/api`
    throw src.fail(entry.at, `route ${quote(name)} has no path prefix to strip: expected a match such as ${example}`)
  }
  return entry.value
}

const ROUTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
const sameMatch = (a, b) => a.host === b.host && a.wildcard === b.wildcard && a.path === b.path &&
  sameCondition(a.condition, b.condition)
const sameCondition = (a, b) => a === b ||
  (a !== null && b !== null && a.kind === b.kind && a.name === b.name && a.value === b.value)

module.exports = { buildRoutes, buildCanary, ROUTE_OPTIONS }
