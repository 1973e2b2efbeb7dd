'use strict'

// Faults injected at run time (docs/faults.md): --fault from the start, the admin API
// (POST and DELETE /backends/ADDR/fault), the dashboard's `f`; what each kind does to
// HTTP/1.1, HTTP/2 and tcp clients; the status, the metrics and the log line that ends
// one. (test/faults.test.js is another matter: lila under hostile backends.)

const t = require('tap')
const net = require('net')
const { EventEmitter } = require('events')
const {
  spawnLila, startLila, httpBackend, request, tcpBackend, exchange, openGreeted, curl, statusJson, settled,
  until, within, captureLog
} = require('./fixtures/helpers')
const { h2connect, h2request, h2Backend } = require('./fixtures/h2')
const { Fault } = require('../lib/upstream/fault')
const { describeFault } = require('../lib/format')
const { render } = require('../lib/admin/dashboard')
const { handleKey, createView, FAULT_CYCLE } = require('../lib/admin/dashboard-keys')
const { startDashboard } = require('../lib/admin/terminal')
const { controlFrom } = require('../lib/admin/control')
const { renderPage } = require('../lib/admin/status-page')
const { renderMetrics } = require('../lib/admin/metrics')
const { sumStats } = require('../lib/admin/sum-stats')
const { parseFaultSettings } = require('../lib/config/backend-spec')

const TOKEN = 'fault-drill-token'
const auth = { Authorization: `Bearer ${TOKEN}` }

const backendOf = (snapshot, address) => snapshot.listeners[0].backends.find(b => b.address === address)

function admin (lila, method, path, headers = auth) {
  return request(lila.statusPort, { method, path, headers })
}

t.test('--fault: an injected 503 for 2s, then the backend answers again; counted, shown, ended in the log', async t => {
  const a = await httpBackend(t, 'A')
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--eject-after', '0', '--fault', `${a.address},error=503,for=2s`])
  await lila.waitForLine(/fault injected: error 503 \(2s left\)/)
  const during = await request(lila.port)
  t.equal(during.status, 503, 'lila answers the fault')
  t.match(during.body.toString(), /fault injected on backend 127\.0\.0\.1:\d+/)
  t.equal(a.requests, 0, 'the backend never saw it')
  const shown = backendOf(await statusJson(lila), a.address)
  t.match(shown.fault, { errorStatus: 503, delayMs: 0, reset: false, rate: 1 }, '/status.json shows the fault')
  t.ok(shown.fault.leftMs >= 0 && shown.fault.leftMs <= 2000, 'with what is left of it')
  t.same(shown.faultsInjected, { error: 1 })
  const page = await request(lila.statusPort, { path: '/status' })
  t.match(page.body.toString(), /fault injected<\/b> \(error 503 \(\d+s left\)\)/, 'the page says it, with its time left')
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, new RegExp(`lila_backend_faults_injected_total\\{listener="[^"]+",backend="${a.address}",kind="error"\\} 1`))
  t.match(metrics, new RegExp(`lila_backend_fault_active\\{listener="[^"]+",backend="${a.address}"\\} 1`))

  await lila.waitForLine(/backend 127\.0\.0\.1:\d+ fault ended after 2s: error 503; \d+ requests? struck/)
  const after = await request(lila.port)
  t.equal(after.status, 200, 'answered by the backend again')
  t.equal(after.body.toString(), 'A\n')
  const snapshot = await statusJson(lila)
  t.equal(backendOf(snapshot, a.address).fault, null, 'no fault shown')
  t.same(backendOf(snapshot, a.address).faultsInjected, { error: 1 }, 'the count stays')
})

