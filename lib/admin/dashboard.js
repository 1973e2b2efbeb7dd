'use strict'

// The live terminal view (--dashboard), its pure half: a stats snapshot and a view
// state in, lines of text out; a key in, a new view state and maybe an action out. No
// terminal, no timer, no I/O here (terminal.js drives it), so all of it is tested
// with plain objects.

const { describeFault, describeMirror } = require('../format')

const KEYS = {
  '\x1b[A': 'up',
  '\x1bOA': 'up',
  k: 'up',
  '\x1b[B': 'down',
  '\x1bOB': 'down',
  j: 'down',
  '\x1b[5~': 'pageup',
  '\x1b[6~': 'pagedown',
  '\x1b[H': 'home',
  '\x1bOH': 'home',
  '\x1b[1~': 'home',
  g: 'home',
  '\x1b[F': 'end',
  '\x1bOF': 'end',
  '\x1b[4~': 'end',
  G: 'end',
  d: 'drain',
  e: 'enable',
  x: 'disable',
  f: 'fault',
  '+': 'more',
  '=': 'more',
  '-': 'less',
  _: 'less',
  '?': 'help',
  q: 'quit',
  '\x03': 'interrupt' // Ctrl-C: raw mode delivers it as a byte, not as SIGINT
}

// The key line at the bottom; `?` first, so that a narrow terminal still shows where
// the rest is.
const HELP = '? keys  ↑↓ select  d drain  e enable  x disable  +/- weight  f fault  q quit'

// What `f` puts on the selected backend, one after the other, then none: each for 30s
// (docs/faults.md). A fault set otherwise (the admin API, --fault) is cleared by `f`.
const FAULT_CYCLE = [
  { delay: 0, status: 503, reset: false, rate: 1, duration: 30000 },
  { delay: 2000, status: 0, reset: false, rate: 1, duration: 30000 },
  { delay: 0, status: 0, reset: true, rate: 1, duration: 30000 }
]

// The `?` screen: [keys, what they do].
const KEY_HELP = [
  ['↑ ↓  k j', 'select the backend above, below'],
  ['PgUp PgDn', 'a page up, down'],
  ['Home End  g G', 'the first, the last backend'],
  ['d', 'drain: no new connections; open ones finish'],
  ['e', 'enable: take traffic again (a disabled backend is checked first)'],
  ['x', 'disable: no traffic and no checks, for maintenance'],
  ['+ -', 'weight up, down by one (0 to 1000)'],
  ['f', 'fault, in turn: error 503, delay 2s, reset (each for 30s), none'],
  ['?', 'this help'],
  ['q  Ctrl-C', 'stop lila gracefully, as SIGINT does']
]
const HELP_NOTES = [
  'The selected backend is marked > and its full reason is shown under the table. ' +
    'Log lines said meanwhile are shown below it, and written out when the view closes.',
  'Colours are off with NO_COLOR set or on a terminal without them (TERM=dumb).'
]

const COLOURS = {
  up: '\x1b[32m',
  down: '\x1b[31m',
  pending: '\x1b[90m',
  draining: '\x1b[33m',
  drained: '\x1b[33m',
  disabled: '\x1b[90m'
}
const DIM = '\x1b[90m'
const ALARM = '\x1b[1;31m'
const FG_DEFAULT = '\x1b[39m'
const INVERSE = '\x1b[7m'
const RESET = '\x1b[0m'
const BOLD = '\x1b[1m'

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
const LOG_MIN = 3 // log lines kept when the table wants every row
const BODY_MIN = 5 // table lines kept before the log gets any
const DETAIL_MAX = 3 // lines for the selected backend's reason
const MESSAGE_MAX = 2

// selected: the backend's index in backendRows(); top: the first table line shown;
// page: backend rows shown (for PgUp/PgDn); help: the `?` screen is up.
function createView () {
  return { selected: 0, top: 0, page: 0, help: false, message: '' }
}

// " · limited 12 (rate-limit 10, max-conn-per-client 2)": clients turned away by
// --rate-limit and --max-conn-per-client, once there are any.
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

// Every backend of every listener, in the order shown: [{ listener, route, backend }],
// route null for a listener's own backends, else the route (--route) they serve.
function backendRows (snapshot) {
  const rows = []
  for (const listener of snapshot.listeners) {
    for (const backend of listener.backends) rows.push({ listener, route: null, backend })
    for (const route of listener.routes || []) {
      for (const backend of route.backends) rows.push({ listener, route, backend })
    }
  }
  return rows
}

const rowKey = ({ listener, route, backend }) =>
  route === null ? `${listener.name} ${backend.address}` : `${listener.name} ${route.name} ${backend.address}`

