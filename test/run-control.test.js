'use strict'

// lila run through the spawned executable, continued (run.test.js and run-roll.test.js
// have the rest): the start-up table, --max-age under load, a config reload that starts
// or stops a listener's app, `lila restart-app` (and the SIGUSR2 handler that answers
// it), colour on a terminal, and the options --app-ports, --app-env, --check, --surge,
// --stop-signal and --stop-timeout.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn, spawnSync } = require('child_process')
const { LILA, request, statusJson, spawnLila, runLila, httpBackend, until } = require('./fixtures/helpers')
const { restartablePorts } = require('./fixtures/ports')
const { APP, runApp, instances, settled, groupMembers, requestLoop } = require('./fixtures/run')
const { tool } = require('./fixtures/tools')

const LINUX = process.platform === 'linux' ? false : 'reads process groups from /proc (Linux)'

t.setTimeout(180000)

t.test('the start-up table shows each instance ready, with its port and pid', async t => {
  const lila = await runApp(t, ['-i', '3'])
  const start = lila.lines.findIndex(line => /^lila: backend +state +check$/.test(line))
  const end = lila.lines.indexOf(lila.listening)
  t.ok(start !== -1 && start < end, `a table before the listening line:\n${lila.stderr}`)
  const table = lila.lines.slice(start + 1, end)
  const [, count] = /^lila: app +(\d) ready +an instance joins when it is ready$/.exec(table[0]) || []
  t.ok(Number(count) >= 1, `the app's row says how many are ready: ${table[0]}`)
  const rows = table.slice(1)
  t.equal(rows.length, Number(count), `a row for each instance ready:\n${rows.join('\n')}`)
  t.notMatch(rows.join('\n'), /pending|not checked/, 'none shown as not checked')
  const list = await instances(lila)
  const numbers = new Set()
  for (const row of rows) {
    const match = /^lila: 127\.0\.0\.1:(\d+) \(app\.(\d), pid (\d+)\) +up +tcp connect ok$/.exec(row)
    t.ok(match, `an instance up, with its port and pid: ${row}`)
    if (match === null) continue
    const [, port, number, pid] = match.map(Number)
    t.match(list.find(i => i.number === number), { port, pid, state: 'ready' }, `app.${number} as /status.json shows it`)
    numbers.add(number)
  }
  t.equal(numbers.size, rows.length, 'each instance once')
  t.equal((await request(lila.port)).status, 200)
})

t.test('--max-age: each instance older than it is replaced through a roll; no request failed', async t => {
  const lila = await runApp(t, ['-i', '2', '--max-age', '3s'])
  const before = (await instances(lila)).map(i => i.pid)
  const loop = requestLoop(lila.port, 2, 100000)
  t.teardown(() => loop.stop())
  const old = 'app\\.(\\d) is older than --max-age 3s'
  await lila.waitForLine(new RegExp(`app: rolling restart \\(${old}\\): 1 instance, 1 at a time$`))
  const from = loop.state.ok
  const done = new RegExp(`app: rolling restart done \\(${old}\\): 1 replaced in `)
  await lila.waitForLine(done, { count: 2 })
  const during = loop.state.ok - from
  const { ok, failed } = await loop.stop()
  const rolled = lila.lines.map(line => done.exec(line)).filter(Boolean).slice(0, 2).map(match => match[1])
  t.same(rolled.sort(), ['1', '2'], 'app.1 and app.2 rolled, each for its age')
  t.ok(during > 0, `${during} requests answered during the two rolls (${ok} in all)`)
  t.same(failed, [], 'none failed')
  const after = await instances(lila)
  t.same(after.filter(i => before.includes(i.pid)), [], 'both first instances replaced')
  t.ok((await statusJson(lila)).listeners[0].app.restarts['max-age'] >= 2, 'counted under max-age')
})