t.test('admin API: token, bad parameters, a delay on one backend only, DELETE', async t => {
  const a = await httpBackend(t, 'A')
  const b = await httpBackend(t, 'B')
  const lila = await spawnLila(t, ['round-robin', a.address, b.address, '--protocol', 'http', '--port', '0',
    '--status-port', '0', '--status-token', TOKEN])
  const path = `/backends/${a.address}/fault`

  const refused = await admin(lila, 'POST', `${path}?error=503`, {})
  t.equal(refused.status, 403, 'no token: refused')
  t.match(refused.body.toString(), /changes need the --status-token/)
  const wrong = await admin(lila, 'POST', `${path}?error=503`, { Authorization: 'Bearer not-the-token' })
  t.equal(wrong.status, 403, 'a wrong token: refused')
  t.equal(backendOf(await statusJson(lila), a.address).fault, null, 'nothing injected')

  const bad = [
    ['?delay=2', 'invalid fault setting "delay=2" in the query "?delay=2": expected delay=DUR with a unit, e.g. 2s or 500ms'],
    ['?error=200', 'invalid fault setting "error=200" in the query "?error=200": expected error=CODE with CODE from 400 to 599, e.g. 503'],
    ['?error=503&rate=1.5', 'invalid fault setting "rate=1.5" in the query "?error=503&rate=1.5": expected rate=R from 0 to 1, or a percentage, e.g. 0.5 or 50%'],
    ['?error=503&reset=1', 'error=503 and reset=1 in the query "?error=503&reset=1": expected one of them (a request is answered or reset)'],
    ['?for=10s', 'no fault in the query "?for=10s": expected delay=DUR, error=CODE or reset=1'],
    ['?error=503&colour=red', 'invalid fault setting "colour=red" in the query "?error=503&colour=red": expected delay=DUR, error=CODE, reset=1, rate=R or for=DUR']
  ]
  for (const [query, message] of bad) {
    const res = await admin(lila, 'POST', path + query)
    t.equal(res.status, 400, `${query}: 400`)
    t.equal(res.body.toString(), `${message}\n`, `${query}: says what was wrong`)
  }
  const unknown = await admin(lila, 'POST', '/backends/127.0.0.1:1/fault?error=503')
  t.equal(unknown.status, 404, 'a backend lila does not have: 404')
  const get = await admin(lila, 'GET', path)
  t.equal(get.status, 405)
  t.equal(get.headers.allow, 'POST, DELETE')

  // A delay that outlasts the test holds A's requests, while B's are answered.
  const set = await admin(lila, 'POST', `${path}?delay=1h`)
  t.equal(set.status, 200)
  t.match(set.body.toString(), /^127\.0\.0\.1:\d+ fault: delay 3600s \(60s left\)\n$/, 'for=: 60s unless said')
  await lila.waitForLine(/fault injected: delay 3600s/)
  const held = []
  const answers = []
  for (let i = 0; i < 4; i++) {
    const req = require('http').request({ host: '127.0.0.1', port: lila.port, path: `/${i}`, agent: false })
    req.on('response', res => { res.resume(); res.on('end', () => answers.push(res.statusCode)) })
    req.on('error', () => {})
    req.end()
    held.push(req)
  }
  await until(() => answers.length === 2, 'B to answer its two')
  const during = await statusJson(lila)
  t.equal(backendOf(during, a.address).live, 2, 'two requests held on A')
  t.same(backendOf(during, a.address).faultsInjected, { delay: 2 })
  t.same(backendOf(during, b.address).faultsInjected, {}, 'none on B')
  t.equal(a.requests, 0, 'A saw none of them yet')
  t.equal(b.requests, 2)
  t.equal(backendOf(during, a.address).fault.holding, 2, 'the fault says what it holds')
  for (const req of held) req.destroy() // clients that give up while held

  // Clearing the fault lets what it held go on at once: no hold outlives its fault.
  const cleared = await admin(lila, 'DELETE', path)
  t.equal(cleared.status, 200)
  t.match(cleared.body.toString(), /^127\.0\.0\.1:\d+ fault cleared\n$/)
  await lila.waitForLine(/fault cleared: delay 3600s; 2 requests struck/)
  await settled(lila)
  const again = await admin(lila, 'DELETE', path)
  t.match(again.body.toString(), /had no fault/, 'DELETE again: nothing to clear')
  const before = a.requests // the held ones went on when the fault ended
  for (let i = 0; i < 4; i++) t.equal((await request(lila.port)).status, 200, `request ${i} after DELETE: served`)
  t.equal(a.requests, before + 2, 'A serves again')
})

t.test('rate=50%: about half of the requests are struck, each counted', async t => {
  const a = await httpBackend(t, 'A')
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--eject-after', '0'])
  const set = await admin(lila, 'POST', `/backends/${a.address}/fault?error=503&rate=50%25&for=10m`, {})
  t.equal(set.status, 200, 'on loopback without a token: allowed')
  const N = 200
  let struck = 0
  for (let i = 0; i < N; i++) {
    const res = await request(lila.port)
    if (res.status === 503) struck++
    else t.equal(res.status, 200)
  }
  // 50% of 200: 100, with a standard deviation of about 7; this range misses once in
  // far more runs than the suite will ever have.
  t.ok(struck >= 40 && struck <= 160, `${struck} of ${N} struck`)
  t.same(backendOf(await statusJson(lila), a.address).faultsInjected, { error: struck }, 'each one counted')
  t.equal(a.requests, N - struck, 'the others reached the backend')
})

