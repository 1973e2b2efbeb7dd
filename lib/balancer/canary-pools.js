'use strict'

const { plural } = require('./words')

// The canary pools of a listener (--canary: its own, and its routes'), each an
// Upstream of its own as a route's pool is: made at the start, and on a reload kept
// (their settings and backends updated), made or closed as the config says.
//
//   canaryPools(config, running, make, tls) -> { upstreams, started, lines }
//     config    the listener's (config.canary, config.routes[i].canary: buildCanary's)
//     running   Map pool name (null: the listener's own) -> Upstream, those that run
//     make(pool, name)  a new Upstream for a canary pool's settings
//     -> upstreams: Map pool name -> Upstream, as the listener's Canaries take them;
//        started: the new ones (to start); lines: what changed, for a reload's log
function canaryPools (config, running, make, tls) {
  const upstreams = new Map()
  const started = []
  const lines = []
  const wanted = [[null, config.canary], ...config.routes.map(route => [route.name, route.canary])]
  for (const [name, canary] of wanted) {
    if (canary === null) continue
    const where = name === null ? 'canary' : `route ${name} canary`
    const old = running.get(name)
    if (old === undefined) {
      const upstream = make(canary.pool, name)
      upstreams.set(name, upstream)
      started.push(upstream)
      lines.push(`${where} added (${plural(canary.backends.length, 'backend')}, ${canary.share}%)`)
      continue
    }
    upstreams.set(name, old)
    for (const change of old.update(canary.pool, { tls })) lines.push(`${where}: ${change}`)
  }
  for (const [name, upstream] of running) {
    if (upstreams.has(name)) continue
    upstream.close()
    lines.push(`${name === null ? 'canary' : `route ${name} canary`} removed`)
  }
  return { upstreams, started, lines }
}

module.exports = { canaryPools }
