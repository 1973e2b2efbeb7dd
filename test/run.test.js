'use strict'

// lila run through the spawned executable: rolling restarts under wrk (keep-alive and a
// connection per request), crashes, a broken new version, logs, shutdown and kill -9,
// an ES module app and Python's http.server. The app is test/fixtures/app.js.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { request, until, statusJson, within, spawnLila } = require('./fixtures/helpers')
const { startWrk } = require('./fixtures/upgrade')
const { tool } = require('./fixtures/tools')
const { APP, runApp, instances, ready, settled, groupMembers } = require('./fixtures/run')

const NO_WRK = tool('wrk').skip
const LINUX = process.platform === 'linux' ? false : 'reads process groups from /proc (Linux)'
t.setTimeout(180000)

// Every `ms` until stopped: the least number of ready instances /status.json showed.
function watchReady (lila, ms = 20) {
  let least = Infinity
  const state = { stopped: false }
  let polls = 0
  const done = (async () => {
    for (let i = 0; i < 100000 && !state.stopped; i++) {
      least = Math.min(least, (await ready(lila)).length)
      polls++
      await new Promise(resolve => setTimeout(resolve, ms)) // the poll's pace
    }
  })()
  return { stop: async () => { state.stopped = true; await done; return { least, polls } } }
}

t.test('three rolling restarts (SIGHUP) under wrk: no failed request, every pid replaced, never fewer than 3 ready', { skip: NO_WRK }, async t => {
  const lila = await runApp(t, ['-i', '3'])
  await settled(lila, 3)
  const before = (await instances(lila)).map(i => i.pid)
  const [, pid] = /pid (\d+)/.exec(String((await request(lila.port)).body))
  t.ok(before.includes(Number(pid)), 'the pid lila shows is the app\'s own')
  const url = `http://127.0.0.1:${lila.port}/`
  const loads = [startWrk(url), startWrk(url, ['-H', 'Connection: close'])]
  t.teardown(() => loads.forEach(load => load.kill()))
  const watcher = watchReady(lila)
  for (let i = 1; i <= 3; i++) {
    lila.child.kill('SIGHUP')
    await lila.waitForLine(/app: rolling restart done \(SIGHUP\): 3 replaced/, { count: i })
  }
  const { least, polls } = await watcher.stop()
  const [keepAlive, perRequest] = await Promise.all(loads.map(load => load.stop()))
  for (const [name, wrk] of [['keep-alive', keepAlive], ['Connection: close', perRequest]]) {
    t.ok(wrk.requests > 0, `wrk ${name}: ${wrk.requests} requests`)
    t.same(wrk.errors, { connect: 0, read: 0, write: 0, timeout: 0 }, `wrk ${name}: no socket error\n${wrk.text}`)
    t.equal(wrk.non2xx, 0, `wrk ${name}: every answer 200`)
  }
  t.ok(polls > 3, `/status.json read ${polls} times during the rolls`)
  t.equal(least, 3, 'never fewer than 3 ready instances')
  const after = await instances(lila)
  t.equal(after.length, 3)
  t.same(after.filter(i => before.includes(i.pid)), [], 'every pid replaced')
  t.same(after.map(i => i.generation), [4, 4, 4], 'each instance in its fourth generation')
  const stats = (await statusJson(lila)).listeners[0]
  t.same(stats.app.restarts, { signal: 9 }, 'nine instances replaced, for the signal')
})