t.test('a config reload that starts a listener\'s app, then stops it: in place, no request failed', { skip: LINUX }, async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-run-reload-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'lila.json')
  const backend = await httpBackend(t, 'static')
  const write = (listener, more = {}) => fs.writeFileSync(file, JSON.stringify({
    host: '127.0.0.1',
    'status-port': 0,
    'status-host': '127.0.0.1',
    ...more,
    listeners: [{ name: 'web', port: 0, protocol: 'http', ...listener }]
  }))
  write({ backends: [backend.address] })
  const lila = await spawnLila(t, ['--config', file])
  lila.statusPort = Number((await lila.waitForLine(/status on http:\/\/127\.0\.0\.1:(\d+)\/status$/))[1])
  t.equal(String((await request(lila.port)).body), 'static\n')
  const loop = requestLoop(lila.port, 2, 100000)
  t.teardown(() => loop.stop())

  // A new app that does not start: the reload is refused, the backend serves on.
  write({ run: { command: `node ${APP}`, instances: 2, 'app-env': ['APP_FAIL=oops'], 'ready-timeout': '2s' } })
  lila.child.kill('SIGHUP')
  const [refused] = await lila.waitForLine(/reload refused: .*/)
  t.match(refused, /reload refused: listener web: app did not start: app\.\d exited with code 1; its last line: oops; keeping the running config$/)

  write({ run: { command: `node ${APP}`, instances: 2 } })
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(/)
  await settled(lila, 2)
  t.match(String((await request(lila.port)).body), /^instance [12] pid \d+ port \d+\n$/, 'the app answers')
  t.equal(lila.lines.filter(line => /replaced|rolling restart/.test(line)).length, 0,
    'the listener kept, and the app the reload started not rolled')
  const started = loop.state.ok
  lila.child.kill('SIGHUP') // the same file: a rolling restart
  await lila.waitForLine(/app: rolling restart done \(SIGHUP\): 2 replaced/)
  const pids = (await instances(lila)).map(i => i.pid)

  write({ backends: [backend.address] })
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reload: web: app stopped \(2 instances drained\)/)
  await lila.waitForLine(/reloaded \(/, { count: 3 })
  t.equal(String((await request(lila.port)).body), 'static\n', 'the backend answers again')
  await until(() => groupMembers(pids).length === 0, `the app's processes ${pids} gone`, { timeout: 20000, every: 50 })
  const { ok, failed } = await loop.stop()
  t.ok(ok > started && started > 0, `${ok} requests over the reloads`)
  t.same(failed, [], 'none failed')
  t.equal((await statusJson(lila)).listeners[0].app, null, 'no app any more')
})

t.test('lila restart-app --pid-file F (or PID): a rolling restart under load, said by the command', async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-restart-app-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const pidFile = path.join(dir, 'lila.pid')
  const lila = await runApp(t, ['-i', '2', '--pid-file', pidFile])
  await settled(lila, 2)
  const before = (await instances(lila)).map(i => i.pid)
  const loop = requestLoop(lila.port, 2, 100000)
  t.teardown(() => loop.stop())
  const byFile = await runLila(['restart-app', '--pid-file', pidFile], { timeout: 60000 })
  t.equal(byFile.code, 0, byFile.stderr)
  t.match(byFile.stdout, /^lila: app: rolling restart done \(lila restart-app\): 2 replaced in \S+\n$/)
  t.equal(byFile.stderr, '')
  const byPid = await runLila(['restart-app', String(lila.child.pid)], { timeout: 60000 })
  t.equal(byPid.code, 0, byPid.stderr)
  t.match(byPid.stdout, /^lila: app: rolling restart done \(lila restart-app\): 2 replaced/)
  const { ok, failed } = await loop.stop()
  t.ok(ok > 0, `${ok} requests during the two rolls`)
  t.same(failed, [], 'none failed')
  const after = await instances(lila)
  t.same(after.filter(i => before.includes(i.pid)), [], 'every instance replaced')
  t.same(after.map(i => i.generation), [3, 3])
  t.same((await statusJson(lila)).listeners[0].app.restarts, { command: 4 })
  t.notMatch(lila.stderr, /SIGUSR2: starting/, 'no upgrade')
  t.same(fs.readdirSync(dir), ['lila.pid'], 'no request or answer file left')
})

t.test('lila restart-app: a lila that runs no app, none running, a process that is not lila', async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-restart-app-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const backend = await httpBackend(t, 'plain')
  const plain = await spawnLila(t, ['rr', backend.address, '--host', '127.0.0.1', '--port', '0'])
  const noApp = await runLila(['restart-app', String(plain.child.pid)])
  t.equal(noApp.code, 1)
  t.equal(noApp.stderr, `lila: pid ${plain.child.pid} runs no app: lila restart-app is for lila run\n`)
  t.equal(String((await request(plain.port)).body), 'plain\n', 'that lila serves on')
  t.notMatch(plain.stderr, /SIGUSR2/, 'and did not upgrade')
  const workers = await spawnLila(t, ['rr', backend.address, '--host', '127.0.0.1', '--port', '0', '--workers', '2'])
  const primary = await runLila(['restart-app', String(workers.child.pid)])
  t.equal(primary.code, 1)
  t.equal(primary.stderr, `lila: pid ${workers.child.pid} runs no app: lila restart-app is for lila run\n`, '--workers too')
  t.equal(String((await request(workers.port)).body), 'plain\n')
  t.notMatch(workers.stderr, /SIGUSR2/)

  const noFile = await runLila(['restart-app', '--pid-file', path.join(dir, 'none.pid')])
  t.equal(noFile.code, 1)
  t.match(noFile.stderr, /^lila: cannot read --pid-file \S+none\.pid: no such file or directory\n$/)
  const stale = path.join(dir, 'stale.pid')
  fs.writeFileSync(stale, '999999999\n')
  const noProcess = await runLila(['restart-app', '--pid-file', stale])
  t.equal(noProcess.code, 1)
  t.match(noProcess.stderr, /^lila: no process 999999999 \(from --pid-file \S+\): is lila running\?\n$/)
  t.same(fs.readdirSync(dir).sort(), ['stale.pid'], 'no request left behind')

  if (LINUX) return
  const other = spawn('sleep', ['600'], { stdio: 'ignore' }) // (catches no signal, unlike a node under tap)
  t.teardown(() => other.kill('SIGKILL'))
  await new Promise(resolve => other.once('spawn', resolve))
  const notLila = await runLila(['restart-app', String(other.pid)])
  t.equal(notLila.code, 1)
  t.equal(notLila.stderr, `lila: pid ${other.pid} does not handle SIGUSR2, which would end it: is it lila?\n`)
  t.equal(other.exitCode, null, 'that process was not signalled')
  t.equal(other.signalCode, null)
})