// Totals per backend, to turn two snapshots into rates.
function totals (snapshot) {
  const out = new Map()
  for (const row of backendRows(snapshot)) out.set(rowKey(row), row.backend.total)
  return out
}

// Requests (or connections) per second per backend between two totals() taken
// `elapsedMs` apart; a backend new since the first has no rate yet.
function rates (before, after, elapsedMs) {
  const out = new Map()
  if (before === null || elapsedMs <= 0) return out
  for (const [key, total] of after) {
    if (before.has(key)) out.set(key, Math.max(0, total - before.get(key)) * 1000 / elapsedMs)
  }
  return out
}

// A byte sequence from the terminal -> key names (a paste or fast typing can bring
// several in one chunk). A key lila has no use for is 'other': it still closes help.
function parseKeys (text) {
  const keys = []
  let i = 0
  while (i < text.length) {
    if (text[i] === '\x1b') {
      // an escape sequence (an arrow, a function key) is one key, known or not
      // eslint-disable-next-line no-control-regex -- ESC starts the sequence
      const sequence = /^\x1b(\[[0-9;]*[A-Za-z~]|O[A-Za-z])?/.exec(text.slice(i))[0]
      keys.push(KEYS[sequence] || 'other')
      i += sequence.length
      continue
    }
    keys.push(Object.hasOwn(KEYS, text[i]) ? KEYS[text[i]] : 'other')
    i++
  }
  return keys
}

const MOVES = { up: -1, down: 1, home: -Infinity, end: Infinity }

// A key on the current view -> { view, action }. action is null, { op: 'quit' } or
// { op, listener, backend[, value | fault] } for control.js (op: drain, enable, disable,
// weight, fault, clearFault).
function handleKey (view, key, snapshot) {
  if (key === 'interrupt') return { view, action: { op: 'quit' } }
  // Any key closes help, and does nothing else: a key pressed to leave it must not drain.
  if (view.help) return { view: { ...view, help: false }, action: null }
  if (key === 'help') return { view: { ...view, help: true }, action: null }
  if (key === 'quit') return { view, action: { op: 'quit' } }
  const rows = backendRows(snapshot)
  const selected = clamp(view.selected, rows.length)
  const page = Math.max(1, (view.page || 10) - 1) // a page keeps one row in sight
  const move = key === 'pageup' ? -page : key === 'pagedown' ? page : MOVES[key]
  if (move !== undefined) return { view: { ...view, selected: clamp(selected + move, rows.length) }, action: null }
  if (rows.length === 0) return { view, action: null }
  const { listener, route, backend } = rows[selected]
  const target = { listener: listener.name, backend: backend.address, ...(route === null ? {} : { route: route.name }) }
  if (key === 'drain' || key === 'enable' || key === 'disable') {
    return { view: { ...view, selected }, action: { op: key, ...target } }
  }
  if (key === 'more' || key === 'less') {
    const value = Math.min(1000, Math.max(0, backend.weight + (key === 'more' ? 1 : -1)))
    if (value === backend.weight) {
      return { view: { ...view, selected, message: `weight stays ${value} (0 to 1000)` }, action: null }
    }
    return { view: { ...view, selected }, action: { op: 'weight', ...target, value } }
  }
  if (key === 'fault') {
    const fault = nextFault(backend.fault)
    const action = fault === null ? { op: 'clearFault', ...target } : { op: 'fault', ...target, fault }
    return { view: { ...view, selected }, action }
  }
  return { view, action: null }
}

// The fault after `current` (a snapshot's, or null) in FAULT_CYCLE; null: none.
function nextFault (current) {
  if (current === null || current === undefined) return FAULT_CYCLE[0]
  const i = FAULT_CYCLE.findIndex(f => f.status === current.errorStatus && f.delay === current.delayMs &&
    f.reset === current.reset && f.rate === current.rate)
  return i === -1 ? null : FAULT_CYCLE[i + 1] || null
}

const clamp = (i, n) => n === 0 ? 0 : Math.min(Math.max(i, 0), n - 1)

// The screen: exactly `height` lines of at most `width` visible characters (ANSI
// colours aside). options: { width, height, rates (Map from rates()), version, now,
// log (recent log lines), colour }
function render (snapshot, view, options) {
  return frame(snapshot, view, options).lines
}

// render(), with what the terminal keeps for the next key and frame: `top`, the first
// table line shown (the table scrolls only when the selection would leave it), and
// `page`, the backend rows shown.
function frame (snapshot, view, {
  width = 100, height = 30, rates: perSecond = new Map(), version = '', now = Date.now(), log = [], colour = true
} = {}) {
  width = Math.max(1, width)
  height = Math.max(1, height)
  const paint = (code, text, end = FG_DEFAULT) => colour ? `${code}${text}${end}` : text
  if (view.help) return { lines: helpScreen(width, height, paint), top: view.top || 0, page: view.page || 0 }

  const rows = backendRows(snapshot)
  const selected = clamp(view.selected, rows.length)
  const up = rows.filter(r => r.backend.status === 'up').length
  const clock = new Date(now).toISOString().slice(11, 19)
  const count = snapshot.listeners.length
  const title = paint(BOLD, version ? `lila ${version}` : 'lila', RESET) +
    ` · ${count} listener${count === 1 ? '' : 's'} · ${up}/${rows.length} backends up`
  const head = [fit(title, width, clock, colour)]
  // Panic is said in full above the table, where scrolling cannot hide it.
  for (const listener of snapshot.listeners) {
    if (!listener.panic) continue
    const notice = `PANIC on ${listener.name}: every backend is down; traffic goes to them anyway`
    for (const line of wrap(notice, width)) head.push(paint(ALARM, line, RESET))
  }
  const table = columns(rows, width)
  // One listener's line stays above the table; several scroll with their backends, and
  // their lines say which one the panic notice is about.
  const about = listener => {
    const counts = `active ${listener.active} · queued ${listener.queued} · unserved ${listener.unserved}`
    const panic = listener.panic && count > 1 ? ' · PANIC' : ''
    const ranges = (listener.ranges || []).map(r => ` · ${r.range}: ${r.live} live, ${r.idle} idle`).join('')
    const line = `${listener.name} ${listener.protocol} ${listener.mode} · ` +
      `${counts}${limited(listener)}${refused(listener)}${sticky(listener)}${ranges}${panic}`
    const mirror = mirrorLine(listener)
    return mirror === null ? wrap(line, width) : [...wrap(line, width), ...wrap(mirror, width)]
  }
  if (count === 1) head.push(...about(snapshot.listeners[0]))
  head.push(paint(DIM, truncate(table.header, width)))

  // The table's lines; `row` is the backend's index for a backend line.
  const body = []
  let index = 0
  let lastListener = null
  let lastRoute = null
  for (const row of rows) {
    const { listener, route, backend } = row
    if (count > 1 && lastListener !== listener) for (const text of about(listener)) body.push({ text })
    if (route !== null && lastRoute !== route) {
      const panic = route.panic ? ' · PANIC' : ''
      const line = `route ${route.name} ${route.mode} · queued ${route.queued}${panic}`
      for (const text of wrap(line, width)) body.push({ text })
    }
    lastListener = listener
    lastRoute = route
    const line = table.row(backend, perSecond.get(rowKey(row)), index === selected, paint, now)
    body.push({ text: index === selected && colour ? INVERSE + line + RESET : line, row: index })
    index++
  }

  // The selected backend in full: the row may have cut its reason.
  const detail = []
  if (rows.length > 0) {
    const { listener, route, backend } = rows[selected]
    const where = (count > 1 ? `${listener.name} › ` : '') + (route === null ? '' : `route ${route.name} › `)
    const reason = whyOf(backend, now)
    const text = `${where}${backend.address} ${backend.status}${reason ? `: ${reason}` : ''}`
    detail.push(...cap(wrap(text, width), DETAIL_MAX, width))
  }
  const foot = [...(view.message ? cap(wrap(view.message, width), MESSAGE_MAX, width) : []), truncate(HELP, width)]
  // A terminal too short for all of it keeps the table's lines and the key line first.
  while (height - head.length - detail.length - foot.length < 1 && detail.length > 0) detail.pop()
  while (height - head.length - foot.length < 1 && foot.length > 1) foot.shift()
  while (height - head.length - foot.length < 1 && head.length > 1) head.splice(1, 1)
  const room = Math.max(0, height - head.length - detail.length - foot.length)

  // The log takes the rows the table does not need, and a few when it needs them all.
  let logRoom = 0
  if (log.length > 0) {
    logRoom = room - body.length >= 2 ? room - body.length : Math.min(log.length, LOG_MIN) + 1
    logRoom = Math.min(logRoom, Math.max(0, room - Math.min(body.length, BODY_MIN)))
    if (logRoom === 1) logRoom = 0 // a rule with nothing under it
  }
  let bodyRoom = Math.min(body.length, room - logRoom)
  const scrolled = body.length > bodyRoom && bodyRoom >= 2
  if (scrolled) bodyRoom-- // the line saying which rows are shown
  const top = scrollTop(body, selected, view.top || 0, bodyRoom)
  const shown = body.slice(top, top + bodyRoom)

  const lines = [...head, ...shown.map(line => line.text)]
  if (scrolled) {
    const numbers = shown.filter(line => line.row !== undefined).map(line => line.row + 1)
    const range = numbers.length > 0 ? `${numbers[0]}–${numbers[numbers.length - 1]}` : '-'
    const more = (top > 0 ? ' ↑' : '') + (top + bodyRoom < body.length ? ' ↓' : '')
    lines.push(paint(DIM, truncate(`  ${range} of ${rows.length} backends${more}`, width)))
  }
  lines.push(...detail)
  if (logRoom > 0) {
    lines.push(paint(DIM, truncate('── log ' + '─'.repeat(Math.max(0, width - 7)), width)))
    for (const line of log.slice(-(logRoom - 1))) lines.push(truncate(line, width))
  }
  while (lines.length < height - foot.length) lines.push('')
  lines.push(...foot)
  return { lines: lines.slice(0, height), top, page: shown.filter(line => line.row !== undefined).length }
}

// The first table line to show: the one shown before, moved as little as it takes to
// keep the selected row in sight (with its listener's line when it is the first row).
function scrollTop (body, selected, before, room) {
  if (room <= 0) return 0
  const at = body.findIndex(line => line.row === selected)
  let top = Math.min(before, body.length - room)
  if (at === -1) return Math.max(0, top)
  const lowest = at - room + 1
  const highest = at > 0 && body[at - 1].row === undefined && room >= 2 ? at - 1 : at
  top = Math.min(Math.max(top, lowest), highest)
  return Math.max(0, top)
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

function helpScreen (width, height, paint) {
  const lines = [paint(BOLD, 'lila --dashboard: keys', RESET), '']
  for (const [keys, what] of KEY_HELP) lines.push(...wrap(pad(keys, 15) + what, width, ' '.repeat(15)))
  for (const note of HELP_NOTES) lines.push('', ...wrap(note, width))
  const last = paint(BOLD, truncate('Any key closes this help.', width), RESET)
  // The way out stays on screen when the rest does not fit.
  const shown = lines.slice(0, Math.max(0, height - 2))
  while (shown.length < height - 1) shown.push('')
  return [...shown, last].slice(-height)
}

// `text` in lines of at most `width`, broken at spaces (a word too long is cut up);
// lines after the first are indented by `indent`.
function wrap (text, width, indent = '  ') {
  if (indent.length >= width / 2) indent = ''
  const lines = []
  let line = ''
  for (const word of text.split(' ')) {
    const start = lines.length === 0 ? '' : indent
    const candidate = line === '' ? start + word : `${line} ${word}`
    if (candidate.length <= width) {
      line = candidate
      continue
    }
    if (line !== '') lines.push(line)
    line = (lines.length === 0 ? '' : indent) + word
    while (line.length > width) {
      lines.push(line.slice(0, width))
      line = indent + line.slice(width)
    }
  }
  lines.push(line)
  return lines
}

// At most `max` lines; the last one shown says, with "…", that there was more.
function cap (lines, max, width) {
  if (lines.length <= max) return lines
  const kept = lines.slice(0, max)
  const last = kept[max - 1]
  kept[max - 1] = last.length < width ? last + '…' : last.slice(0, width - 1) + '…'
  return kept
}

// `left` and `right` on one line of `width`, right-aligned when there is room.
function fit (left, width, right, colour) {
  const visible = stripAnsi(left).length
  const gap = width - visible - right.length
  return gap >= 1 ? left + ' '.repeat(gap) + right : truncate(colour ? left : stripAnsi(left), width)
}

function stripAnsi (text) {
  // eslint-disable-next-line no-control-regex -- ESC starts the colour codes to strip
  return text.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')
}

function truncate (text, width) {
  if (stripAnsi(text).length <= width) return text
  const plain = stripAnsi(text)
  return width <= 1 ? plain.slice(0, width) : plain.slice(0, width - 1) + '…'
}

const pad = (text, n) => text.length >= n ? text : text + ' '.repeat(n - text.length)
const lpad = (text, n) => text.length >= n ? text : ' '.repeat(n - text.length) + text

function formatMs (ms) {
  if (ms < 10) return `${(Math.round(ms * 100) / 100).toFixed(2)}ms`
  if (ms < 1000) return `${Math.round(ms)}ms`
  return `${(ms / 1000).toFixed(1)}s`
}

module.exports = {
  createView, backendRows, totals, rates, parseKeys, handleKey, render, frame, stripAnsi, wrap, HELP, FAULT_CYCLE
}
