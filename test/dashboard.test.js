'use strict'

/* eslint-disable no-control-regex -- the terminal's escape sequences are what these tests read */

// --dashboard: its pure half (rendering, keys, rates) with plain objects, the TTY loop
// with fake streams, and once for real under a pseudo-terminal (tmux).

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { EventEmitter } = require('events')
const { spawnSync } = require('child_process')
const { render, frame } = require('../lib/admin/dashboard')
const { backendRows, totals, rates } = require('../lib/admin/dashboard-rows')
const { createView, parseKeys, handleKey, HELP } = require('../lib/admin/dashboard-keys')
const { stripAnsi } = require('../lib/admin/screen-text')
const { startDashboard, wantsColour } = require('../lib/admin/terminal')
const { LILA, tcpBackend, exchange, until, within, makeBackend } = require('./fixtures/helpers')
const { tool } = require('./fixtures/tools')

function backend (address, extra = {}) {
  const [host, port] = address.split(':')
  return { ...makeBackend({ host, port: Number(port) }).snapshot(), ...extra }
}

function snapshotOf (backends, extra = {}) {
  return {
    startedAt: 0,
    listeners: [{ name: '127.0.0.1:4444', protocol: 'http', mode: 'round-robin', active: 1, waiting: 0, accepted: 9, unserved: 0, panic: false, queued: 0, queueTimeouts: 0, backends, ...extra }]
  }
}

const SNAPSHOT = snapshotOf([
  backend('10.0.0.1:80', { total: 100, live: 2, responseTime: { p99: 3.456 } }),
  backend('10.0.0.2:80', { total: 50, status: 'down', state: 'down', reason: 'http /health 500' }),
  backend('10.0.0.3:80', { total: 7, weight: 3, status: 'draining', reason: 'by an operator; 1 connection left' })
])

t.test('keys: arrows, vi keys, letters, several in one chunk, unknown keys one each', async t => {
  t.same(parseKeys('\x1b[A\x1b[Bjk'), ['up', 'down', 'down', 'up'])
  t.same(parseKeys('dex+-=_?q\x03'), ['drain', 'enable', 'disable', 'more', 'less', 'more', 'less', 'help', 'quit', 'interrupt'])
  t.same(parseKeys('\x1b[5~\x1b[6~\x1b[H\x1b[4~gG'), ['pageup', 'pagedown', 'home', 'end', 'home', 'end'])
  t.same(parseKeys('\x1b[C\x1b[15~z \x1b\x1bOA'), ['other', 'other', 'other', 'other', 'other', 'up'], 'right arrow, F5, a letter, space, Esc: one key each, none of use')
})

t.test('handleKey: selection stays on the table, actions name the selected backend', async t => {
  let view = createView()
  const press = key => {
    const result = handleKey(view, key, SNAPSHOT)
    view = result.view
    return result.action
  }
  t.equal(press('up'), null)
  t.equal(view.selected, 0, 'not above the first')
  press('down')
  press('down')
  press('down')
  t.equal(view.selected, 2, 'not below the last')
  t.same(press('drain'), { op: 'drain', listener: '127.0.0.1:4444', backend: '10.0.0.3:80' })
  t.same(press('more'), { op: 'weight', listener: '127.0.0.1:4444', backend: '10.0.0.3:80', value: 4 })
  t.same(press('less'), { op: 'weight', listener: '127.0.0.1:4444', backend: '10.0.0.3:80', value: 2 })
  press('up')
  t.same(press('enable'), { op: 'enable', listener: '127.0.0.1:4444', backend: '10.0.0.2:80' })
  t.same(press('disable'), { op: 'disable', listener: '127.0.0.1:4444', backend: '10.0.0.2:80' })
  t.same(press('quit'), { op: 'quit' })
  t.equal(press('other'), null)
  const zero = handleKey(createView(), 'less', snapshotOf([backend('10.0.0.1:80', { weight: 0 })]))
  t.same(zero, { view: { ...createView(), message: 'weight stays 0 (0 to 1000)' }, action: null })
  t.same(handleKey(createView(), 'drain', snapshotOf([])).action, null, 'no backend: nothing to do')
})

