'use strict'

// The status listener on its own, in-process: stats and control are injected fakes, so
// routing, validation, refusals and the exact one-line answers are tested without a
// balancer. (test/status.test.js runs the real thing end to end.)

const t = require('tap')
const { createStatusServer, isLoopbackHost } = require('../lib/admin/status-server')
const { parseBackend } = require('../lib/config/backend-spec')
const { ControlError } = require('../lib/errors')
const { request, captureLog } = require('./fixtures/helpers')
const { linesOf } = require('./fixtures/page')

const SNAPSHOT = {
  startedAt: 1000,
  listeners: [{
    name: '127.0.0.1:4444',
    protocol: 'tcp',
    mode: 'round-robin',
    active: 0,
    waiting: 0,
    accepted: 0,
    unserved: 0,
    panic: false,
    queued: 0,
    queueTimeouts: 0,
    backends: []
  }]
}

// A control whose every call is recorded and answered from `answers` (by op), or
// rejected when the answer is an Error.
function fakeControl (answers = {}) {
  const calls = []
  const control = {}
  for (const op of ['drain', 'enable', 'disable', 'weight', 'add', 'remove']) {
    control[op] = async request => {
      calls.push({ op, ...request })
      const answer = answers[op]
      if (answer instanceof Error) throw answer
      return { message: answer || `${op} done` }
    }
  }
  return { control, calls }
}

async function start (t, options = {}) {
  const { control, calls } = fakeControl(options.answers)
  const capture = captureLog('info')
  const server = createStatusServer({
    stats: async () => SNAPSHOT,
    control,
    parseBackend,
    host: '127.0.0.1',
    port: 0,
    log: capture.log,
    ...options
  })
  const url = await server.listen()
  t.teardown(() => server.close())
  const port = Number(/:(\d+)\/status$/.exec(url)[1])
  return { server, url, port, calls, lines: capture.lines }
}

const post = (port, path, options = {}) => request(port, { method: 'POST', path, ...options })
const text = res => res.body.toString()

