'use strict'

// All cores: the stats sum (pure), the primary's IPC plumbing (gatherStats, broadcast)
// with real lila workers forked from this test process, then --workers 2 through the
// real executable: two pids serve, a killed worker is replaced, SIGTERM drains.

const t = require('tap')
const { EventEmitter } = require('events')
const { sumStats } = require('../lib/admin/sum-stats')
const { runPrimary } = require('../lib/cli/workers')
const { parseCommandLine } = require('../lib/config/argv')
const { LILA, tcpBackend, httpBackend, greetThenEcho, openGreeted, exchange, spawnLila, runLila, request, within, listenOn } = require('./fixtures/helpers')
const { promtoolAccepts } = require('./fixtures/promtool')

const backend = (address, extra = {}) => ({ address, name: null, weight: 1, state: 'up', up: true, downReason: null, draining: false, latency: null, live: 0, total: 0, failures: 0, bytesIn: 0, bytesOut: 0, changedAt: 0, ...extra })
const listener = (name, backends, extra = {}) => ({ name, protocol: 'tcp', mode: 'round-robin', address: { address: '127.0.0.1', family: 'IPv4', port: 4444 }, active: 0, accepted: 0, panic: false, queued: 0, backends, ...extra })

t.test('sumStats: counts add up, states merge, weights and addresses stay', async t => {
  const one = { listeners: [listener('web', [backend('10.0.0.1:80', { total: 5, live: 1, bytesIn: 10, latency: 4, changedAt: 100 }), backend('10.0.0.2:80', { state: 'down', up: false, downReason: 'tcp connection refused', total: 1 })], { accepted: 6, active: 1 })] }
  const two = { listeners: [listener('web', [backend('10.0.0.1:80', { total: 7, bytesIn: 5, latency: 2, changedAt: 300 }), backend('10.0.0.2:80', { total: 2 }), backend('10.0.0.3:80', { total: 1 })], { accepted: 10, panic: true })] }
  const sum = sumStats([one, two])
  t.equal(sum.listeners.length, 1)
  const [web] = sum.listeners
  t.match(web, { name: 'web', protocol: 'tcp', mode: 'round-robin', accepted: 16, active: 1, panic: true, address: { address: '127.0.0.1', port: 4444 } })
  t.same(web.backends.map(b => [b.address, b.total, b.live, b.state, b.up, b.weight]), [
    ['10.0.0.1:80', 12, 1, 'up', true, 1],
    ['10.0.0.2:80', 3, 0, 'up', true, 1],
    ['10.0.0.3:80', 1, 0, 'up', true, 1]
  ], 'a backend up in any worker is up; one only some workers have is there')
  t.equal(web.backends[0].bytesIn, 15)
  t.equal(web.backends[0].latency, 3, 'estimates: the mean')
  t.equal(web.backends[0].changedAt, 300, 'times: the latest')
  t.equal(web.backends[1].downReason, 'tcp connection refused', 'why, from a worker that has it down')
  t.same(sumStats([]), { listeners: [] })
  t.same(sumStats([{ listeners: [listener('a', [], { p99: 5, histogram: [1, 2, 3] })] }, { listeners: [listener('a', [], { p99: 9, histogram: [1, 0, 1, 4] })] }]).listeners[0].histogram, [2, 2, 4, 4], 'number lists add up element by element')
})

// A stand-in for the cluster module: workers that listen when given a config, or
// die at once when `dying` says so.
function fakeCluster (dying = () => false) {
  const forks = []
  let pid = 1000
  return {
    forks,
    setupPrimary () {},
    fork (env) {
      const worker = new EventEmitter()
      worker.process = { pid: ++pid }
      worker.connected = true
      worker.isConnected = () => worker.connected
      worker.send = message => setImmediate(() => {
        if (message.lila === 'config') worker.emit('message', { lila: 'listening', lines: [`listening on 127.0.0.1:1 (tcp, random, 1 backend, ${message.workers} workers)`] })
        if (message.lila === 'stop' || message.lila === 'destroy') worker.exit(0)
      })
      worker.exit = (code, signal = null) => {
        if (!worker.connected) return
        worker.connected = false
        worker.emit('exit', code, signal)
      }
      forks.push({ env, worker })
      setImmediate(() => dying(forks.length) ? worker.exit(1) : worker.emit('message', { lila: 'ready' }))
      return worker
    }
  }
}

