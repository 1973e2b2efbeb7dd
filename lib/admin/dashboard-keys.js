'use strict'

// The dashboard's keys (pure): bytes from the terminal -> key names, a key on the view
// -> a new view and maybe an action for control.js; and what the keys are said to do
// (the key line, the `?` screen).

const { backendRows, clamp } = require('./dashboard-rows')

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
  m: 'maintenance',
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
const HELP = '? keys  ↑↓ select  d drain  e enable  x disable  +/- weight  f fault  q quit' // m: on the ? screen

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
  ['m', 'maintenance of the backend\'s listener (or route), on and off: 503 and its page for every request'],
  ['?', 'this help'],
  ['q  Ctrl-C', 'stop lila gracefully, as SIGINT does']
]
const HELP_NOTES = [
  'The selected backend is marked > and its full reason is shown under the table. ' +
    'Log lines said meanwhile are shown below it, and written out when the view closes.',
  'Colours are off with NO_COLOR set or on a terminal without them (TERM=dumb).'
]

// selected: the backend's index in backendRows(); top: the first table line shown;
// page: backend rows shown (for PgUp/PgDn); help: the `?` screen is up.
function createView () {
  return { selected: 0, top: 0, page: 0, help: false, message: '' }
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
// weight, fault, clearFault), or { op: maintenance | endMaintenance, listener[, route] }.
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
  if (key === 'maintenance') return { view: { ...view, selected }, action: maintenanceAction(listener, route) }
  if (key === 'fault') {
    const fault = nextFault(backend.fault)
    const action = fault === null ? { op: 'clearFault', ...target } : { op: 'fault', ...target, fault }
    return { view: { ...view, selected }, action }
  }
  return { view, action: null }
}

// `m` on a backend of `listener` (a snapshot's) and `route` (null: the listener's own):
// maintenance of that pool on, or off when it is on.
function maintenanceAction (listener, route) {
  const m = listener.maintenance || { listener: null, routes: {} }
  const on = route === null ? m.listener !== null : m.routes[route.name] !== undefined
  const where = route === null ? { listener: listener.name } : { listener: listener.name, route: route.name }
  return { op: on ? 'endMaintenance' : 'maintenance', ...where }
}

// The fault after `current` (a snapshot's, or null) in FAULT_CYCLE; null: none.
function nextFault (current) {
  if (current === null || current === undefined) return FAULT_CYCLE[0]
  const i = FAULT_CYCLE.findIndex(f => f.status === current.errorStatus && f.delay === current.delayMs &&
    f.reset === current.reset && f.rate === current.rate)
  return i === -1 ? null : FAULT_CYCLE[i + 1] || null
}

module.exports = { createView, parseKeys, handleKey, HELP, KEY_HELP, HELP_NOTES, FAULT_CYCLE }