t.test('kill -9 of an instance under load, a broken new version, a crash loop said once', { skip: NO_WRK }, async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-run-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const broken = path.join(dir, 'broken')
  const lila = await runApp(t, ['-i', '2'], { env: { APP_FAIL_IF: broken } })
  await settled(lila, 2)
  const url = `http://127.0.0.1:${lila.port}/`

  // kill -9 under load: retried elsewhere, and back within its backoff (100 ms).
  const load = startWrk(url, ['-c4'])
  t.teardown(() => load.kill())
  await until(async () => (await request(lila.port)).status === 200, 'a request through lila')
  const [, second] = await instances(lila)
  process.kill(second.pid, 'SIGKILL')
  await lila.waitForLine(/app\.2 \(pid \d+\) killed by SIGKILL; starting it again in 100ms/)
  await lila.waitForLine(/app\.2 ready on port \d+ \(pid \d+, generation 2\)/)
  await settled(lila, 2)
  const wrk = await load.stop()
  t.ok(wrk.requests > 0, `wrk: ${wrk.requests} requests`)
  t.same(wrk.errors, { connect: 0, read: 0, write: 0, timeout: 0 }, `no socket error\n${wrk.text}`)
  t.equal(wrk.non2xx, 0, 'every answer 200')

  // A new version that exits 1 at start: the roll stops, the old instances serve on.
  const pids = (await instances(lila)).map(i => i.pid)
  fs.writeFileSync(broken, 'cannot find module ./oops')
  lila.child.kill('SIGHUP')
  const [stopped] = await lila.waitForLine(/app: rolling restart stopped: .*/)
  t.match(stopped, /the new app\.1 exited with code 1; its last line: cannot find module \.\/oops; the old instances serve on \(0 of 2 replaced\)/)
  t.same((await instances(lila)).map(i => i.pid), pids, 'the old instances serve on')
  for (let i = 0; i < 4; i++) t.equal((await request(lila.port)).status, 200)

  // A crash loop: said once; its exits are not said one by one.
  process.kill(pids[0], 'SIGKILL')
  await lila.waitForLine(/app\.1 is crash-looping \(5 exits in a row/)
  await until(async () => (await statusJson(lila)).listeners[0].app.restarts.crash >= 7,
    'seven exits', { timeout: 20000, every: 50 })
  t.equal(lila.lines.filter(line => /crash-looping/.test(line)).length, 1, 'the crash loop said once')
  t.equal(lila.lines.filter(line => /app\.1 .*starting it again in/.test(line)).length, 4, 'the four exits before it said each')
  t.equal((await request(lila.port)).status, 200, 'app.2 serves on')
  // Fixed: back at its next start, no longer crash-looping once it stayed up.
  fs.rmSync(broken)
  await settled(lila, 2, 40000)
})

t.test('two instances printing 10,000 lines at once: every line whole and prefixed; a long line cut and marked', async t => {
  const lila = await runApp(t, ['-i', '2'], { env: { APP_LINES: '10000', APP_LONG_LINE: '100000' } })
  await settled(lila, 2)
  await until(() => lila.stdout.split('\n').filter(line => /^app\.\d \| y/.test(line)).length === 2, 'both long lines',
    { timeout: 20000 })
  await lila.stop()
  const lines = lila.stdout.split('\n').slice(0, -1)
  const next = { 1: 1, 2: 1 }
  let bad = 0
  for (const line of lines) {
    const match = /^app\.([12]) \| (?:listening on \d+|line (\d+) of instance ([12]) x*|(y+) \[lila: line cut at 64 KiB\])$/.exec(line)
    if (match === null) {
      bad++
      continue
    }
    if (match[2] !== undefined) {
      if (match[1] !== match[3] || Number(match[2]) !== next[match[1]]) bad++
      next[match[1]]++
    }
    if (match[4] !== undefined && match[4].length !== 65536) bad++ // cut at 64 KiB
  }
  t.equal(bad, 0, 'every line whole, prefixed by its own instance, in order')
  t.same(next, { 1: 10001, 2: 10001 }, '10,000 lines of each')
})

t.test('SIGTERM to lila, and kill -9 of lila: no instance process is left', { skip: LINUX }, async t => {
  for (const signal of ['SIGTERM', 'SIGKILL']) {
    const lila = await runApp(t, ['-i', '2'])
    await settled(lila, 2)
    const groups = (await instances(lila)).map(i => i.pid)
    t.ok(groupMembers(groups).length >= 2, `${signal}: the instances and their watchers run`)
    const { code, signal: by } = await lila.stop(signal)
    t.same({ code, signal: by }, signal === 'SIGTERM' ? { code: 0, signal: null } : { code: null, signal: 'SIGKILL' })
    await until(() => groupMembers(groups).length === 0, `no process of groups ${groups} left after ${signal} to lila`,
      { timeout: 15000, every: 20 })
    t.pass(`${signal}: nothing left`)
  }
})