t.test('a rate draws with the random it is given', async t => {
  const draws = [0.1, 0.9, 0.49, 0.5, 0.2]
  const fault = new Fault({ status: 503, rate: 0.5 }, { now: () => 0, random: () => draws.shift() })
  t.same([1, 2, 3, 4, 5].map(() => fault.strikes()), [true, false, true, false, true])
  t.equal(fault.struck, 3)
  const always = new Fault({ reset: true }, { random: () => t.fail('rate 1 draws nothing') })
  t.ok(always.strikes())
  const never = new Fault({ delay: 10, rate: 0 }, { random: () => 0 })
  t.notOk(never.strikes(), 'rate 0: none')
})

t.test('an injected 503 is the backend\'s answer to lila: retried on the other backend, then ejected', async t => {
  const a = await httpBackend(t, 'A')
  const b = await httpBackend(t, 'B')
  const lila = await spawnLila(t, ['round-robin', a.address, b.address, '--protocol', 'http', '--port', '0',
    '--status-port', '0', '--fault', `${a.address},error=503,for=1m`])
  for (let i = 0; i < 10; i++) {
    const res = await request(lila.port)
    t.equal(res.status, 200, `GET ${i}: retried on B`)
  }
  await lila.waitForLine(/backend 127\.0\.0\.1:\d+ down: 5 answers of 503 in a row/)
  const post = await request(lila.port, { method: 'POST', body: 'x' })
  t.equal(post.status, 200, 'A is out: B takes a POST too')
  t.equal(a.requests, 0, 'A itself saw nothing')
  const snapshot = await statusJson(lila)
  t.equal(backendOf(snapshot, a.address).status, 'down')
  t.equal(backendOf(snapshot, a.address).faultsInjected.error, 5)
  t.match(snapshot.listeners[0].retries, { 503: 5 })
})

t.test('HTTP/2 clients, and HTTP/1.1 clients to HTTP/2 backends: the same faults', async t => {
  const a = await httpBackend(t, 'A')
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--eject-after', '0'])
  const path = `/backends/${a.address}/fault`
  t.equal((await admin(lila, 'POST', `${path}?error=503`, {})).status, 200)
  const session = await h2connect(t, lila.port)
  const answered = await h2request(session)
  t.equal(answered.status, 503, 'an HTTP/2 stream answered 503')
  t.match(answered.body.toString(), /fault injected/)
  t.equal((await admin(lila, 'POST', `${path}?reset=1`, {})).status, 200)
  const reset = await h2request(session)
  t.equal(reset.rstCode, 2, 'the stream reset (INTERNAL_ERROR)')
  const other = await h2request(session, { path: '/after' })
  t.equal(other.rstCode, 2, 'the connection lives on for the next stream')
  const viaCurl = await curl(['--http2-prior-knowledge', '-o', '/dev/null', `http://127.0.0.1:${lila.port}/`])
  t.not(viaCurl.code, 0, `curl sees the stream fail (${viaCurl.stderr.trim()})`)
  t.equal(a.requests, 0)

  const h2 = await h2Backend(t, 'H2')
  const lila2 = await spawnLila(t, [h2.address, '--protocol', 'http', '--backend-protocol', 'h2', '--port', '0',
    '--status-port', '0', '--eject-after', '0', '--fault', `${h2.address},error=502`])
  const res = await request(lila2.port)
  t.equal(res.status, 502, 'an HTTP/1.1 request to an HTTP/2 backend answered 502')
  const reset2 = await admin(lila2, 'POST', `/backends/${h2.address}/fault?reset`, {})
  t.equal(reset2.status, 200)
  const cut = await request(lila2.port)
  t.equal(cut.error.code, 'ECONNRESET', 'its connection reset')
  t.same(backendOf(await statusJson(lila2), h2.address).faultsInjected, { error: 1, reset: 1 })
})