const ESC = '\x1b'

t.test('on a terminal the app\'s prefixes are coloured and the app gets FORCE_COLOR=1; NO_COLOR turns both off', async t => {
  if (tool('tmux').skip) return t.skip(`${tool('tmux').skip}: no terminal to try lila run in`)
  for (const noColour of [false, true]) {
    const socket = `lila-run-colour-${process.pid}-${noColour ? 'no' : 'yes'}`
    const tmux = (...args) => spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' })
    // Whatever the environment running the tests says: colours as a terminal has them.
    const env = noColour ? 'env -u FORCE_COLOR NO_COLOR=1' : 'env -u NO_COLOR -u FORCE_COLOR'
    const command = `exec ${env} APP_SAY_ENV=FORCE_COLOR ${LILA} run 'node ${APP}' -i 2 --protocol http ` +
      '--host 127.0.0.1 --port 0'
    t.equal(tmux('new-session', '-d', '-x', '200', '-y', '50', command).status, 0)
    const lilaPid = Number(tmux('list-panes', '-F', '#{pane_pid}').stdout.trim())
    let gone = false
    t.teardown(() => {
      if (!gone) try { process.kill(lilaPid, 'SIGKILL') } catch {} // (its instances go with it)
      tmux('kill-server')
    })
    const screen = () => tmux('capture-pane', '-p', '-e', '-J').stdout
    await until(() => (screen().match(/FORCE_COLOR=/g) || []).length === 2 && /listening on 127/.test(screen()),
      'both instances and lila listening', { timeout: 20000, every: 50 })
    const shown = screen()
    if (noColour) {
      t.notOk(shown.includes(`${ESC}[`), `NO_COLOR: no colour\n${shown}`)
      t.match(shown, /^app\.1 \| FORCE_COLOR=\(not set\)$/m)
      t.match(shown, /^app\.2 \| FORCE_COLOR=\(not set\)$/m)
    } else {
      const coloured = (colour, name) => new RegExp(`${ESC}\\[${colour}m${name}${ESC}\\[\\d*m \\| FORCE_COLOR=1`)
      t.match(shown, coloured(36, 'app\\.1'), 'app.1 in cyan; the app told')
      t.match(shown, coloured(33, 'app\\.2'), 'app.2 in yellow')
    }
    tmux('send-keys', 'C-c')
    await until(() => { try { process.kill(lilaPid, 0); return false } catch { return true } }, 'lila to exit',
      { timeout: 20000, every: 50 })
    gone = true
  }
})

