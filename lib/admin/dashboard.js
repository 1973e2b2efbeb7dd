'use strict'

// The live terminal view (--dashboard), its pure half: a stats snapshot and a view
// state in, lines of text out. No terminal, no timer, no I/O here (terminal.js drives
// it), so all of it is tested with plain objects. What it is made of, each pure too:
// dashboard-rows.js (the backends shown, rates), dashboard-table.js (what the lines
// say), dashboard-keys.js (keys -> actions, the view state), screen-text.js (text cut
// to a terminal's width).

const { backendRows, rowKey, clamp } = require('./dashboard-rows')
const { columns, whyOf, listenerLines } = require('./dashboard-table')
const { HELP, KEY_HELP, HELP_NOTES } = require('./dashboard-keys')
const { wrap, cap, fit, truncate, pad, DIM, ALARM, FG_DEFAULT, INVERSE, RESET, BOLD } = require('./screen-text')

const LOG_MIN = 3 // log lines kept when the table wants every row
const BODY_MIN = 5 // table lines kept before the log gets any
const DETAIL_MAX = 3 // lines for the selected backend's reason
const MESSAGE_MAX = 2

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
  const about = listener => listenerLines(listener, count > 1, width)
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

module.exports = { render, frame }
