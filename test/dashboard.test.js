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
const { createView, backendRows, totals, rates, parseKeys, handleKey, render, stripAnsi, HELP } = require('../lib/admin/dashboard')
const { startDashboard } = require('../lib/admin/terminal')
const { LILA, tcpBackend, exchange, until, within, makeBackend } = require('./fixtures/helpers')

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

t.test('keys: arrows, vi keys, letters, several in one chunk, unknown sequences skipped', async t => {
  t.same(parseKeys('\x1b[A\x1b[Bjk'), ['up', 'down', 'down', 'up'])
  t.same(parseKeys('dex+-=_q\x03'), ['drain', 'enable', 'disable', 'more', 'less', 'more', 'less', 'quit', 'quit'])
  t.same(parseKeys('\x1b[C\x1b[15~z\x1bOA'), ['up'], 'right arrow, F5 and an unknown letter are nothing')
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
  const zero = handleKey(createView(), 'less', snapshotOf([backend('10.0.0.1:80', { weight: 0 })]))
  t.same(zero, { view: { selected: 0, message: 'weight stays 0 (0 to 1000)' }, action: null })
  t.same(handleKey(createView(), 'drain', snapshotOf([])).action, null, 'no backend: nothing to do')
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
  t.equal(lines[7], HELP)
  t.match(lines[8], /^── log ─+$/)
  t.equal(lines[9], 'lila: backend 10.0.0.2:80 down: http /health 500')
  for (const line of lines) t.ok(line.length <= 120, 'fits the width')

  const narrow = render(SNAPSHOT, createView(), { width: 60, height: 6, colour: false })
  t.ok(narrow.length <= 6, 'fits the height')
  for (const line of narrow) t.ok(line.length <= 60, `fits 60 columns: ${line}`)
  t.match(narrow[3], /…$/, 'a row too wide is cut, visibly')
  const medium = render(SNAPSHOT, createView(), { width: 80, height: 20, colour: false })
  t.equal(medium[4], '  10.0.0.2:80 down         1     0       -       50      0        -  http /heal…', 'a long reason is cut')

  const coloured = render(SNAPSHOT, createView(), { width: 120, height: 20 })
  t.match(coloured[3], /^\x1b\[7m> /, 'the selected row in inverse video')
  t.match(coloured[4], /\x1b\[31mdown {5}\x1b\[39m/, 'down in red')
  t.equal(stripAnsi(coloured[4]), lines[4].replace(/^> /, '  '))

  const panic = render(snapshotOf([], { panic: true }), createView(), { colour: false })
  t.match(panic[1], /PANIC: every backend is down/)
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

t.test('for real, under a pseudo-terminal: drain, enable, reweight, quit', async t => {
  if (spawnSync('tmux', ['-V']).error) return t.skip('tmux is not installed: the dashboard is not tried in a real terminal')
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