t.test('handleKey: m turns the selected backend\'s listener (or route) under maintenance, and back', async t => {
  t.same(parseKeys('m'), ['maintenance'])
  t.same(handleKey(createView(), 'maintenance', SNAPSHOT).action, { op: 'maintenance', listener: '127.0.0.1:4444' })
  const on = { listener: { page: null, since: 0 }, routes: {}, allow: [] }
  const held = snapshotOf(SNAPSHOT.listeners[0].backends, { maintenance: on })
  t.same(handleKey(createView(), 'maintenance', held).action, { op: 'endMaintenance', listener: '127.0.0.1:4444' }, 'on: off')
  const route = { name: 'api', match: '/api', mode: 'random', backends: [backend('10.0.0.5:80')] }
  const routeOn = { listener: null, routes: { api: { page: null, since: 0 } }, allow: [] }
  const routed = snapshotOf([], { routes: [route], maintenance: routeOn })
  t.same(handleKey(createView(), 'maintenance', routed).action, { op: 'endMaintenance', listener: '127.0.0.1:4444', route: 'api' }, 'a route\'s backend: its route')
})

t.test('rates from two snapshots', async t => {
  const before = totals(SNAPSHOT)
  const later = snapshotOf([backend('10.0.0.1:80', { total: 130 }), backend('10.0.0.9:80', { total: 5 })])
  const perSecond = rates(before, totals(later), 2000)
  t.same([...perSecond], [['127.0.0.1:4444 10.0.0.1:80', 15]], 'per second; a new backend has no rate yet')
  t.same([...rates(null, before, 1000)], [])
  t.equal(backendRows(SNAPSHOT).length, 3)
})

