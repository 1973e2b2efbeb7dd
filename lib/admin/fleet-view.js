'use strict'

// --fleet as the status page and /metrics show it (pure: the snapshot's `fleet`,
// fleet/fleet.js, in; HTML or samples out). Its Redis appears as its URL without the
// password (config/fleet-url.js display): no password reaches a page or a metric.

// [name, type, help, value(fleet)]
const FAMILIES = [
  ['lila_fleet_up', 'gauge',
    '--fleet: 1 while this lila shares with the fleet through Redis, 0 while it goes on alone.',
    f => f.up ? 1 : 0],
  ['lila_fleet_members', 'gauge', '--fleet: the lilas of the fleet announced in Redis now, this one included.',
    f => f.members.length],
  ['lila_fleet_redis_round_trips_total', 'counter', '--fleet: commands Redis answered.', f => f.roundTrips],
  ['lila_fleet_redis_round_trip_seconds_total', 'counter',
    '--fleet: the time those answers took, summed (divide by the round trips for the mean).',
    f => f.roundTripMs / 1000],
  ['lila_fleet_redis_errors_total', 'counter',
    '--fleet: commands Redis refused, and connections to it that failed.', f => f.errors]
]

// [name, help, counts(fleet), label]
const BY_CAUSE = [
  ['lila_fleet_limit_decisions_total',
    '--fleet: --rate-limit and --max-conn-per-client decisions by who made them (fleet: Redis in time; ' +
    'lila: this lila alone, Redis down or later than the budget).',
    f => ({ fleet: f.limits.decided, lila: f.limits.late }), 'by'],
  ['lila_fleet_changes_total',
    '--fleet: run-time changes shared with the fleet, heard from it, and not shared (Redis refused them).',
    f => f.changes, 'way']
]

// The families, written with metrics.js's helpers.
function fleetMetrics (fleet, { family, sample, byCause }) {
  if (!fleet) return
  for (const [name, type, help, value] of FAMILIES) {
    family(name, type, help)
    sample(name, { fleet: fleet.name }, value(fleet))
  }
  for (const [name, help, counts, label] of BY_CAUSE) {
    family(name, 'counter', help)
    byCause(name, { fleet: fleet.name }, counts(fleet), label)
  }
}

// The page's section: Redis, and each member.
function fleetSection (fleet, esc) {
  if (!fleet) return ''
  const state = fleet.up ? 'shared' : '<b>Redis unavailable: this lila goes on alone</b>'
  const sentinel = fleet.redis.startsWith('redis-sentinel:') && fleet.master
  const master = sentinel ? ` (master ${esc(fleet.master)})` : ''
  const self = m => m.self ? ' <small>(this lila)</small>' : ''
  const rows = fleet.members.map(m => `<tr><td class="st">${esc(m.host)}${self(m)}</td>` +
    `<td>${m.pid}</td><td class="st">${esc(m.version)}</td><td class="st">${esc(m.listeners.join(', '))}</td>` +
    `<td>${m.requestsPerSecond}</td><td>${Math.round(m.lastSeenMs / 100) / 10} s ago</td></tr>`)
  const count = `${fleet.members.length} member${fleet.members.length === 1 ? '' : 's'}`
  return `<h2>Fleet ${esc(fleet.name)} <small>${count}</small></h2>
<p class="meta">Redis ${esc(fleet.redis)}${master}: ${state}</p>
<table><tr><th class="st">host</th><th>pid</th><th class="st">version</th><th class="st">listeners</th>` +
    `<th>requests/s</th><th>last seen</th></tr>
${rows.join('\n')}
</table>`
}

module.exports = { fleetMetrics, fleetSection }