t.test('the primary: a worker that keeps dying is restarted less and less often', async t => {
  const { config } = parseCommandLine([':9', '--workers', '2'])
  const lines = []
  const waiters = []
  const stderr = { write: chunk => { lines.push(chunk.trim()); for (const w of waiters.splice(0)) w() } }
  const nextLine = pattern => within(5000, `a line ${pattern}`, new Promise(resolve => {
    const check = () => lines.some(l => pattern.test(l)) ? resolve() : waiters.push(check)
    check()
  }))
  const cluster = fakeCluster(n => n > 2) // the first two start, every replacement dies
  const signals = new EventEmitter()
  let ready
  const readyPromise = new Promise(resolve => { ready = resolve })
  const done = runPrimary(config, { stderr, signals, cluster, onReady: ready })
  await readyPromise
  t.same(cluster.forks.map(f => f.env), [{ LILA_WORKER: '1' }, { LILA_WORKER: '2' }])
  cluster.forks[0].worker.exit(null, 'SIGKILL')
  await nextLine(/^lila: worker 1 \(pid \d+\) exited with code 1; starting another in 400ms$/)
  t.same(lines.filter(l => /worker 1 .*starting another/.test(l)).map(l => / in (\d+ms)$/.exec(l)[1]), ['100ms', '200ms', '400ms'], 'the back-off doubles')
  signals.emit('SIGTERM')
  t.equal(await within(5000, 'the primary to finish', done), 0)
  t.equal(cluster.forks.length, 4, 'no worker is started once stopping')
})

