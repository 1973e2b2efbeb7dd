'use strict'

const { formatPorts } = require('../format')

// What membership (membership.js) says (pure): the start-up table, and the log lines of
// backends joining, leaving and changing.

// The start-up table: a row per backend (and per name that resolved to nothing), and
// per port range a row saying how many of its ports listen, above theirs: its idle
// ports are not backends, and have no row. The app of `lila run` likewise: how many of
// its instances are ready, above theirs, each named (app.2, its pid) by `instanceOf(port)`.
// `checked`: are backends probed (a pending one is then not checked yet, not unchecked).
function startupTable (groups, { checked = true, instanceOf = () => null } = {}) {
  const rows = [['backend', 'state', 'check']]
  for (const group of groups) {
    if (group.range !== null) {
      const { live, idle } = group.range
      const ports = formatPorts(group.range.ports(false))
      const watching = idle === 0 ? 'none idle' : `${idle} idle (${ports}): a port joins when it listens`
      rows.push([group.label, `${live} live`, watching])
    } else if (group.app) {
      rows.push([group.label, `${group.backends.length} ready`, 'an instance joins when it is ready'])
    } else if (group.name !== null && group.backends.length === 0) {
      rows.push([group.label, '-', `cannot resolve: ${group.error || 'no address'}`])
    }
    for (const b of group.backends) {
      const notes = [b.name, group.app ? instanceOf(b.port) : null, b.backup ? 'backup' : null].filter(Boolean)
      const unchecked = checked ? 'not checked yet' : 'not checked (--check none)'
      const why = b.state === 'down' ? b.downReason : (b.lastCheck || unchecked)
      rows.push([b.address + (notes.length ? ` (${notes.join(', ')})` : ''), b.state, why])
    }
  }
  return rows
}

// How a group's backends are named in its lines: an SRV name's by address, a port
// range's and the app's by port, a name's by host.
function shownOf (group) {
  const byPort = group.range !== null || group.app
  return backend => group.srv ? backend.address : byPort ? backend.port : backend.host
}

// What a name that failed to resolve leaves: "keeping 10.0.0.1, 10.0.0.2".
function keeping (hosts) {
  return hosts.length ? `keeping ${hosts.join(', ')}` : 'no backend from it yet'
}

// The line a name's new answer, or a range's scan, is told in (`removed` as shown).
function answeredLine (group, { added, removed, changed, left }) {
  if (group.range !== null) return rangeLine(group, added, removed, left)
  const shown = shownOf(group)
  const hosts = group.backends.map(b => shown(b) + (group.srv && b.backup ? ' (backup)' : ''))
  return answerLine(group.label, hosts, { added, removed, changed, left })
}

// "db:5432 resolves to 10.0.0.1, 10.0.0.2 (added 10.0.0.2; removed 10.0.0.3, 1
// connection left to drain)": what a name's (or an SRV name's) new answer changed.
// `hosts`: what it resolves to now, as shown; `changed`: SRV records' new settings.
function answerLine (label, hosts, { added, removed, changed, left }) {
  const changes = []
  if (added.length) changes.push(`added ${added.join(', ')}`)
  if (removed.length) {
    const draining = left ? `, ${connections(left)} left to drain` : ''
    changes.push(`removed ${removed.join(', ')}${draining}`)
  }
  if (changed.length) changes.push(changed.join(', '))
  return `${label} resolves to ${hosts.join(', ') || 'nothing'} (${changes.join('; ')})`
}

// "range 127.0.0.1:3000-3009: 3001 listens, joining; 3002 stopped listening, leaving,
// 1 connection left to drain (2 live, 8 idle)": what a scan changed.
function rangeLine (group, joined, left, open) {
  const changes = []
  if (joined.length > 0) changes.push(`${joined.join(', ')} ${joined.length === 1 ? 'listens' : 'listen'}, joining`)
  if (left.length > 0) {
    const draining = open ? `, ${connections(open)} left to drain` : ''
    changes.push(`${left.join(', ')} stopped listening, leaving${draining}`)
  }
  const what = changes.length > 0 ? `${changes.join('; ')} ` : ''
  return `range ${group.label}: ${what}(${rangeCounts(group.range)})`
}

// "2 live, 8 idle"
function rangeCounts (range) {
  return `${range.live} live, ${range.idle} idle`
}

// "weight 1 -> 3, backup": what a reload changes in a backend's settings.
function specChanges (before, after) {
  const out = []
  const ms = v => v === 0 ? 'off' : `${v / 1000}s`
  if (before.weight !== after.weight) out.push(`weight ${before.weight} -> ${after.weight}`)
  if (before.maxConn !== after.maxConn) out.push(`max-conn ${before.maxConn ?? 'none'} -> ${after.maxConn ?? 'none'}`)
  if (before.slowStart !== after.slowStart) out.push(`slow-start ${ms(before.slowStart)} -> ${ms(after.slowStart)}`)
  if (before.backup !== after.backup) out.push(after.backup ? 'now a backup' : 'no longer a backup')
  return out
}

function connections (n) {
  return `${n} connection${n === 1 ? '' : 's'}`
}

// "; 2 connections left open", or nothing.
function leftOpen (backend) {
  return backend.live === 0 ? '' : `; ${connections(backend.live)} left open`
}

module.exports = {
  startupTable, shownOf, keeping, answeredLine, answerLine, rangeLine, rangeCounts, specChanges, connections, leftOpen
}
