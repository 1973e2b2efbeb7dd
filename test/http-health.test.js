'use strict'

// Health, queueing and the smarter modes in HTTP mode: the same upstream machinery as
// TCP mode, per request. Through the real `lila` executable.

const t = require('tap')
const http = require('http')
const { httpBackend, request, spawnLila, until, listenOn } = require('./fixtures/helpers')

const base = ['--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none']

t.test('max-conn=1 and a queue: every request served, the backend never sees two at once', async t => {
  const backend = await httpBackend(t, 'one', (req, res) => setTimeout(() => res.end('done'), 200))
  const lila = await spawnLila(t, ['rr', `${backend.address},max-conn=1`, ...base])
  const results = await Promise.all(Array.from({ length: 5 }, () => request(lila.port)))
  t.same(results.map(r => r.status), [200, 200, 200, 200, 200])
  t.equal(backend.peak, 1, 'peak concurrency at the backend: 1')
})

t.test('--queue-timeout: the requests that waited too long get 503', async t => {
  const backend = await httpBackend(t, 'one', (req, res) => setTimeout(() => res.end('done'), 200))
  const lila = await spawnLila(t, ['rr', `${backend.address},max-conn=1`, ...base, '--queue-timeout', '100ms'])
  const results = await Promise.all(Array.from({ length: 5 }, () => request(lila.port)))
  const statuses = results.map(r => r.status).sort()
  t.same(statuses, [200, 503, 503, 503, 503], 'one served, four timed out in the queue')
  const refused = results.find(r => r.status === 503)
  t.equal(refused.headers['retry-after'], '5')
  t.match(refused.body.toString(), /^503 Service Unavailable: no backend available \(no backend slot within 100ms\)\n$/)
  t.equal(backend.peak, 1)
})

t.test('least-time sends most requests to the fast backend', async t => {
  const slow = await httpBackend(t, 'slow', (req, res) => setTimeout(() => res.end('slow'), 60))
  const fast = await httpBackend(t, 'fast', (req, res) => res.end('fast'))
  const lila = await spawnLila(t, ['least-time', slow.address, fast.address, ...base])
  t.match(lila.listening, /\(http, least-time, 2 backends\)$/)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 })
  t.teardown(() => agent.destroy())
  for (let i = 0; i < 40; i++) await request(lila.port, { agent })
  t.ok(fast.requests >= 30, `fast served ${fast.requests} of 40, slow ${slow.requests}`)
})

t.test('passive ejection in http mode: a backend that resets requests is taken out', async t => {
  const net = require('net')
  const resetting = net.createServer(socket => socket.once('data', () => socket.resetAndDestroy()))
  const resetPort = await listenOn(t, resetting)
  const good = await httpBackend(t, 'good')
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${resetPort}`, good.address, ...base])
  for (let i = 0; i < 10; i++) {
    const res = await request(lila.port)
    t.equal(res.status, 200, `GET ${i + 1} retried onto the good backend`)
  }
  await lila.waitForLine(new RegExp(`backend 127\\.0\\.0\\.1:${resetPort} down: 5 failures in a row \\(connection reset\\)`))
})

t.test('a backend killed under a steady stream of GETs: no client error; it comes back', async t => {
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', a.address, b.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--check', 'http:/', '--check-interval', '100ms', '--rise', '2', '--fall', '2'])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })
  t.teardown(() => agent.destroy())
  const errors = []
  let running = true
  const served = { a: 0, b: 0 }
  const deadline = Date.now() + 30000
  const stream = (async () => {
    // eslint-disable-next-line no-unmodified-loop-condition -- cleared by the test when it has seen enough
    for (let i = 0; i < 1e6 && running && Date.now() < deadline; i++) {
      const res = await request(lila.port, { agent })
      if (res.status !== 200) errors.push(res.error ? res.error.message : res.status)
      else served[res.body.toString().trim()]++
    }
  })()
  await until(() => served.a >= 5 && served.b >= 5, 'traffic on both', { timeout: 10000 })
  // kill a: its port closes and its open connections go; traffic takes it out (or the
  // probes do), and after its restart the probes (or the half-open trial) bring it back
  a.server.closeAllConnections()
  await new Promise(resolve => a.server.close(resolve))
  await lila.waitForLine(new RegExp(`backend ${a.address} down`))
  const before = served.a
  // restart a on the same port
  await new Promise(resolve => a.server.listen({ host: '127.0.0.1', port: a.port }, resolve))
  await lila.waitForLine(new RegExp(`backend ${a.address} up`)).catch(err => { t.comment(JSON.stringify({ served, errors: errors.slice(0, 5) })); throw err })
  await until(() => served.a >= before + 5, 'traffic on a again', { timeout: 10000 })
  running = false
  await stream
  t.same(errors, [], `no failed requests (${served.a + served.b} served)`)
  t.ok(served.a > before, 'a serves again after its restart')
})

t.test('uri-hash with --hash-balance-factor: a hot path spills over instead of piling onto one backend', async t => {
  const slow = name => httpBackend(t, name, (req, res) => setTimeout(() => res.end(name), 150))
  const backends = await Promise.all(['a', 'b', 'c'].map(slow))
  const hot = async args => {
    const lila = await spawnLila(t, ['uri-hash', ...backends.map(b => b.address), ...base, ...args])
    for (const b of backends) { b.peak = 0; b.requests = 0 }
    const results = await Promise.all(Array.from({ length: 9 }, () => request(lila.port, { path: '/hot' })))
    t.same(results.map(r => r.status), Array(9).fill(200))
    await lila.stop()
    return backends.map(b => b.peak)
  }
  const plain = await hot([])
  t.same(plain.slice().sort(), [0, 0, 9], `without a factor the hot path stays on its backend: peaks ${plain}`)
  const bounded = await hot(['--hash-balance-factor', '1.25'])
  t.ok(Math.max(...bounded) <= 4, `with 1.25 no backend holds more than ceil(1.25 × 9 / 3) = 4 at once: peaks ${bounded}`)
  t.ok(bounded.filter(p => p > 0).length >= 2, 'the path spilled to the next backends in its order')
})
