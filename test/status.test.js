'use strict'

// The status listener end to end, through the real executable: the numbers of
// /status.json and /metrics match the traffic sent, the page shows the backends, and
// the control endpoints change where new traffic goes without disturbing open
// connections.

const t = require('tap')
const {
  spawnLila, tcpBackend, greetThenEcho, exchange, openGreeted, httpBackend, request, statusJson, settled, within, until
} = require('./fixtures/helpers')
const { linesOf, backendRow } = require('./fixtures/page')
const { promtoolAccepts } = require('./fixtures/promtool')

const LOCAL = ['--host', '127.0.0.1', '--port', '0', '--status-port', '0']

// The value of one sample in Prometheus text, or undefined.
function sample (text, name, labels) {
  const escaped = labels.replace(/[[\]\\^$.|?*+(){}]/g, '\\$&')
  const match = new RegExp(`^${name}\\{${escaped}\\} (\\S+)$`, 'm').exec(text)
  return match === null ? undefined : Number(match[1])
}

t.test('tcp: /status.json, /metrics and /status match 30 connections over 3 backends', async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => tcpBackend(t, name)))
  const lila = await spawnLila(t, ['rr', ...backends.map(b => b.address), ...LOCAL, '--check', 'none'])
  t.ok(lila.lines.some(line => /^lila: status on http:\/\/127\.0\.0\.1:\d+\/status$/.test(line)), 'one line says where the status page is')
  for (let i = 0; i < 30; i++) t.equal((await exchange(lila.port, 'hi')).data, `${'abc'[i % 3]}\n`)
  const snapshot = await settled(lila)
  const [listener] = snapshot.listeners
  t.match(listener, { name: `127.0.0.1:${lila.port}`, protocol: 'tcp', mode: 'round-robin', accepted: 30, active: 0, unserved: 0, queued: 0 })
  t.same(listener.backends.map(b => b.address), backends.map(b => b.address))
  t.same(listener.backends.map(b => b.total), [10, 10, 10])
  t.same(listener.backends.map(b => b.bytesIn), [20, 20, 20], '"hi" ten times each')
  t.same(listener.backends.map(b => b.bytesOut), [20, 20, 20], '"a\\n" ten times each')
  t.same(listener.backends.map(b => b.responseTime.count), [10, 10, 10], 'one latency sample per connection')
  t.same(listener.backends.map(b => b.status), ['up', 'up', 'up'])
  t.ok(listener.backends.every(b => b.responseTime.p50 > 0 && b.responseTime.p99 >= b.responseTime.p50))

  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  promtoolAccepts(t, metrics)
  const l = `listener="127.0.0.1:${lila.port}"`
  t.equal(sample(metrics, 'lila_listener_accepted_connections_total', l), 30)
  for (const b of backends) {
    const labels = `${l},backend="${b.address}"`
    t.equal(sample(metrics, 'lila_backend_requests_total', labels), 10)
    t.equal(sample(metrics, 'lila_backend_in_bytes_total', labels), 20)
    t.equal(sample(metrics, 'lila_backend_out_bytes_total', labels), 20)
    t.equal(sample(metrics, 'lila_backend_live', labels), 0)
    t.equal(sample(metrics, 'lila_backend_response_time_seconds_count', labels), 10)
    t.equal(sample(metrics, 'lila_backend_response_time_seconds_bucket', `${labels},le="+Inf"`), 10)
    t.equal(sample(metrics, 'lila_backend_status', `${labels},status="up"`), 1)
  }

  const page = (await request(lila.statusPort, { path: '/status' })).body.toString()
  const lines = linesOf(page)
  t.ok(lines.includes('Every backend is up.'), 'the page says nothing is wrong')
  t.ok(lines.includes(`127.0.0.1:${lila.port} tcp · round-robin`), 'a heading names the listener, its protocol and mode')
  const facts = ['status', 'weight', 'live', 'share', 'total', 'failures', 'in', 'out']
  for (const b of backends) {
    const row = backendRow(page, b.address)
    t.same(row && Object.fromEntries(facts.map(f => [f, row[f]])), {
      status: 'up', weight: '1', live: '0', share: '33%', total: '10', failures: '0', in: '20 B', out: '20 B'
    }, `${b.address}: its facts together in its row`)
  }
  t.equal((await lila.stop()).code, 0)
})

