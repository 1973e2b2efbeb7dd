'use strict'

// What the dashboard's lines say (pure): the backends table's columns for a width
// (figures dropped when a reason would not fit), a backend's reason, and a listener's
// line (its counts, limits, refusals, stickiness, port ranges) and its mirror's.

const { describeFault, describeMirror } = require('../format')
const { pad, lpad, truncate, wrap } = require('./screen-text')
const { maintenanceNotes } = require('./status-edge')

const COLOURS = {
  up: '\x1b[32m',
  down: '\x1b[31m',
  pending: '\x1b[90m',
  draining: '\x1b[33m',
  drained: '\x1b[33m',
  disabled: '\x1b[90m'
}
// The figures after STATUS; when the terminal is too narrow for them and a readable
// reason, they go in DROP_ORDER (what a decision needs least first).
const FIGURES = [
  { name: 'WT', width: 4, cell: b => String(b.weight) },
  { name: 'LIVE', width: 5, cell: b => String(b.live) },
  { name: 'REQ/S', width: 7, cell: (b, rate) => rate === undefined ? '-' : rate.toFixed(1) },
  { name: 'TOTAL', width: 8, cell: b => String(b.total) },
  { name: 'FAIL', width: 6, cell: b => String(b.failures) },
  { name: 'P99', width: 8, cell: b => b.responseTime.p99 === null ? '-' : formatMs(b.responseTime.p99) }
]
const DROP_ORDER = ['TOTAL', 'FAIL', 'P99', 'WT', 'REQ/S', 'LIVE']
const REASON_ROOM = 20 // columns of reason kept in a row before figures are dropped

// " · limited 12 (rate-limit 10, max-conn-per-client 2)": clients turned away by
// --rate-limit and --max-conn-per-client, once there are any.
// A listener's line, and its mirror's, wrapped to `width`; with `several` listeners
// it says which one a panic is about.
function listenerLines (listener, several, width) {
  const counts = `active ${listener.active} · queued ${listener.queued} · unserved ${listener.unserved}`
  const panic = listener.panic && several ? ' · PANIC' : ''
  const ranges = (listener.ranges || []).map(r => ` · ${r.range}: ${r.live} live, ${r.idle} idle`).join('')
  const maintenance = maintenanceNotes(listener).map(([where, words]) => ` · ${where}: ${words}`).join('')
  const line = `${listener.name} ${listener.protocol} ${listener.mode} · ` +
    `${counts}${limited(listener)}${refused(listener)}${sticky(listener)}${ranges}${panic}${maintenance}`
  const more = [appLine(listener), mirrorLine(listener)].filter(text => text !== null)
  return [...wrap(line, width), ...more.flatMap(text => wrap(text, width))]
}

// lila run: "app node server.js · ready 3 · restarts signal 3 · app.1 pid 4242 :12001
// gen 2 ready, ...": the app's instances under its listener's line, or null.
function appLine ({ app }) {
  if (!app) return null
  const states = {}
  for (const i of app.list) states[i.state] = (states[i.state] || 0) + 1
  const counts = Object.entries(states).map(([state, n]) => `${state} ${n}`).join(', ')
  const restarts = Object.entries(app.restarts).map(([reason, n]) => `${reason} ${n}`).join(', ') || 'none'
  const each = app.list.map(i => `app.${i.number} pid ${i.pid ?? '-'} :${i.port} gen ${i.generation} ${i.state}`)
  return `app ${app.command}${app.rolling ? ' · rolling' : ''} · ${counts} · restarts ${restarts} · ${each.join(', ')}`
}

function limited (listener) {
  const counts = Object.entries(listener.limited || {}).filter(([, n]) => n > 0)
  if (counts.length === 0) return ''
  const total = counts.reduce((sum, [, n]) => sum + n, 0)
  return ` · limited ${total} (${counts.map(([limit, n]) => `${limit} ${n}`).join(', ')})`
}

// " · refused 5 (deny 3, wrong-credentials 2)": clients or requests the rules at the
// edge said no to, once there are any.
function refused (listener) {
  const counts = Object.entries(listener.refused || {}).filter(([, n]) => n > 0)
  if (counts.length === 0) return ''
  const total = counts.reduce((sum, [, n]) => sum + n, 0)
  return ` · refused ${total} (${counts.map(([reason, n]) => `${reason} ${n}`).join(', ')})`
}

// " · sticky cookie=lila: honoured 90, reassigned 2, new 8" with --sticky.
function sticky (listener) {
  if (!listener.sticky) return ''
  const { honoured, reassigned, new: fresh } = listener.stickyResponses
  return ` · sticky ${listener.sticky}: honoured ${honoured}, reassigned ${reassigned}, new ${fresh}`
}

// "mirror 127.0.0.1:9000 (10%) · sent 120 · dropped 0 · too large 1 · failed 0 · compare
// 118 same, 2 status, 0 body": --mirror's line under its listener's, or null.
function mirrorLine ({ mirror }) {
  if (!mirror) return null
  const r = mirror.requests
  const c = mirror.compare
  const compared = c ? ` · compare ${c.same} same, ${c.status} status, ${c.body} body` : ''
  return `mirror ${describeMirror(mirror)} · sent ${r.sent} · dropped ${r.dropped} · ` +
    `too large ${r['too-large']} · failed ${r.failed}${compared}`
}

// The table's columns for this width: every figure when a reason can be read beside
// them, else fewer. -> { header, row(backend, rate, selected, paint) }
function columns (rows, width) {
  const nameWidth = Math.max(7, ...rows.map(r => r.backend.address.length))
  let figures = FIGURES
  const fixed = () => 2 + nameWidth + 1 + 9 + figures.reduce((sum, f) => sum + 1 + f.width, 0)
  // By the width alone, so that the columns do not jump when a first reason appears.
  for (const name of DROP_ORDER) {
    if (fixed() + 2 + REASON_ROOM <= width) break
    figures = figures.filter(f => f.name !== name)
  }
  const header = '  ' + pad('BACKEND', nameWidth) + ' ' + pad('STATUS', 9) +
    figures.map(f => ' ' + lpad(f.name, f.width)).join('') + '  WHY'
  function row (backend, rate, isSelected, paint, now) {
    const before = (isSelected ? '> ' : '  ') + pad(backend.address, nameWidth) + ' '
    const status = pad(backend.status, 9)
    const after = figures.map(f => ' ' + lpad(f.cell(backend, rate), f.width)).join('')
    const left = width - before.length - status.length - after.length - 2
    // Too narrow for the figures: the row is cut, plain (the detail line has it all).
    if (left < 0) return truncate(before + status + after, width)
    const reason = whyOf(backend, now)
    const why = reason && left >= 4 ? '  ' + truncate(reason, left) : ''
    return before + paint(COLOURS[backend.status] || '', status) + after + why
  }
  return { header, row }
}

// A backend's reason, after its fault when one is injected ("fault error 503 (25s left)").
function whyOf (backend, now) {
  if (!backend.fault) return backend.reason
  const fault = `fault ${describeFault(backend.fault, now)}`
  return backend.reason ? `${fault}; ${backend.reason}` : fault
}

function formatMs (ms) {
  if (ms < 10) return `${(Math.round(ms * 100) / 100).toFixed(2)}ms`
  if (ms < 1000) return `${Math.round(ms)}ms`
  return `${(ms / 1000).toFixed(1)}s`
}

module.exports = { columns, whyOf, listenerLines }