t.test('an ES module app and Python\'s http.server run', async t => {
  const esm = await runApp(t, ['-i', '2'], { command: `node ${path.join(__dirname, 'fixtures/esm-app/server.js')}` })
  await settled(esm, 2)
  const answers = new Set()
  for (let i = 0; i < 20 && answers.size < 2; i++) answers.add(String((await request(esm.port)).body))
  t.ok([...answers].every(a => /^esm instance [12] on \d+\n$/.test(a)), [...answers].join(''))
  t.equal(answers.size, 2, 'both instances answer')
  esm.child.kill('SIGHUP')
  await esm.waitForLine(/app: rolling restart done \(SIGHUP\): 2 replaced/)

  if (tool('python3').skip) return t.skip(tool('python3').skip)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-run-py-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.writeFileSync(path.join(dir, 'hello.txt'), 'hello from python\n')
  const py = await runApp(t, ['-i', '2', '--app-cwd', dir], { command: 'python3 -m http.server $PORT --bind 127.0.0.1' })
  await settled(py, 2)
  const res = await request(py.port, { path: '/hello.txt' })
  t.equal(res.status, 200)
  t.equal(String(res.body), 'hello from python\n')
  const groups = (await instances(py)).map(i => i.pid)
  await py.stop()
  if (LINUX) return
  // (A process SIGKILLed a moment ago may still be on its way out.)
  await until(() => groupMembers(groups).length === 0, 'python\'s processes gone', { timeout: 10000, every: 20 })
  t.pass('python stopped')
})

t.test('--exit-on-crash-loop: lila exits 1 once every instance is crash-looping; --app-log-format json', async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-run-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const broken = path.join(dir, 'broken')
  const lila = await runApp(t, ['-i', '1', '--exit-on-crash-loop', '--app-log-format', 'json'], { env: { APP_FAIL_IF: broken } })
  await settled(lila, 1)
  const [{ pid }] = await instances(lila)
  fs.writeFileSync(broken, 'broken for good')
  process.kill(pid, 'SIGKILL')
  const { code } = await within(30000, 'lila to exit', lila.exited)
  t.equal(code, 1)
  t.match(lila.stderr, /app\.1 is crash-looping \(5 exits in a row/)
  t.match(lila.stderr, /every instance of the app is crash-looping \(--exit-on-crash-loop\): exiting/)
  const [first] = lila.stdout.split('\n')
  t.match(JSON.parse(first), { app: 'app', instance: 1, stream: 'stdout', line: /^listening on \d+$/ })
})

t.test('an app that never listens on PORT is said as such, and lila exits 1', async t => {
  const lila = await runApp(t, ['-i', '1', '--ready-timeout', '1s'], { env: { APP_START_DELAY: '600000' }, waitForListening: false })
  const { code } = await within(30000, 'lila to exit', lila.exited)
  t.equal(code, 1)
  t.match(lila.stderr, /lila: app did not start: app\.1 never listened on \d+ within 1s/)
})

t.test('app lines say their listener once a reload gives another listener an app, and plain "app" once it goes', async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-run-names-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'lila.json')
  const listener = name => ({ name, port: 0, protocol: 'http', run: { command: `node ${APP}`, instances: 1 } })
  const write = names => fs.writeFileSync(file, JSON.stringify({ host: '127.0.0.1', listeners: names.map(listener) }))
  const linesOf = prefix => (lila.stdout.match(new RegExp(`^${prefix}\\.1 \\| listening on \\d+$`, 'mg')) || []).length
  const lines = (prefix, count, what) => until(() => linesOf(prefix) >= count, what, { timeout: 20000, every: 20 })
  write(['web'])
  const lila = await spawnLila(t, ['--config', file])
  await lines('app', 1, 'one app: its lines say "app"')

  write(['web', 'api']) // api starts its app; web's rolls (SIGHUP), its new instance says so
  lila.child.kill('SIGHUP')
  await lines('api', 1, 'the new listener\'s app says "api"')
  await lines('web', 1, 'the kept listener\'s new instance says "web"')

  write(['web']) // api goes; web's app rolls again, its lines plain "app" once more
  lila.child.kill('SIGHUP')
  await lines('app', 2, 'one app again: "app"')
  t.equal(linesOf('api'), 1)
  t.equal((await lila.stop()).code, 0)
})