t.test('tcp: delay, reset and error with real sockets', async t => {
  const a = await tcpBackend(t, 'A')
  const lila = await spawnLila(t, [a.address, '--port', '0', '--status-port', '0', '--eject-after', '0',
    '--check', 'none']) // probes would be connections too
  const path = `/backends/${a.address}/fault`

  t.equal((await admin(lila, 'POST', `${path}?delay=300ms`, {})).status, 200)
  const greeted = await openGreeted(lila.port)
  t.equal(greeted.name, 'A', 'held, then passed to the backend')
  greeted.socket.destroy()
  let snapshot = await settled(lila)
  t.same(backendOf(snapshot, a.address).faultsInjected, { delay: 1 })
  t.ok(backendOf(snapshot, a.address).responseTime.sum >= 300, 'the hold counts in its latency sample')

  t.equal((await admin(lila, 'POST', `${path}?delay=1h`, {})).status, 200)
  const socket = net.connect({ port: lila.port, host: '127.0.0.1' })
  socket.on('error', () => {})
  let got = ''
  socket.on('data', chunk => { got += chunk })
  await until(async () => backendOf(await statusJson(lila), a.address).live === 1, 'the connection held')
  t.equal(got, '', 'nothing from the backend while held')
  t.equal(backendOf(await statusJson(lila), a.address).fault.holding, 1)
  t.equal(a.connections, 1, 'the backend saw none of it while held')
  socket.destroy() // a FIN: held like one while connecting, passed on once connected
  t.equal((await admin(lila, 'DELETE', path, {})).status, 200, 'cleared: the hold lets go')
  await settled(lila)

  t.equal((await admin(lila, 'POST', `${path}?reset=1`, {})).status, 200)
  const reset = await exchange(lila.port, 'hello')
  t.equal(reset.error && reset.error.code, 'ECONNRESET', 'reset')
  t.equal(reset.data, '')

  t.equal((await admin(lila, 'POST', `${path}?error=503`, {})).status, 200)
  const closed = await exchange(lila.port, 'hello')
  t.equal(closed.data, '', 'closed at once, without a byte')
  snapshot = await settled(lila)
  t.same(backendOf(snapshot, a.address).faultsInjected, { delay: 2, reset: 1, error: 1 })
  t.equal(backendOf(snapshot, a.address).failures, 1, 'the error counts against the backend, as a close would')
  t.equal(a.connections, 2, 'the backend saw the delayed connections only')
})

t.test('the dashboard: f cycles 503, 2s delay, reset, none on the selected backend', async t => {
  const a = await httpBackend(t, 'A')
  const { log } = captureLog()
  const { lb, port } = await startLila(t, [a.address, '--protocol', 'http', '--eject-after', '0'], { log })
  const input = new EventEmitter()
  Object.assign(input, { isTTY: true, setRawMode () {}, setEncoding () {}, resume () {}, pause () {} })
  const output = new EventEmitter()
  Object.assign(output, { columns: 120, rows: 20, text: '', write (chunk) { output.text += chunk; return true } })
  const view = startDashboard({
    stats: async () => lb.stats(),
    control: controlFrom(lb.control),
    input,
    output,
    onQuit: () => {},
    interval: 60000,
    env: { NO_COLOR: '1' }
  })
  t.teardown(() => view.stop())
  await until(() => output.text.includes(a.address), 'a first frame')
  const faultOf = () => lb.stats().listeners[0].backends[0].fault

  input.emit('data', 'f')
  await until(() => output.text.includes('fault: error 503 (30s left)'), 'the answer shown')
  t.match(faultOf(), { errorStatus: 503, delayMs: 0 })
  t.equal((await request(port)).status, 503, 'requests answered 503')
  t.match(output.text, /fault error 503 \(30s left\)/, 'the row says it')

  input.emit('data', 'f')
  await until(() => output.text.includes('fault: delay 2s (30s left)'), 'the delay')
  t.match(faultOf(), { errorStatus: 0, delayMs: 2000 })
  input.emit('data', 'f')
  await until(() => output.text.includes('fault: reset (30s left)'), 'the reset')
  const cut = await request(port)
  t.equal(cut.error && cut.error.code, 'ECONNRESET', 'requests reset')
  input.emit('data', 'f')
  await until(() => output.text.includes('fault cleared'), 'cleared')
  t.equal(faultOf(), null)
  t.equal((await request(port)).status, 200)
})

