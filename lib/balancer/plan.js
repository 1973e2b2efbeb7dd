'use strict'

// What a reload changes, decided before anything is touched: a pure function of the
// config in force, the new one and what is running. balancer.js binds what the plan
// starts, then applies it (docs/design.md, "A reload is the DNS machinery again").

const { describeChanges, sameAddress } = require('../config/changes')
const { matchText } = require('./words')

// current, next: configs (config/builder.js). running: what runs now, which is not
// always `current` (a listener a reload could not start is in the config, not running):
//   { listeners: [{ config, routes: [{ name, match, mode }] }] }
// (What the certificate keeper does is provisions.js's reloadKeeper.)
// -> {
//   settings: [line]         process-wide and listener options, in words (config/changes.js)
//   keep:   [{ index, config, routes }]    listeners that stay and take the new config
//                            (routes: planRoutes)
//   start:  [{ index, config, replaces, afterRetire }]   new listeners (replaces: one of
//                            the same name stops; afterRetire: bound only once the old
//                            one on its port stopped accepting, so not before applying)
//   retire: [{ name, replaced }]   listeners that stop accepting and drain
//   order:  [name]           the running listeners' order once applied (the new config's)
// } (`index`: the listener's place in next.listeners)
function planReload (current, next, running) {
  const byName = new Map(running.listeners.map(listener => [listener.config.name, listener]))
  const keep = []
  const start = []
  const stays = new Set()
  next.listeners.forEach((config, index) => {
    const old = byName.get(config.name)
    if (old !== undefined && sameAddress(old.config, config)) {
      stays.add(old)
      keep.push({ index, config, routes: planRoutes(old.routes, config.routes) })
    } else {
      start.push({ index, config, replaces: old !== undefined, afterRetire: false })
    }
  })
  const leaving = running.listeners.filter(listener => !stays.has(listener)).map(listener => listener.config)
  for (const entry of start) entry.afterRetire = leaving.some(old => samePlace(old, entry.config))
  const named = new Set(next.listeners.map(config => config.name))
  return {
    settings: describeChanges(current, next),
    keep,
    start,
    retire: leaving.map(old => ({ name: old.name, replaced: named.has(old.name) })),
    order: next.listeners.map(config => config.name)
  }
}

// A kept listener's routes: running [{ name, match, mode }], next the configs
// (builder.js routes). -> { next: [{ config, kept, said }], removed: [name] }, in the new
// config's order: `kept` ones take their new settings (said: what changed besides
// backends, which their upstream says), the others start; removed ones stop.
function planRoutes (running, routes) {
  const old = new Map(running.map(route => [route.name, route]))
  const planned = routes.map(config => {
    const kept = old.get(config.name)
    if (kept === undefined) return { config, kept: false, said: [] }
    old.delete(config.name)
    const said = []
    const [before, after] = [matchText(kept.match), matchText(config.match)]
    if (before !== after) said.push(`match ${before} -> ${after}`)
    if (kept.mode !== config.pool.mode) said.push(`mode ${kept.mode} -> ${config.pool.mode}`)
    return { config, kept: true, said }
  })
  return { next: planned, removed: [...old.keys()] }
}

// Can a listener bind only once `old` stopped accepting? The same Unix socket, or the
// same port (0 is any free one).
function samePlace (old, config) {
  return old.port === null ? old.host === config.host : old.port !== 0 && old.port === config.port
}

// The --redirect-http listeners once a reload applied: running [{ name, host, port }],
// listeners the running ones' configs. -> { follow: [name] (kept: they redirect to
// their listener's port), stop: [{ name, off }] (off: the listener no longer wants one),
// start: [name] }
function planRedirects (running, listeners) {
  const byName = new Map(listeners.map(config => [config.name, config]))
  const follow = []
  const stop = []
  for (const redirect of running) {
    const config = byName.get(redirect.name)
    if (config !== undefined && config.redirectHttp === redirect.port && config.host === redirect.host) {
      follow.push(redirect.name)
    } else {
      stop.push({ name: redirect.name, off: config === undefined || config.redirectHttp === null })
    }
  }
  const kept = new Set(follow)
  const start = listeners.filter(config => config.redirectHttp !== null && !kept.has(config.name)).map(c => c.name)
  return { follow, stop, start }
}

module.exports = { planReload, planRedirects }