t.test('the primary: gatherStats sums the workers\' snapshots, broadcast reaches each', async t => {
  const http = await httpBackend(t, 'h')
  const { config } = parseCommandLine(['rr', http.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--workers', '2', '--log-level', 'warn'])
  const signals = new EventEmitter()
  let stderr = ''
  let ready
  const readyPromise = new Promise(resolve => { ready = resolve })
  const done = runPrimary(config, {
    stderr: { write: chunk => { stderr += chunk } }, signals, exec: LILA, args: [], execArgv: [], onReady: ready
  })
  const { gatherStats, broadcast } = await within(15000, 'the workers to listen', readyPromise)

  const first = await gatherStats()
  t.equal(first.workers.length, 2)
  t.same(first.workers.map(w => w.index), [1, 2])
  t.ok(first.workers.every(w => Number.isInteger(w.pid) && w.listeners.length === 1), 'each worker\'s own snapshot, with its pid')
  const port = first.listeners[0].address.port

  for (let i = 0; i < 10; i++) t.equal((await request(port)).status, 200)
  const stats = await gatherStats()
  t.equal(stats.listeners[0].backends[0].total, 10, 'exactly the requests sent, summed over the workers')
  t.equal(stats.workers.reduce((sum, w) => sum + w.listeners[0].backends[0].total, 0), 10)
  t.equal(http.requests, 10)

  const answers = await broadcast({ op: 'drain', backend: http.address })
  t.same(answers.map(a => [a.index, a.error, a.value && a.value.message]), [[1, undefined, `${http.address} drained: by an operator`], [2, undefined, `${http.address} drained: by an operator`]], 'every worker applies a control action')
  const unknown = await broadcast({ op: 'drain', backend: '127.0.0.1:1' })
  t.same(unknown.map(a => a.status), [404, 404], 'a control error keeps its status across the channel')

  signals.emit('SIGTERM')
  t.equal(await within(15000, 'the primary to finish', done), 0)
  t.match(stderr, /^lila: listening on 127\.0\.0\.1:\d+ \(http, round-robin, 1 backend, 2 workers\)\n$/, 'at --log-level warn the primary says only where it listens')
})

t.test('--workers 2: two pids serve; one killed is replaced; SIGTERM drains, exit 0', async t => {
  const echo = await tcpBackend(t, 'echo', greetThenEcho)
  const lila = await spawnLila(t, ['rr', echo.address, '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--workers', '2', '--log-level', 'debug'])
  t.match(lila.listening, /^lila: listening on 127\.0\.0\.1:\d+ \(tcp, round-robin, 1 backend, 2 workers\)$/)
  const [, pid1, pid2] = (await lila.waitForLine(/^lila: workers: 1 \(pid (\d+)\), 2 \(pid (\d+)\)$/)).map(Number)
  t.not(pid1, pid2)

  // The kernel decides which worker accepts (SCHED_NONE), not in strict turn: connect
  // until both workers have served one (bounded), every connection echoed.
  const closedLines = () => lila.lines.filter(l => /: closed, /.test(l))
  const servedBy = async () => {
    const before = closedLines().length
    const workers = new Set()
    const echoes = []
    for (let n = 1; n <= 200 && workers.size < 2; n++) {
      echoes.push((await exchange(lila.port, 'x')).data)
      await lila.waitForLine(/: closed, /, { count: before + n })
      workers.add(/^lila: worker (\d+): /.exec(closedLines()[before + n - 1])[1])
    }
    t.ok(echoes.every(data => data === 'echo\nx'), `${echoes.length} connections, each echoed`)
    return workers
  }
  t.same([...await servedBy()].sort(), ['1', '2'], 'both workers served connections')

  process.kill(pid1, 'SIGKILL')
  await lila.waitForLine(new RegExp(`^lila: worker 1 \\(pid ${pid1}\\) was killed by SIGKILL; starting another in 100ms$`))
  const [, pid3] = (await lila.waitForLine(/^lila: worker 1 is back \(pid (\d+)\)$/)).map(Number)
  t.not(pid3, pid1)
  t.same([...await servedBy()].sort(), ['1', '2'], 'traffic goes on, through the new worker too')

  const long = await openGreeted(lila.port)
  lila.child.kill('SIGTERM')
  await lila.waitForLine(/^lila: SIGTERM: stopping 2 workers; letting open connections finish \(up to 30s\)$/)
  long.socket.write('still')
  const echoed = await within(5000, 'the echo', new Promise(resolve => long.socket.once('data', resolve)))
  t.equal(echoed.toString(), 'still', 'an open connection goes on while its worker drains')
  long.socket.end()
  const { code } = await within(15000, 'lila to exit', lila.exited)
  t.equal(code, 0)
  t.match(lila.lines[lila.lines.length - 1], /^lila: stopped$/)
})

t.test('--workers with a config file: SIGHUP is read once by the primary and applied by every worker', async t => {
  const fs = require('fs')
  const os = require('os')
  const path = require('path')
  const [a, b] = await Promise.all(['a', 'b'].map(name => httpBackend(t, name)))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-workers-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'lila.json')
  const write = backends => fs.writeFileSync(file, JSON.stringify({ workers: 2, check: 'none', listeners: [{ host: '127.0.0.1', port: 0, protocol: 'http', backends }] }))
  write([a.address])
  const lila = await spawnLila(t, ['--config', file])
  write([b.address])
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/^lila: reloaded \(2 changes\)$/)
  t.equal(lila.lines.filter(l => /^lila: reload: http:0: backend/.test(l)).length, 2, 'the changes are said once, not once per worker')
  for (let i = 0; i < 6; i++) t.equal((await request(lila.port)).body.toString(), 'b\n', 'every worker took the new backend')
  fs.writeFileSync(file, '{')
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/^lila: reload refused: .*invalid JSON at line 1, column 2/)
  t.equal((await request(lila.port)).status, 200)
  t.equal((await lila.stop()).code, 0)
})

t.test('--workers: a port that is taken stops lila at start, exit 1', async t => {
  const net = require('net')
  const taken = net.createServer()
  await listenOn(t, taken)
  const result = await runLila([':9', '--host', '127.0.0.1', '--port', String(taken.address().port), '--workers', '2', '--check', 'none'])
  t.equal(result.code, 1)
  t.match(result.stderr, new RegExp(`^lila: worker \\d: cannot listen on 127\\.0\\.0\\.1:${taken.address().port}: address already in use\\n`))
})