t.test('render: a compact table, state and why, fitted to the terminal', async t => {
  const perSecond = new Map([['127.0.0.1:4444 10.0.0.1:80', 12.34]])
  const lines = render(SNAPSHOT, { selected: 1, message: '' }, { width: 120, height: 20, rates: perSecond, version: '1.0.0', now: Date.UTC(2024, 0, 1, 12, 0, 5), log: ['lila: backend 10.0.0.2:80 down: http /health 500'], colour: false })
  t.match(lines[0], /^lila 1\.0\.0 · 1 listener · 1\/3 backends up +12:00:05$/)
  t.equal(lines[0].length, 120, 'the clock on the right')
  t.equal(lines[1], '127.0.0.1:4444 http round-robin · active 1 · queued 0 · unserved 0')
  t.equal(lines[2], '  BACKEND     STATUS      WT  LIVE   REQ/S    TOTAL   FAIL      P99  WHY')
  t.equal(lines[3], '  10.0.0.1:80 up           1     2    12.3      100      0   3.46ms')
  t.equal(lines[4], '> 10.0.0.2:80 down         1     0       -       50      0        -  http /health 500')
  t.equal(lines[5], '  10.0.0.3:80 draining     3     0       -        7      0        -  by an operator; 1 connection left')
  t.equal(lines[6], '10.0.0.2:80 down: http /health 500', 'the selected backend in full')
  t.match(lines[7], /^── log ─+$/)
  t.equal(lines[8], 'lila: backend 10.0.0.2:80 down: http /health 500')
  t.equal(lines.length, 20, 'the whole screen')
  t.equal(lines[19], HELP, 'the keys on the last line')
  for (const line of lines) t.ok(line.length <= 120, 'fits the width')

  const narrow = render(SNAPSHOT, createView(), { width: 40, height: 6, colour: false })
  t.equal(narrow.length, 6, 'fits the height')
  for (const line of narrow) t.ok(line.length <= 40, `fits 40 columns: ${line}`)
  t.same(narrow.slice(1, 3), ['127.0.0.1:4444 http round-robin · active', '  1 · queued 0 · unserved 0'], 'the listener\'s line wraps')
  t.match(narrow[4], /^> 10\.0\.0\.1:80 up +$/, 'the figures go before the address, the status and room for a reason')
  t.equal(narrow[5], '? keys  ↑↓ select  d drain  e enable  x…', 'the keys, first the help key')
  const medium = render(SNAPSHOT, createView(), { width: 80, height: 20, colour: false })
  t.equal(medium[2], '  BACKEND     STATUS      WT  LIVE   REQ/S   FAIL      P99  WHY', 'at 80 columns the total goes')
  t.equal(medium[4], '  10.0.0.2:80 down         1     0       -      0        -  http /health 500', 'for room for the reason')

  const coloured = render(SNAPSHOT, createView(), { width: 120, height: 20 })
  t.match(coloured[3], /^\x1b\[7m> /, 'the selected row in inverse video')
  t.match(coloured[4], /\x1b\[31mdown {5}\x1b\[39m/, 'down in red')
  t.equal(stripAnsi(coloured[4]), lines[4].replace(/^> /, '  '))

  const panic = render(snapshotOf([], { panic: true }), createView(), { colour: false })
  t.equal(panic[1], 'PANIC on 127.0.0.1:4444: every backend is down; traffic goes to them anyway')
})

t.test('docs/operations.md shows the view as render() draws it', async t => {
  const docs = fs.readFileSync(path.join(__dirname, '..', 'docs', 'operations.md'), 'utf8')
  const [, shown] = /on one 100 columns wide and 10 rows\nhigh:\n\n```\n([\s\S]*?)\n```/.exec(docs) || []
  t.ok(shown, 'the example is there')
  const snapshot = {
    startedAt: 0,
    listeners: [{
      ...snapshotOf([]).listeners[0],
      active: 3,
      backends: [
        backend('127.0.0.1:9001', { total: 20511, live: 1, responseTime: { p99: 2.45 } }),
        backend('127.0.0.1:9002', { total: 18020, live: 2, status: 'draining', reason: 'by an operator; 2 connections left', responseTime: { p99: 2.61 } }),
        backend('127.0.0.1:9003', { total: 51032, weight: 3, failures: 1, responseTime: { p99: 2.38 } })
      ]
    }]
  }
  const perSecond = new Map([['127.0.0.1:4444 127.0.0.1:9001', 412], ['127.0.0.1:4444 127.0.0.1:9002', 0], ['127.0.0.1:4444 127.0.0.1:9003', 1236]])
  const log = ['lila: backend 127.0.0.1:9002 draining (by an operator); 2 connections left open']
  const now = Date.UTC(2024, 5, 1, 12, 0, 5)
  const lines = render(snapshot, { ...createView(), selected: 1 }, { width: 100, height: 10, rates: perSecond, version: '0.1.0', now, log, colour: false })
  t.equal(shown, lines.join('\n'))
})

// 30 backends on one listener, more than 24 rows hold; the 25th (index 24) down for a
// reason far wider than its column.
const LONG_REASON = 'certificate not valid for backend.example (it is for a.example, b.example): give the backend by a name it covers, or use --backend-tls-insecure'
function thirty (extra = {}) {
  const backends = []
  for (let i = 0; i < 30; i++) backends.push(backend(`127.0.0.1:${41001 + i}`, { total: i }))
  backends[24] = { ...backends[24], status: 'down', state: 'down', reason: LONG_REASON }
  return snapshotOf(backends, extra)
}

t.test('render at 80×24 with 30 backends: the selected row on screen, the keys, nothing wider, nothing cut', async t => {
  const snapshot = thirty({ panic: true })
  for (const colour of [false, true]) {
    const lines = render(snapshot, { ...createView(), selected: 24 }, { width: 80, height: 24, colour, log: ['lila: one', 'lila: two'] })
    const plain = lines.map(stripAnsi)
    t.equal(lines.length, 24, 'the whole screen')
    t.same(plain.filter(line => line.length > 80), [], 'no line wider than 80 columns')
    t.equal(plain.filter(line => line.startsWith('> ')).length, 1)
    t.match(plain.find(line => line.startsWith('> ')), /^> 127\.0\.0\.1:41025 down +1 +0 /, 'the selected row (the 25th) is on screen')
    t.equal(plain[23], HELP, 'the keys on the last line')
    t.ok(plain.some(line => /^ +\d+–25 of 30 backends ↑ ↓$/.test(line)), 'which rows are shown, and that there are more')
    t.ok(plain.map(line => line.trim()).join(' ').includes(`127.0.0.1:41025 down: ${LONG_REASON}`), 'the selected backend\'s reason in full')
    t.ok(plain.includes('PANIC on 127.0.0.1:4444: every backend is down; traffic goes to them anyway'), 'the panic notice in full')
    t.ok(plain.includes('lila: two'), 'the log')
  }
})

t.test('moving through 30 backends at 80×24 as the terminal does: the selection never leaves the screen', async t => {
  const snapshot = thirty()
  const options = { width: 80, height: 24, colour: false, log: ['lila: one'] }
  let view = createView()
  let lines = []
  const press = key => {
    view = handleKey(view, key, snapshot).view
    const drawn = frame(snapshot, view, options)
    view = { ...view, top: drawn.top, page: drawn.page } // what terminal.js keeps
    lines = drawn.lines
  }
  const misses = []
  const keys = [...Array(35).fill('down'), ...Array(35).fill('up'), 'end', 'pageup', 'home', 'pagedown', 'end']
  for (const key of keys) {
    press(key)
    const selected = `> 127.0.0.1:${41001 + view.selected} `
    if (lines.length !== 24 || !lines.some(line => line.startsWith(selected))) misses.push(`${key} to ${view.selected}`)
  }
  t.same(misses, [], 'the selected row is on screen after every key')
  press('home')
  for (let i = 0; i < 29; i++) press('down')
  const top = view.top
  press('up')
  t.equal(view.top, top, 'moving back inside the window does not scroll it')
  t.equal(view.page, lines.filter(line => /^[ >] 127\.0\.0\.1:/.test(line)).length, 'a page is the rows shown')
  press('pageup')
  t.equal(view.selected, 28 - (view.page - 1), 'PgUp moves a page less one row')
  press('home')
  t.equal(view.selected, 0)
  press('end')
  t.equal(view.selected, 29)
})

t.test('the log takes the rows the table does not need, and a few when it needs them all', async t => {
  const log = Array.from({ length: 40 }, (_, i) => `lila: line ${i + 1}`)
  const lines = render(SNAPSHOT, createView(), { width: 80, height: 24, colour: false, log })
  t.equal(lines.length, 24)
  const rule = lines.findIndex(line => line.startsWith('── log'))
  t.same(lines.slice(rule + 1, 23), log.slice(-(23 - rule - 1)), 'the latest lines, down to the keys')
  t.equal(23 - rule - 1, 15, 'every row the table leaves')
  t.notOk(lines.includes(''), 'no empty row')
  const crowded = render(thirty(), createView(), { width: 80, height: 24, colour: false, log })
  const at = crowded.findIndex(line => line.startsWith('── log'))
  t.same(crowded.slice(at + 1, 23), log.slice(-3), 'three lines beside 30 backends')
})

t.test('? shows the keys; any key closes it and does only that; Ctrl-C still quits', async t => {
  t.match(HELP, /^\? keys /, 'the key line names it first')
  const view = handleKey(createView(), 'help', SNAPSHOT).view
  t.equal(view.help, true)
  const lines = render(SNAPSHOT, view, { width: 80, height: 24, colour: false })
  t.equal(lines.length, 24)
  t.same(lines.filter(line => line.length > 80), [])
  for (const key of [/^↑ ↓ {2}k j +select/, /^PgUp PgDn +a page/, /^Home End {2}g G +the first/, /^d +drain/, /^e +enable/, /^x +disable/, /^\+ - +weight/, /^\? +this help/, /^q {2}Ctrl-C +stop lila/]) {
    t.ok(lines.some(line => key.test(line)), `${key}`)
  }
  t.equal(lines[23], 'Any key closes this help.')
  t.equal(render(SNAPSHOT, view, { width: 40, height: 6, colour: false })[5], 'Any key closes this help.', 'the way out stays in sight')
  for (const key of ['drain', 'disable', 'less', 'quit', 'help', 'other', 'down']) {
    t.same(handleKey(view, key, SNAPSHOT), { view: { ...view, help: false }, action: null }, `${key} closes help, and does nothing else`)
  }
  t.same(handleKey(view, 'interrupt', SNAPSHOT).action, { op: 'quit' })
})

t.test('no colour: NO_COLOR, TERM=dumb, a terminal without colours', async t => {
  const lines = render(thirty({ panic: true }), { ...createView(), selected: 24 }, { width: 80, height: 24, colour: false, log: ['lila: one'] })
  t.same(lines.filter(line => line.includes('\x1b')), [], 'no escape code at all')
  t.match(render(thirty({ panic: true }), createView(), { width: 80, height: 24 }).join('\n'), /\x1b\[32m/, 'colours otherwise')
  const colours = { hasColors: () => true }
  t.equal(wantsColour({}, colours), true)
  t.equal(wantsColour({ NO_COLOR: '1' }, colours), false, 'NO_COLOR')
  t.equal(wantsColour({ NO_COLOR: '' }, colours), true, 'an empty NO_COLOR is not set (no-color.org)')
  t.equal(wantsColour({ TERM: 'dumb' }, colours), false, 'TERM=dumb')
  t.equal(wantsColour({}, { hasColors: () => false }), false, 'a terminal without colours')
  t.equal(wantsColour({ TERM: 'xterm' }, { hasColors: env => env.TERM === 'xterm' }), true, 'hasColors() reads the same environment')
  t.equal(wantsColour({}, {}), true, 'a stream that cannot tell')
})

// A stream pair that looks enough like a terminal.
function fakeTerminal () {
  const input = new EventEmitter()
  Object.assign(input, {
    isTTY: true, raw: false, setRawMode (on) { this.raw = on }, setEncoding () {}, resume () {}, pause () {}
  })
  const output = new EventEmitter()
  output.columns = 100
  output.rows = 20
  output.text = ''
  output.write = chunk => { output.text += chunk; return true }
  return { input, output }
}

t.test('the TTY loop: raw mode and the alternate screen while it runs, given back on stop', async t => {
  const { input, output } = fakeTerminal()
  const exitEvents = new EventEmitter()
  const requests = []
  let quit = 0
  const control = { drain: async request => { requests.push(request); return { message: 'drained it' } } }
  let snapshots = 0
  const stats = async () => { snapshots++; return SNAPSHOT }
  const view = startDashboard({ stats, control, input, output, exitEvents, onQuit: () => quit++, interval: 60000 })
  t.equal(input.raw, true)
  await until(() => output.text.includes('10.0.0.3:80'), 'a first frame')
  t.match(output.text, /^\x1b\[\?1049h\x1b\[\?25l/, 'alternate screen, cursor hidden')
  view.logSink.write('lila: a line said meanwhile\n')
  input.emit('data', '\x1b[Bd')
  await until(() => output.text.includes('drained it'), 'the answer shown')
  t.same(requests, [{ listener: '127.0.0.1:4444', backend: '10.0.0.2:80' }])
  t.equal(snapshots, 2, 'one snapshot for the first frame, one after the drain; key redraws paint those')
  input.emit('data', 'q')
  t.equal(quit, 1)
  t.equal(input.raw, false, 'raw mode off')
  t.match(output.text, /\x1b\[\?25h\x1b\[\?1049l(lila: a line said meanwhile\n)$/, 'main screen back, then the log lines kept')
  t.equal(exitEvents.listenerCount('exit'), 0)
})

t.test('the TTY loop: NO_COLOR frames have no colour; a resize redraws at the new size', async t => {
  const { input, output } = fakeTerminal()
  output.columns = 80
  output.rows = 24
  const view = startDashboard({ stats: async () => thirty(), control: {}, input, output, onQuit: () => {}, interval: 60000, env: { NO_COLOR: '1' } })
  t.teardown(() => view.stop())
  // Each frame starts at the top left; its lines end in "clear to the end of the line".
  const last = () => output.text.split('\x1b[H').slice(-1)[0].replace(/\x1b\[K\x1b\[J$/, '').split('\x1b[K\r\n')
  await until(() => last().length === 24, 'a first frame of 24 lines')
  input.emit('data', 'G')
  await until(() => last().some(line => line.startsWith('> 127.0.0.1:41030 ')), 'the last backend selected')
  t.notMatch(output.text, /\x1b\[[0-9;]*m/, 'no colour, no inverse, no bold')
  output.columns = 60
  output.rows = 12
  output.emit('resize')
  await until(() => last().length === 12, 'a frame of 12 lines')
  t.same(last().filter(line => line.length > 60), [], 'at most 60 columns')
  t.ok(last().some(line => line.startsWith('> 127.0.0.1:41030 ')), 'the selection still on screen')
})

t.test('for real, under a pseudo-terminal: drain, enable, reweight, quit', { skip: tool('tmux').skip }, async t => {
  const [a, b] = await Promise.all(['a', 'b'].map(name => tcpBackend(t, name)))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-dashboard-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const socket = `lila-test-${process.pid}`
  const tmux = (...args) => spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' })
  t.teardown(() => tmux('kill-server'))
  const exitFile = path.join(dir, 'exit')
  const command = `${LILA} rr ${a.address} ${b.address} --host 127.0.0.1 --port 0 --check none --dashboard; echo $? > ${exitFile}`
  t.equal(tmux('new-session', '-d', '-x', '120', '-y', '30', command).status, 0)
  tmux('set-option', '-g', 'remain-on-exit', 'on')
  const screen = () => tmux('capture-pane', '-p').stdout
  const waitScreen = (pattern, what) => until(() => pattern.test(screen()), `${what}; screen:\n${screen()}`, { timeout: 10000, every: 50 })

  await waitScreen(/BACKEND .* WHY/, 'the table')
  const port = Number(/^127\.0\.0\.1:(\d+) tcp round-robin/m.exec(screen())[1])
  for (let i = 0; i < 4; i++) await exchange(port)
  await waitScreen(new RegExp(`> ${a.address} up +1 +0 +\\S+ +2 `), 'the counts of a')

  tmux('send-keys', 'Down', 'd')
  await waitScreen(new RegExp(`> ${b.address} drained +1 `), 'b drained')
  t.same((await Promise.all([exchange(port), exchange(port)])).map(r => r.data), ['a\n', 'a\n'], 'b takes no new connection')
  tmux('send-keys', 'e', '+', '+')
  await waitScreen(new RegExp(`> ${b.address} up +3 `), 'b enabled, weight 3')
  t.match(screen(), new RegExp(`${b.address} weight 3 \\(was 2\\)`))
  tmux('send-keys', 'q')
  await within(10000, 'lila to exit', until(() => fs.existsSync(exitFile) && fs.readFileSync(exitFile, 'utf8').trim() !== '', 'the exit file', { timeout: 10000, every: 50 }))
  t.equal(fs.readFileSync(exitFile, 'utf8').trim(), '0', 'a graceful stop, exit 0')
  const after = screen()
  t.match(after, /lila: listening on 127\.0\.0\.1:\d+/, 'back on the main screen, with what was said before')
  t.match(after, new RegExp(`lila: backend ${b.address} draining \\(by an operator\\)`), 'and the lines said while the dashboard ran')
  t.match(after, /lila: quit: stopped accepting/)
  t.notMatch(after, /BACKEND .* WHY/, 'the table is gone with the alternate screen')
})

t.test('for real at 80×24 with 30 backends: the selection scrolls into sight, d drains the one seen; ? and a resize', { skip: tool('tmux').skip }, async t => {
  const backends = await Promise.all(Array.from({ length: 30 }, (_, i) => tcpBackend(t, `b${i + 1}`)))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-dashboard-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const socket = `lila-test-${process.pid}-30`
  const tmux = (...args) => spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' })
  t.teardown(() => tmux('kill-server'))
  const exitFile = path.join(dir, 'exit')
  const addresses = backends.map(b => b.address).join(' ')
  // Colours as a terminal has them, whatever the environment running the tests says.
  const command = `env -u NO_COLOR -u FORCE_COLOR ${LILA} rr ${addresses} --host 127.0.0.1 --port 0 --check none --dashboard; echo $? > ${exitFile}`
  t.equal(tmux('new-session', '-d', '-x', '80', '-y', '24', command).status, 0)
  tmux('set-option', '-g', 'remain-on-exit', 'on')
  const screen = () => tmux('capture-pane', '-p').stdout
  const waitScreen = (pattern, what) => until(() => pattern.test(screen()), `${what}; screen:\n${screen()}`, { timeout: 10000, every: 50 })
  const rowOf = (b, status) => new RegExp(`^> ${b.address} ${status} `, 'm') // the selected row

  await waitScreen(/BACKEND .* WHY/, 'the table')
  const port = Number(/^127\.0\.0\.1:(\d+) tcp round-robin/m.exec(screen())[1])
  const target = backends[25]
  tmux('send-keys', ...Array(25).fill('j'))
  await waitScreen(rowOf(target, 'up'), 'the 26th backend selected, on screen')
  const lines = screen().split('\n')
  t.equal(lines[23], HELP, 'the keys on the last row')
  t.match(screen(), /^ +\d+–26 of 30 backends ↑ ↓$/m, 'which rows are shown')
  t.match(tmux('capture-pane', '-p', '-e').stdout, /\x1b\[32mup/, 'in colour')

  tmux('send-keys', 'd')
  await waitScreen(rowOf(target, 'drained'), 'the selected backend drained')
  t.equal(screen().split('\n').filter(line => /^[ >] \S+ +drained /.test(line)).length, 1, 'that one only')
  const answers = []
  for (let i = 0; i < 30; i++) answers.push((await exchange(port)).data)
  t.equal(answers.filter(answer => /^b\d+\n$/.test(answer)).length, 30, 'the others take the traffic')
  t.equal(target.connections, 0, 'the drained one takes none')

  tmux('send-keys', '?')
  await waitScreen(/^Any key closes this help\.$/m, 'the help')
  t.match(screen(), /^d +drain: no new connections/m)
  tmux('send-keys', 'x')
  await waitScreen(/BACKEND .* WHY/, 'the table again')
  t.match(screen(), rowOf(target, 'drained'), 'the key that closed the help did not disable it')

  tmux('resize-window', '-x', '100', '-y', '40')
  await waitScreen(new RegExp(`^  ${backends[0].address} up `, 'm'), 'the first backend in sight again, at 100×40')
  t.notMatch(screen(), / of 30 backends/, 'all 30 rows fit: nothing scrolled')
  t.match(screen(), rowOf(target, 'drained'))

  tmux('send-keys', 'q')
  await within(10000, 'lila to exit', until(() => fs.existsSync(exitFile) && fs.readFileSync(exitFile, 'utf8').trim() !== '', 'the exit file', { timeout: 10000, every: 50 }))
  t.equal(fs.readFileSync(exitFile, 'utf8').trim(), '0', 'a graceful stop, exit 0')
  const after = screen()
  t.match(after, new RegExp(`lila: backend ${target.address} draining \\(by an operator\\)`))
  t.notMatch(after, /disabled/)
})

t.test('for real, NO_COLOR=1: nothing on screen in colour', { skip: tool('tmux').skip }, async t => {
  const [a, b] = await Promise.all(['a', 'b'].map(name => tcpBackend(t, name)))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-dashboard-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const socket = `lila-test-${process.pid}-nocolor`
  const tmux = (...args) => spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' })
  t.teardown(() => tmux('kill-server'))
  const exitFile = path.join(dir, 'exit')
  const command = `env NO_COLOR=1 ${LILA} rr ${a.address} ${b.address} --host 127.0.0.1 --port 0 --check none --dashboard; echo $? > ${exitFile}`
  t.equal(tmux('new-session', '-d', '-x', '80', '-y', '24', command).status, 0)
  tmux('set-option', '-g', 'remain-on-exit', 'on')
  const screen = () => tmux('capture-pane', '-p', '-e').stdout
  await until(() => /BACKEND .* WHY/.test(screen()), 'the table', { timeout: 10000, every: 50 })
  t.match(screen(), new RegExp(`^> ${a.address} up `, 'm'))
  t.notMatch(screen(), /\x1b\[[0-9;]*m/, 'no colour, no inverse, no bold')
  tmux('send-keys', 'q')
  await within(10000, 'lila to exit', until(() => fs.existsSync(exitFile) && fs.readFileSync(exitFile, 'utf8').trim() !== '', 'the exit file', { timeout: 10000, every: 50 }))
  t.equal(fs.readFileSync(exitFile, 'utf8').trim(), '0')
})

t.test('without a terminal on stderr: a note, and lila runs without the dashboard', async t => {
  const { main } = require('../lib/cli/main')
  const a = await tcpBackend(t, 'a')
  const signals = new EventEmitter()
  let text = ''
  const stderr = { write: chunk => { text += chunk; return true } }
  const running = main(['rr', a.address, '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--dashboard'], { stderr, stdout: stderr, signals })
  await until(() => /listening on/.test(text), 'the listening line')
  t.match(text, /^lila: --dashboard needs a terminal on stderr; running without it$/m)
  const port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(text)[1])
  t.equal((await exchange(port)).data, 'a\n', 'it serves')
  signals.emit('SIGTERM', 'SIGTERM')
  t.equal(await running, 0)
})

t.test('the listener line says how many clients per-client limits turned away, once any were', async t => {
  const quiet = render(snapshotOf([backend('10.0.0.1:80')], { limited: { 'rate-limit': 0, 'max-conn-per-client': 0 } }), { selected: 0 }, { width: 120, height: 12, colour: false })
  t.notMatch(quiet.join('\n'), /limited/)
  const busy = render(snapshotOf([backend('10.0.0.1:80')], { limited: { 'rate-limit': 10, 'max-conn-per-client': 2 } }), { selected: 0 }, { width: 120, height: 12, colour: false })
  t.match(busy.join('\n'), '· limited 12 (rate-limit 10, max-conn-per-client 2)')
})

t.test('with --sticky, the listener line counts what the cookie did', async t => {
  const snapshot = snapshotOf([backend('10.0.0.1:80')], { sticky: 'cookie=lila', stickyResponses: { honoured: 90, reassigned: 2, new: 8 } })
  const screen = render(snapshot, { selected: 0 }, { width: 160, height: 12, colour: false }).join('\n')
  t.match(screen, '· sticky cookie=lila: honoured 90, reassigned 2, new 8')
  t.notMatch(render(snapshotOf([backend('10.0.0.1:80')]), { selected: 0 }, { width: 160, height: 12, colour: false }).join('\n'), /sticky/)
})