t.test('http: requests, in-flight counts and response times per backend', async t => {
  let release = null
  const backends = await Promise.all(['a', 'b', 'c'].map(name => httpBackend(t, name, (req, res, b) => {
    if (req.url === '/hold') release = () => res.end('held\n')
    else res.end(`${b.name}\n`)
  })))
  const lila = await spawnLila(t, ['rr', ...backends.map(b => b.address), ...LOCAL, '--protocol', 'http', '--check', 'none'])
  for (let i = 0; i < 30; i++) t.equal((await request(lila.port, { path: '/x' })).status, 200)
  const snapshot = await settled(lila)
  const [listener] = snapshot.listeners
  t.same(listener.backends.map(b => b.total), [10, 10, 10])
  t.same(listener.backends.map(b => b.responseTime.count), [10, 10, 10])
  t.same(backends.map(b => b.requests), [10, 10, 10])
  const [first] = listener.backends
  t.ok(first.bytesIn > 0 && first.bytesOut > 0)
  t.ok(listener.backends.every(b => b.bytesIn === first.bytesIn && b.bytesOut === first.bytesOut), 'the same bytes each way for the same requests')
  t.match(first.pool, { sockets: 1, idle: 1, connects: 1, reuses: 9 }, 'one pooled connection, reused')

  // A request in flight shows, then goes.
  const held = request(lila.port, { path: '/hold' })
  await until(() => release !== null, 'the request to reach its backend')
  const during = (await statusJson(lila)).listeners[0]
  t.equal(during.backends.reduce((sum, b) => sum + b.live, 0), 1, 'one request in flight')
  t.equal(during.active, 1)
  release()
  t.equal((await held).status, 200)
  await settled(lila)
  t.equal((await lila.stop()).code, 0)
})

t.test('control: drain, enable, weight, add and disable through the real executable', async t => {
  const [a, b, c] = await Promise.all(['a', 'b', 'c'].map(name => tcpBackend(t, name, greetThenEcho)))
  const lila = await spawnLila(t, ['rr', a.address, b.address, ...LOCAL, '--check', 'none'])
  const post = path => request(lila.statusPort, { method: 'POST', path })
  // n connections, closed as soon as greeted: which backend each went to.
  const spread = async n => {
    const names = []
    for (let i = 0; i < n; i++) {
      const { socket, name } = await openGreeted(lila.port)
      names.push(name)
      socket.end()
    }
    return names
  }

  // A long-lived connection on a; then a is drained.
  const long = await openGreeted(lila.port)
  t.equal(long.name, 'a')
  const drained = await post(`/backends/${a.address}/drain`)
  t.equal(drained.status, 200)
  t.equal(drained.body.toString(), `${a.address} draining: by an operator; 1 connection left\n`)
  t.same(await spread(4), ['b', 'b', 'b', 'b'], 'no new connection goes to a drained backend')
  const echoed = new Promise(resolve => long.socket.once('data', chunk => resolve(String(chunk))))
  long.socket.write('still here')
  t.equal(await within(5000, 'the echo', echoed), 'still here', 'the open connection goes on undisturbed')
  let backendA = (await statusJson(lila)).listeners[0].backends[0]
  t.match(backendA, { address: a.address, status: 'draining', admin: 'draining', live: 1 })
  await lila.waitForLine(/backend .* draining \(by an operator\); 1 connection left open$/)
  long.socket.end()
  await lila.waitForLine(new RegExp(`backend ${a.address} drained$`))
  backendA = (await settled(lila)).listeners[0].backends[0]
  t.match(backendA, { status: 'drained', live: 0 })

  t.equal((await post(`/backends/${a.address}/enable`)).body.toString(), `${a.address} up\n`)
  t.same((await spread(4)).sort(), ['a', 'a', 'b', 'b'], 'enabled: back in the rotation')

  t.equal((await post(`/backends/${b.address}/weight?value=3`)).body.toString(), `${b.address} weight 3 (was 1)\n`)
  const weighted = await spread(40)
  t.equal(weighted.filter(n => n === 'b').length, 30, 'weights 1:3')

  const added = await request(lila.statusPort, { method: 'POST', path: '/backends', body: `${c.address},weight=2` })
  t.equal(added.body.toString(), `added ${c.address} up\n`)
  const withC = await spread(12)
  t.equal(withC.filter(n => n === 'c').length, 4, 'the new backend takes its share (2 of 6)')
  t.equal(c.connections, 4)
  const listed = (await settled(lila)).listeners[0].backends
  t.same(listed.map(x => [x.address, x.weight, x.total]), [
    [a.address, 1, 1 + 2 + 10 + 2], [b.address, 3, 4 + 2 + 30 + 6], [c.address, 2, 4]
  ])

  const keep = await openGreeted(lila.port)
  t.equal((await post(`/backends/${keep.name === 'a' ? a.address : keep.name === 'b' ? b.address : c.address}/disable`)).status, 200)
  t.notOk((await spread(6)).includes(keep.name), 'no new connection goes to a disabled backend')
  const echo = new Promise(resolve => keep.socket.once('data', chunk => resolve(String(chunk))))
  keep.socket.write('ping')
  t.equal(await within(5000, 'the echo', echo), 'ping', 'disabling cuts nothing')
  keep.socket.end()
  await settled(lila)

  const unknown = await post('/backends/127.0.0.1:1/drain')
  t.same([unknown.status, unknown.body.toString()], [404, 'no backend "127.0.0.1:1": expected an address listed in /status.json\n'])
  t.equal((await lila.stop()).code, 0)
})