t.test('--workers 2 --status-port: the primary reports the sum and controls every worker', async t => {
  const { statusJson, settled } = require('./fixtures/helpers')
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', a.address, b.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--workers', '2', '--status-port', '0'])
  t.same(lila.lines.filter(l => /status on http:/.test(l)), [`lila: status on http://127.0.0.1:${lila.statusPort}/status`], 'one status listener, the primary\'s: no worker printed one')
  for (let i = 0; i < 20; i++) t.equal((await request(lila.port)).status, 200)
  const snapshot = await settled(lila)
  const totals = snapshot.listeners[0].backends.map(x => x.total)
  t.same(totals, [a.requests, b.requests], 'every request counted once, summed over the workers')
  t.equal(totals[0] + totals[1], 20)
  t.equal(snapshot.workers.length, 2)
  const [web] = snapshot.listeners
  t.same(web.responses, { '1xx': 0, '2xx': 20, '3xx': 0, '4xx': 0, '5xx': 0 }, 'responses by class, summed')
  t.equal(web.requestTime.count, 20, 'request durations, summed')
  t.same(web.requestTime.bounds, snapshot.workers[0].listeners[0].requestTime.bounds, 'over the same buckets')
  t.ok(snapshot.workers.every(w => w.process.residentBytes > 0 && w.process.openFds > 0), 'each worker\'s own process figures')
  t.notOk('process' in snapshot, 'which are not summed')

  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  promtoolAccepts(t, metrics)
  t.match(metrics, /^lila_listener_responses_total\{listener="[^"]+",code="2xx"\} 20$/m, '/metrics: the sum')
  t.match(metrics, /^process_resident_memory_bytes \d+$/m, 'process_*: the primary\'s, which serves /metrics')
  for (const w of snapshot.workers) {
    t.match(metrics, new RegExp(`^lila_worker_resident_memory_bytes\\{worker="${w.index}"\\} \\d+$`, 'm'), `worker ${w.index}'s memory`)
    t.match(metrics, new RegExp(`^lila_worker_open_fds\\{worker="${w.index}"\\} \\d+$`, 'm'), 'and descriptors')
  }
  const drained = await request(lila.statusPort, { method: 'POST', path: `/backends/${a.address}/drain` })
  t.equal(drained.status, 200, drained.body.toString())
  const [aBefore, bBefore] = [a.requests, b.requests]
  for (let i = 0; i < 10; i++) await request(lila.port)
  t.equal(a.requests, aBefore, 'drained on both workers: no new request reached it')
  t.equal(b.requests, bBefore + 10)
  const after = await statusJson(lila)
  t.same(after.workers.map(w => w.listeners[0].backends[0].status), ['drained', 'drained'])
  t.equal((await lila.stop()).code, 0)
})

t.test('--workers 2 --access-log: the workers write the access log; --dashboard is refused in words', async t => {
  const a = await httpBackend(t, 'a')
  const lila = await spawnLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--workers', '2', '--access-log', '--dashboard'])
  t.ok(lila.lines.includes('lila: --dashboard does not run with --workers; running without it'), lila.stderr)
  for (let i = 0; i < 3; i++) t.equal((await request(lila.port)).status, 200)
  t.equal((await lila.stop()).code, 0)
  const lines = lila.stdout.split('\n').filter(Boolean)
  t.equal(lines.length, 3, `one access line per request, written before the workers exit:\n${lila.stdout}`)
  t.ok(lines.every(line => / -> \S+ "GET \/ HTTP\/1\.1" 200 in=\d+ out=\d+ /.test(line)), lines.join('\n'))
})

t.test('--workers with several listeners: each listening line carries the listener\'s name', async t => {
  const fs = require('fs')
  const os = require('os')
  const path = require('path')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-workers-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'lila.json')
  const listener = name => ({ name, host: '127.0.0.1', port: 0, backends: ['127.0.0.1:9'] })
  fs.writeFileSync(file, JSON.stringify({ workers: 2, check: 'none', listeners: [listener('web'), listener('db')] }))
  const lila = await spawnLila(t, ['--config', file])
  t.match(lila.listening, /^lila: web: listening on 127\.0\.0\.1:\d+ \(tcp, random, 1 backend, 2 workers\)$/)
  await lila.waitForLine(/^lila: db: listening on 127\.0\.0\.1:\d+ \(tcp, random, 1 backend, 2 workers\)$/)
  t.equal((await lila.stop()).code, 0)
})