t.test('pages: HTML, JSON, metrics; the ready line; / goes to /status', async t => {
  const { port, url, lines } = await start(t)
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/status$/)
  t.same(lines, [`status on ${url}`])
  const page = await request(port, { path: '/status' })
  t.equal(page.status, 200)
  t.match(page.headers['content-type'], /^text\/html/)
  t.match(text(page), /<meta http-equiv="refresh"/)
  const shown = linesOf(text(page))
  t.equal(shown[0], 'lila: 1 listener, 0 of 0 backends up', 'the page is rendered from the stats given')
  t.ok(shown.includes('127.0.0.1:4444 tcp · round-robin'), 'it shows the listener of the snapshot')
  t.notMatch(text(page), /<script|src=|href="http/, 'no script, no external asset')
  const json = await request(port, { path: '/status.json' })
  t.match(json.headers['content-type'], /^application\/json/)
  t.match(JSON.parse(json.body), { version: require('../package.json').version, startedAt: 1000, listeners: [{ name: '127.0.0.1:4444' }] })
  t.ok(Number.isInteger(JSON.parse(json.body).time))
  const metrics = await request(port, { path: '/metrics' })
  t.equal(metrics.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
  t.match(text(metrics), /^lila_listener_accepted_connections_total\{listener="127\.0\.0\.1:4444"\} 0$/m)
  const root = await request(port, { path: '/' })
  t.equal(root.status, 302)
  t.equal(root.headers.location, '/status')
  const head = await request(port, { method: 'HEAD', path: '/status.json' })
  t.equal(head.status, 200)
  t.equal(head.body.length, 0)
})

t.test('control requests reach the control functions, values checked first', async t => {
  const { port, calls } = await start(t)
  t.equal(text(await post(port, '/backends/127.0.0.1:9001/drain')), 'drain done\n')
  await post(port, '/backends/:9002/enable?listener=web')
  await post(port, '/backends/%5B::1%5D:9003/disable')
  await post(port, '/backends/127.0.0.1:9001/weight?value=7')
  await post(port, '/backends?listener=4444', { body: '10.0.0.9:80,weight=2' })
  await post(port, '/backends?address=10.0.0.10:80', { body: '' })
  await post(port, '/backends', { body: 'address=10.0.0.11%3A80', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  await request(port, { method: 'DELETE', path: '/backends/web.internal:80' })
  const spec = (host, port, weight = 1) => ({ host, port, weight, maxConn: null, slowStart: 0, backup: false })
  t.same(calls, [
    { op: 'drain', backend: '127.0.0.1:9001', listener: null },
    { op: 'enable', backend: '127.0.0.1:9002', listener: 'web' },
    { op: 'disable', backend: '[::1]:9003', listener: null },
    { op: 'weight', backend: '127.0.0.1:9001', listener: null, value: 7 },
    { op: 'add', spec: spec('10.0.0.9', 80, 2), listener: '4444' },
    { op: 'add', spec: spec('10.0.0.10', 80), listener: null },
    { op: 'add', spec: spec('10.0.0.11', 80), listener: null },
    { op: 'remove', backend: 'web.internal:80', listener: null }
  ])
})

t.test('bad requests: one line saying what was expected, nothing done', async t => {
  const { port, calls } = await start(t)
  const cases = [
    ['POST', '/backends/127.0.0.1:9001/weight?value=1001', 400, 'invalid weight "1001": expected ?value=N with N a whole number from 0 to 1000'],
    ['POST', '/backends/127.0.0.1:9001/weight', 400, 'invalid weight "": expected ?value=N with N a whole number from 0 to 1000'],
    ['POST', '/backends/127.0.0.1:9001/weight?value=-1', 400, 'invalid weight "-1": expected ?value=N with N a whole number from 0 to 1000'],
    ['POST', '/backends/foo/drain', 400, 'invalid backend "foo": expected host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]'],
    ['POST', '/backends/127.0.0.1:9001,weight=2/drain', 400, 'invalid backend address "127.0.0.1:9001,weight=2": expected host:port without settings'],
    ['POST', '/backends/%E0%A4%A/drain', 400, 'invalid backend address "%E0%A4%A": expected host:port'],
    ['POST', '/backends', 400, 'no backend given: expected host:port[,weight=N]... in the body or ?address='],
    ['POST', '/backends?address=10.0.0.1:99999', 400, 'invalid backend "10.0.0.1:99999": expected a port number from 1 to 65535 after the ":"'],
    ['GET', '/backends/127.0.0.1:9001/drain', 405, 'method GET not allowed on /backends/127.0.0.1:9001/drain: expected POST'],
    ['DELETE', '/backends', 405, 'method DELETE not allowed on /backends: expected POST'],
    ['POST', '/backends/127.0.0.1:9001', 405, 'method POST not allowed on /backends/127.0.0.1:9001: expected DELETE'],
    ['POST', '/status', 405, 'method POST not allowed on /status: expected GET or HEAD'],
    ['PUT', '/metrics', 405, 'method PUT not allowed on /metrics: expected GET or HEAD'],
    ['GET', '/nope', 404, 'no such page "/nope": expected /status, /status.json, /metrics, /maintenance, /canary or /backends/ADDRESS/{drain,enable,disable,weight,fault}'],
    ['POST', '/backends/127.0.0.1:9001/explode', 404, 'no such page "/backends/127.0.0.1:9001/explode": expected /status, /status.json, /metrics, /maintenance, /canary or /backends/ADDRESS/{drain,enable,disable,weight,fault}']
  ]
  for (const [method, path, status, message] of cases) {
    const res = await request(port, { method, path })
    t.equal(res.status, status, `${method} ${path}: status`)
    t.equal(text(res), `${message}\n`, `${method} ${path}: the reason`)
    t.match(res.headers['content-type'], /^text\/plain/)
  }
  t.equal((await request(port, { method: 'GET', path: '/backends/127.0.0.1:9001/drain' })).headers.allow, 'POST')
  t.equal((await request(port, { method: 'POST', path: '/metrics' })).headers.allow, 'GET, HEAD')
  const big = await post(port, '/backends', { body: 'x'.repeat(5000) })
  t.equal(big.status, 413)
  t.same(calls, [], 'no control function was called')
})

t.test('what control says goes back as it is: 404, 400, 409', async t => {
  const { port } = await start(t, {
    answers: {
      drain: new ControlError(404, 'no backend "127.0.0.1:9009": expected an address listed in /status.json'),
      enable: new ControlError(400, 'backend 127.0.0.1:9001 is in 2 listeners (a, b): say which with ?listener=NAME'),
      add: new ControlError(409, '127.0.0.1:9001 is already a backend')
    }
  })
  const drain = await post(port, '/backends/127.0.0.1:9009/drain')
  t.same([drain.status, text(drain)], [404, 'no backend "127.0.0.1:9009": expected an address listed in /status.json\n'])
  const enable = await post(port, '/backends/127.0.0.1:9001/enable')
  t.equal(enable.status, 400)
  const add = await post(port, '/backends?address=:9001')
  t.same([add.status, text(add)], [409, '127.0.0.1:9001 is already a backend\n'])
})

t.test('a control function that throws anything else: 500, logged', async t => {
  const { port, lines } = await start(t, { answers: { drain: new Error('boom') } })
  const res = await post(port, '/backends/127.0.0.1:9001/drain')
  t.equal(res.status, 500)
  t.equal(text(res), 'internal error: boom')
  t.match(lines[lines.length - 1], /^status: POST \/backends\/127\.0\.0\.1:9001\/drain: boom$/)
})

t.test('on loopback without a token: changes allowed, but not from a web page or through a foreign Host', async t => {
  const { port, calls } = await start(t)
  t.equal((await post(port, '/backends/:9001/drain')).status, 200)
  const fromPage = await post(port, '/backends/:9001/drain', { headers: { origin: 'http://evil.example' } })
  t.same([fromPage.status, text(fromPage)], [403, 'refused: a change requested from the web page of http://evil.example\n'])
  const rebound = await post(port, '/backends/:9001/drain', { headers: { host: `evil.example:${port}` } })
  t.same([rebound.status, text(rebound)], [403, `refused: Host "evil.example:${port}" is not a loopback name\n`])
  const sameOrigin = await post(port, '/backends/:9001/drain', { headers: { origin: `http://127.0.0.1:${port}` } })
  t.equal(sameOrigin.status, 200, 'the page itself may')
  t.equal(calls.length, 2)
  t.ok(isLoopbackHost('localhost:9000') && isLoopbackHost('127.0.0.2') && isLoopbackHost('[::1]:80'))
  t.notOk(isLoopbackHost('example.com:9000') || isLoopbackHost('[2001:db8::1]:80') || isLoopbackHost(''))
})

t.test('not on loopback: changes need the token; reads do not', async t => {
  const open = await start(t, { host: '0.0.0.0' })
  const refused = await post(open.port, '/backends/:9001/drain')
  t.equal(refused.status, 403)
  t.equal(text(refused), `refused: changes need --status-token when the status listener is not on loopback (it is on ${open.url})\n`)
  t.equal((await request(open.port, { path: '/status.json' })).status, 200)
  t.same(open.calls, [])

  const token = 's3cret-token-for-tests'
  const guarded = await start(t, { host: '0.0.0.0', token })
  const none = await post(guarded.port, '/backends/:9001/drain')
  t.same([none.status, text(none)], [403, 'refused: changes need the --status-token, sent as "Authorization: Bearer TOKEN"\n'])
  const wrong = await post(guarded.port, '/backends/:9001/drain', { headers: { authorization: 'Bearer nope' } })
  t.same([wrong.status, text(wrong)], [403, 'refused: wrong token in the Authorization header\n'])
  const right = await post(guarded.port, '/backends/:9001/drain', { headers: { authorization: `Bearer ${token}` } })
  t.same([right.status, text(right)], [200, 'drain done\n'])
  t.equal(guarded.calls.length, 1)
  const bad = await post(guarded.port, '/backends/:9001/weight?value=x', { headers: { authorization: `Bearer ${token}` } })
  t.equal(bad.status, 400, 'with the token, values are checked')
})

t.test('a token on loopback is required too', async t => {
  const { port, calls } = await start(t, { token: 'another-token-1' })
  t.equal((await post(port, '/backends/:9001/drain')).status, 403)
  t.equal((await post(port, '/backends/:9001/drain', { headers: { authorization: 'bearer another-token-1' } })).status, 200)
  t.equal(calls.length, 1)
})

t.test('stats may be a plain function; a failing one is a 500', async t => {
  let fail = false
  const { port } = await start(t, { stats: () => { if (fail) throw new Error('no stats'); return SNAPSHOT } })
  t.equal((await request(port, { path: '/status.json' })).status, 200)
  fail = true
  t.equal((await request(port, { path: '/metrics' })).status, 500)
})

t.test('a port already taken: one line naming the option', async t => {
  const first = await start(t)
  const { control } = fakeControl()
  const second = createStatusServer({ stats: () => SNAPSHOT, control, parseBackend, port: first.port })
  await t.rejects(second.listen(), { message: `cannot listen on 127.0.0.1:${first.port} (--status-port): address already in use` })
})