t.test('changes from a status listener on all interfaces need the token', async t => {
  const a = await tcpBackend(t, 'a')
  const token = 'status-token-for-a-test'
  const lila = await spawnLila(t, ['rr', a.address, '--host', '127.0.0.1', '--port', '0', '--status-port', '0', '--status-host', '0.0.0.0', '--status-token', token, '--check', 'none'])
  t.match(lila.lines.join('\n'), /status on http:\/\/0\.0\.0\.0:\d+\/status/)
  const path = `/backends/${a.address}/drain`
  const refused = await request(lila.statusPort, { method: 'POST', path })
  t.same([refused.status, refused.body.toString()], [403, 'refused: changes need the --status-token, sent as "Authorization: Bearer TOKEN"\n'])
  const allowed = await request(lila.statusPort, { method: 'POST', path, headers: { authorization: `Bearer ${token}` } })
  t.equal(allowed.status, 200)
  t.equal((await statusJson(lila)).listeners[0].backends[0].status, 'drained')
  t.equal((await lila.stop()).code, 0)
})

t.test('http: responses by status class, request durations and process_* in /metrics', async t => {
  const ok = await httpBackend(t, 'ok')
  const missing = await httpBackend(t, 'missing', (req, res) => { res.statusCode = 404; res.end() })
  const lila = await spawnLila(t, ['rr', ok.address, missing.address, '--protocol', 'http', ...LOCAL, '--check', 'none'])
  for (let i = 0; i < 10; i++) await request(lila.port)
  const snapshot = await settled(lila)
  const l = snapshot.listeners[0]
  t.same(l.responses, { '1xx': 0, '2xx': 5, '3xx': 0, '4xx': 5, '5xx': 0 }, '/status.json: the listener\'s responses by class')
  const [a, b] = [ok, missing].map(x => l.backends.find(bk => bk.address === x.address))
  t.same([a.responses['2xx'], b.responses['4xx']], [5, 5], 'and each backend\'s')
  t.equal(l.requestTime.count, 10, 'ten request durations')

  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  promtoolAccepts(t, metrics)
  const base = `listener="${l.name}"`
  t.equal(sample(metrics, 'lila_listener_responses_total', `${base},code="2xx"`), 5)
  t.equal(sample(metrics, 'lila_listener_responses_total', `${base},code="4xx"`), 5)
  t.equal(sample(metrics, 'lila_backend_responses_total', `${base},backend="${missing.address}",code="4xx"`), 5)
  t.equal(sample(metrics, 'lila_listener_request_duration_seconds_count', base), 10)
  t.equal(sample(metrics, 'lila_listener_request_duration_seconds_bucket', `${base},le="+Inf"`), 10)
  for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'process_open_fds', 'process_max_fds']) {
    t.ok(new RegExp(`^${name} \\d`, 'm').test(metrics), `${name}`)
  }
  const fds = Number(/^process_open_fds (\d+)/m.exec(metrics)[1])
  const rss = Number(/^process_resident_memory_bytes (\d+)/m.exec(metrics)[1])
  t.ok(fds > 5 && fds < 1000, `open fds: ${fds}`)
  t.ok(rss > 10 * 1024 * 1024, `resident memory: ${rss} bytes`)
})

t.test('http: the heads lila refuses count among the responses, with no request time', async t => {
  const ok = await httpBackend(t, 'ok')
  const lila = await spawnLila(t, ['rr', ok.address, '--protocol', 'http', ...LOCAL, '--check', 'none'])
  // (A first line with no HTTP version at all may be an HTTP/2 client's broken preface,
  // closed unanswered: see http2.test.js.)
  t.match((await exchange(lila.port, 'NOT  A REQUEST HTTP/1.1\r\n\r\n')).data, /^HTTP\/1\.1 400 /, 'a malformed request line: 400')
  t.match((await exchange(lila.port, 'GET / HTTP/1.7\r\nHost: x\r\n\r\n')).data, /^HTTP\/1\.1 505 /, 'a version lila does not speak: 505')
  t.equal((await request(lila.port)).status, 200)
  const l = (await settled(lila)).listeners[0]
  t.same(l.responses, { '1xx': 0, '2xx': 1, '3xx': 0, '4xx': 1, '5xx': 1 }, 'every answer a client got, by class')
  t.equal(l.requestTime.count, 1, 'only the request that was one is timed')
  t.same(l.backends[0].responses, { '1xx': 0, '2xx': 1, '3xx': 0, '4xx': 0, '5xx': 0 }, 'no backend is charged with them')
  t.equal((await lila.stop()).code, 0)
})
