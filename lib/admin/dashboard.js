'use strict'

// The live terminal view (--dashboard), its pure half: a stats snapshot and a view
// state in, lines of text out; a key in, a new view state and maybe an action out. No
// terminal, no timer, no I/O here (terminal.js drives it), so all of it is tested
// with plain objects.

const KEYS = {
  '\x1b[A': 'up',
  '\x1bOA': 'up',
  k: 'up',
  '\x1b[B': 'down',
  '\x1bOB': 'down',
  j: 'down',
  d: 'drain',
  e: 'enable',
  x: 'disable',
  '+': 'more',
  '=': 'more',
  '-': 'less',
  _: 'less',
  q: 'quit',
  '\x03': 'quit' // Ctrl-C: raw mode delivers it as a byte, not as SIGINT
}

const HELP = '↑↓ select  d drain  e enable  x disable  +/- weight  q quit'

const COLOURS = {
  up: '\x1b[32m',
  down: '\x1b[31m',
  pending: '\x1b[90m',
  draining: '\x1b[33m',
  drained: '\x1b[33m',
  disabled: '\x1b[90m'
}
const FG_DEFAULT = '\x1b[39m'
const INVERSE = '\x1b[7m'
const RESET = '\x1b[0m'
const BOLD = '\x1b[1m'

function createView () {
  return { selected: 0, message: '' }
}

// Every backend of every listener, in the order shown: [{ listener, backend }].
function backendRows (snapshot) {
  const rows = []
  for (const listener of snapshot.listeners) for (const backend of listener.backends) rows.push({ listener, backend })
  return rows
}

const rowKey = (listener, backend) => `${listener.name} ${backend.address}`

// Totals per backend, to turn two snapshots into rates.
function totals (snapshot) {
  const out = new Map()
  for (const { listener, backend } of backendRows(snapshot)) out.set(rowKey(listener, backend), backend.total)
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
// several in one chunk). Unknown bytes are skipped.
function parseKeys (text) {
  const keys = []
  let i = 0
  while (i < text.length) {
    const three = text.slice(i, i + 3)
    if (KEYS[three] !== undefined) {
      keys.push(KEYS[three])
      i += 3
      continue
    }
    if (text[i] === '\x1b') {
      // another escape sequence (another arrow, a function key): skip it whole
      // eslint-disable-next-line no-control-regex -- ESC starts the sequence to skip
      const match = /^\x1b(\[[0-9;]*[A-Za-z~]|O[A-Za-z])?/.exec(text.slice(i))
      i += match[0].length
      continue
    }
    if (KEYS[text[i]] !== undefined) keys.push(KEYS[text[i]])
    i++
  }
  return keys
}

// A key on the current view -> { view, action }. action is null, { op: 'quit' } or
// { op, listener, backend[, value] } for control.js (op: drain, enable, disable,
// weight).
function handleKey (view, key, snapshot) {
  const rows = backendRows(snapshot)
  const selected = clamp(view.selected, rows.length)
  if (key === 'quit') return { view, action: { op: 'quit' } }
  if (key === 'up' || key === 'down') {
    return { view: { ...view, selected: clamp(selected + (key === 'up' ? -1 : 1), rows.length) }, action: null }
  }
  if (rows.length === 0) return { view, action: null }
  const { listener, backend } = rows[selected]
  const target = { listener: listener.name, backend: backend.address }
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
  return { view, action: null }
}

const clamp = (i, n) => n === 0 ? 0 : Math.min(Math.max(i, 0), n - 1)

// The screen, as lines of at most `width` visible characters (ANSI colours aside).
// options: { width, height, rates (Map from rates()), version, now, log (recent log
// lines), colour }
function render (snapshot, view, {
  width = 100, height = 30, rates: perSecond = new Map(), version = '', now = Date.now(), log = [], colour = true
} = {}) {
  const paint = (code, text) => colour ? `${code}${text}${code === BOLD ? RESET : FG_DEFAULT}` : text
  const rows = backendRows(snapshot)
  const selected = clamp(view.selected, rows.length)
  const up = rows.filter(r => r.backend.status === 'up').length
  const lines = []
  const clock = new Date(now).toISOString().slice(11, 19)
  const count = snapshot.listeners.length
  const title = paint(BOLD, version ? `lila ${version}` : 'lila') +
    ` · ${count} listener${count === 1 ? '' : 's'} · ${up}/${rows.length} backends up`
  lines.push(fit(title, width, clock, colour))

  const nameWidth = Math.max(7, ...rows.map(r => r.backend.address.length))
  const header = '  ' + [
    pad('BACKEND', nameWidth),
    pad('STATUS', 9),
    lpad('WT', 4),
    lpad('LIVE', 5),
    lpad('REQ/S', 7),
    lpad('TOTAL', 8),
    lpad('FAIL', 6),
    lpad('P99', 8)
  ].join(' ') + '  WHY'
  let index = 0
  const tableRows = []
  for (const listener of snapshot.listeners) {
    const counts = `active ${listener.active} · queued ${listener.queued} · unserved ${listener.unserved}`
    const panic = listener.panic ? ' · PANIC: every backend is down' : ''
    tableRows.push({ text: `${listener.name} ${listener.protocol} ${listener.mode} · ${counts}${panic}` })
    tableRows.push({ text: header, dim: true })
    for (const backend of listener.backends) {
      const rate = perSecond.get(rowKey(listener, backend))
      const cells = [
        pad(backend.address, nameWidth),
        null, // status, painted below
        lpad(String(backend.weight), 4),
        lpad(String(backend.live), 5),
        lpad(rate === undefined ? '-' : rate.toFixed(1), 7),
        lpad(String(backend.total), 8),
        lpad(String(backend.failures), 6),
        lpad(backend.responseTime.p99 === null ? '-' : formatMs(backend.responseTime.p99), 8)
      ]
      const isSelected = index === selected
      const before = (isSelected ? '> ' : '  ') + cells[0] + ' '
      const after = ' ' + cells.slice(2).join(' ')
      const status = pad(backend.status, 9)
      const room = width - before.length - status.length - after.length - 2
      const why = backend.reason ? '  ' + truncate(backend.reason, room) : ''
      // Too narrow for the figures: the row is cut, plain; else the reason is.
      let text = room < 0
        ? truncate(before + status + after, width)
        : before + paint(COLOURS[backend.status] || '', status) + after + why
      if (isSelected && colour) text = INVERSE + text + RESET
      tableRows.push({ text, raw: true })
      index++
    }
  }

  const footer = view.message ? [view.message, HELP] : [HELP]
  // Room left for the log, at most a few lines.
  const room = height - lines.length - tableRows.length - footer.length - 2
  const shown = log.slice(-Math.max(0, Math.min(6, room)))

  for (const row of tableRows) {
    if (row.raw) lines.push(row.text)
    else lines.push(row.dim && colour ? paint('\x1b[90m', truncate(row.text, width)) : truncate(row.text, width))
  }
  lines.push('')
  for (const line of footer) lines.push(truncate(line, width))
  if (shown.length > 0) {
    lines.push(paint('\x1b[90m', truncate('── log ' + '─'.repeat(Math.max(0, width - 7)), width)))
    for (const line of shown) lines.push(truncate(line, width))
  }
  return lines.slice(0, Math.max(1, height))
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

module.exports = { createView, backendRows, totals, rates, parseKeys, handleKey, render, stripAnsi, HELP }