t.test('--app-ports, --app-env, --check http, --surge, --stop-signal; SIGKILL after --stop-timeout', { skip: LINUX }, async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-run-options-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const unhealthy = path.join(dir, 'unhealthy')
  fs.writeFileSync(unhealthy, '')
  const [first, , , last] = await restartablePorts(4)
  const env = { APP_IGNORE_TERM: '1', APP_SAY_ENV: 'GREETING', APP_UNHEALTHY_IF: unhealthy }
  const lila = await runApp(t, ['-i', '2', '--app-ports', `${first}-${last}`, '--app-env', 'GREETING=hi',
    '--check', 'http:/healthz', '--surge', '2', '--stop-signal', 'SIGINT', '--stop-timeout', '60s'],
  { env, waitForListening: false })
  lila.statusPort = Number((await lila.waitForLine(/status on http:\/\/127\.0\.0\.1:(\d+)\/status$/))[1])
  // Listening on PORT is not ready while --check fails: lila does not listen yet.
  await until(() => (lila.stdout.match(/^app\.\d \| listening on \d+$/mg) || []).length === 2, 'both instances listening',
    { timeout: 20000, every: 20 })
  t.same((await instances(lila)).map(i => i.state), ['starting', 'starting'], 'listening, yet not ready: /healthz fails')
  t.notMatch(lila.stderr, /listening on 127/, 'lila does not listen yet')
  fs.rmSync(unhealthy)
  const [, , port] = await lila.waitForLine(/listening on (\S+):(\d+) /)
  await settled(lila, 2)
  const before = await instances(lila)
  t.ok(before.every(i => i.port >= first && i.port <= last), `ports from --app-ports: ${before.map(i => i.port)}`)
  t.match(lila.stdout, /^app\.1 \| GREETING=hi$/m, '--app-env reaches the app')
  t.match(lila.stdout, /^app\.2 \| GREETING=hi$/m)
  t.equal((await request(Number(port))).status, 200)

  // Both at once; the old ones ignore SIGTERM, and die of --stop-signal SIGINT at once
  // (with SIGTERM, the roll would wait --stop-timeout, 60s).
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/app: rolling restart \(SIGHUP\): 2 instances, 2 at a time$/)
  await lila.waitForLine(/app: rolling restart done \(SIGHUP\): 2 replaced/)
  const after = await instances(lila)
  t.ok(after.every(i => i.port >= first && i.port <= last && i.generation === 2), 'the new ones in the range too')
  await until(() => groupMembers(before.map(i => i.pid)).length === 0, 'the old instances gone', { timeout: 15000 })
  await lila.stop('SIGKILL')

  // An app that ignores the stop signal: SIGKILL once --stop-timeout passed, and lila exits.
  const stubborn = await runApp(t, ['-i', '1', '--stop-timeout', '1s'], { env: { APP_IGNORE_TERM: '1' } })
  await settled(stubborn, 1)
  const [{ pid }] = await instances(stubborn)
  const { code } = await stubborn.stop('SIGTERM', 20000)
  t.equal(code, 0, 'lila exits once the instance was killed')
  await until(() => groupMembers([pid]).length === 0, 'the instance that ignored SIGTERM gone', { timeout: 15000 })
})

t.test('SIGUSR2 with requests beside the PID file: restart-app served, an upgrade asked too begun once', async t => {
  const { onSigusr2 } = require('../lib/cli/restart-app-command')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-sigusr2-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const pidFile = path.join(dir, 'lila.pid')
  const ask = kind => fs.writeFileSync(`${pidFile}.${kind}`, JSON.stringify({ by: process.pid }), { mode: 0o644 })
  const answer = kind => JSON.parse(fs.readFileSync(`${pidFile}.${kind}.done`, 'utf8'))
  let upgrades = 0
  let rolls = 0
  const handler = onSigusr2({
    pidFile,
    restart: async () => { rolls++; return ['app: rolling restart done (lila restart-app): 2 replaced in 1s'] },
    upgrade: () => { upgrades++ }
  })

  handler() // a bare kill -USR2: an upgrade
  t.same({ rolls, upgrades }, { rolls: 0, upgrades: 1 })
  ask('restart-app')
  handler()
  await until(() => fs.existsSync(`${pidFile}.restart-app.done`), 'the answer')
  t.same(answer('restart-app'), { ok: true, message: 'app: rolling restart done (lila restart-app): 2 replaced in 1s' })
  t.same({ rolls, upgrades }, { rolls: 1, upgrades: 1 }, 'a restart-app request alone: no upgrade')
  fs.rmSync(`${pidFile}.restart-app`)
  fs.rmSync(`${pidFile}.restart-app.done`)

  ask('upgrade') // lila upgrade and lila restart-app at once: one SIGUSR2 for both
  ask('restart-app')
  handler()
  t.same({ rolls, upgrades }, { rolls: 2, upgrades: 2 }, 'both served')
  await until(() => fs.existsSync(`${pidFile}.restart-app.done`), 'the answer')
  fs.rmSync(`${pidFile}.restart-app`)
  fs.rmSync(`${pidFile}.restart-app.done`)
  ask('restart-app') // while that upgrade still runs (its request unanswered)
  handler()
  await until(() => fs.existsSync(`${pidFile}.restart-app.done`), 'the answer')
  t.same({ rolls, upgrades }, { rolls: 3, upgrades: 2 }, 'the upgrade under way is not begun again')

  const none = onSigusr2({ pidFile, restart: () => null, upgrade: () => { upgrades++ } })
  fs.rmSync(`${pidFile}.restart-app`)
  fs.rmSync(`${pidFile}.restart-app.done`)
  fs.rmSync(`${pidFile}.upgrade`)
  ask('restart-app')
  none()
  await until(() => fs.existsSync(`${pidFile}.restart-app.done`), 'the answer')
  t.same(answer('restart-app'), { ok: false, message: `pid ${process.pid} runs no app: lila restart-app is for lila run` })
  t.equal(upgrades, 2, 'no upgrade')
})