t.test('dashboard keys and rows, pure', async t => {
  const backend = {
    address: '10.0.0.1:80', weight: 1, status: 'up', reason: null, live: 0, total: 0, failures: 0, responseTime: { p99: null }
  }
  const listener = { name: 'l', protocol: 'http', mode: 'random', active: 0, queued: 0, unserved: 0 }
  const snapshot = f => ({ listeners: [{ ...listener, backends: [{ ...backend, fault: f }] }] })
  const asSnapshot = spec => ({
    delayMs: spec.delay, errorStatus: spec.status, reset: spec.reset, rate: spec.rate, endsAt: 30000, leftMs: 30000
  })
  let current = null
  const ops = []
  for (let i = 0; i < 4; i++) {
    const { action } = handleKey(createView(), 'fault', snapshot(current))
    ops.push(action.op === 'fault' ? describeFault(asSnapshot(action.fault)) : action.op)
    current = action.op === 'fault' ? asSnapshot(action.fault) : null
  }
  t.same(ops, ['error 503', 'delay 2s', 'reset', 'clearFault'])
  t.same(FAULT_CYCLE.map(f => f.duration), [30000, 30000, 30000])
  const other = { delayMs: 0, errorStatus: 500, reset: false, rate: 0.5, endsAt: null, leftMs: null }
  t.equal(handleKey(createView(), 'fault', snapshot(other)).action.op, 'clearFault', 'a fault set otherwise: f clears it')
  const lines = render(snapshot(other), createView(), { width: 100, height: 10, colour: false, now: 0 })
  t.ok(lines.some(line => line.includes('fault error 500 on 50% (until cleared)')), 'the row shows it')
})

t.test('status page, metrics, the workers\' sum: a fault\'s settings are not added up', async t => {
  const fault = {
    delayMs: 2000, errorStatus: 503, reset: false, rate: 0.5, endsAt: 40000, leftMs: 30000, struck: 3, holding: 1
  }
  const b = { address: '10.0.0.1:80', fault, faultsInjected: { delay: 3, error: 3 } }
  const worker = { listeners: [{ name: 'l', backends: [b] }] }
  const summed = sumStats([worker, worker]).listeners[0].backends[0]
  t.same(summed.fault, { ...fault, struck: 6, holding: 2 }, 'settings as one worker has them; strikes summed')
  t.same(summed.faultsInjected, { delay: 6, error: 6 })
  t.equal(describeFault(fault, 10000), 'delay 2s then error 503 on 50% (30s left)')
  t.equal(describeFault({ ...fault, endsAt: null }, 0), 'delay 2s then error 503 on 50% (until cleared)')
  const metrics = renderMetrics({ listeners: [{ name: 'l', backends: [{ ...b, responseTime: { count: 0, sum: 0, bounds: [], counts: [0] } }] }] })
  t.match(metrics, /lila_backend_faults_injected_total\{listener="l",backend="10.0.0.1:80",kind="delay"\} 3/)
  t.match(metrics, /lila_backend_fault_active\{listener="l",backend="10.0.0.1:80"\} 1/)
  t.ok(renderPage, 'the page is checked end to end above')
})

t.test('fault settings: defaults and spellings', async t => {
  t.same(parseFaultSettings([['error', '503']], 'x'), { delay: 0, status: 503, reset: false, rate: 1, duration: 60000 }, 'for=: 60s by default')
  t.same(parseFaultSettings([['reset', ''], ['for', '0s']], 'x'), { delay: 0, status: 0, reset: true, rate: 1, duration: 0 }, 'for=0s: until cleared; a bare reset')
  t.equal(parseFaultSettings([['delay', '1s'], ['rate', '0.25']], 'x').rate, 0.25)
  t.equal(parseFaultSettings([['delay', '1s'], ['rate', '25%']], 'x').rate, 0.25)
  t.throws(() => parseFaultSettings([['delay', '1s'], ['delay', '2s']], 'x'), /fault setting "delay" given twice in x/)
})

t.test('what a delay holds goes on when its fault ends: nothing outlives it', async t => {
  const a = await httpBackend(t, 'A')
  const { lb, port } = await startLila(t, [a.address, '--protocol', 'http'])
  await lb.control({ op: 'fault', backend: a.address, fault: { delay: 3600000, status: 0, reset: false, rate: 1, duration: 0 } })
  const req = require('http').request({ host: '127.0.0.1', port, agent: false })
  req.on('error', () => {})
  req.end()
  await until(() => lb.stats().listeners[0].backends[0].live === 1, 'held')
  req.destroy()
  t.match((await lb.control({ op: 'clearFault', backend: a.address })).message, /fault cleared/)
  await within(5000, 'the hold let go', until(() => lb.stats().listeners[0].backends[0].live === 0, 'released'))
  t.equal(lb.stats().listeners[0].backends[0].fault, null)
})
