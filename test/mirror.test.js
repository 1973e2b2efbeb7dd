'use strict'

// --mirror and --compare (docs/development.md, "Comparing versions: shadow traffic"):
// copies of requests to a shadow backend that clients never wait for, in order, marked,
// with the primary's head; bodies over 64 KiB, a dead mirror and one that holds too
// many copies; --compare finding the one path that differs, in /status.json, /metrics,
// the page and the log; HTTP/2 clients and HTTP/2 backends; a reload; the renderings.

const t = require('tap')
const http = require('http')
const { EventEmitter } = require('events')
const {
  spawnLila, startLila, httpBackend, request, curl, statusJson, deadPort, within, until, captureLog, listenOn
} = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')
const { parseCommandLine } = require('../lib/config/argv')
const { Comparison, BodyDigest, DIVERGENT } = require('../lib/proxy/http/mirror-compare')
const { renderMetrics } = require('../lib/admin/metrics')
const { renderPage } = require('../lib/admin/status-page')
const { render } = require('../lib/admin/dashboard')
const { createView } = require('../lib/admin/dashboard-keys')
const { sumStats } = require('../lib/admin/sum-stats')

// A shadow backend that records each copy (method, url, headers, body) as it comes in
// full ('copy' events), and answers through `answer(req, body, res)`.
async function mirrorBackend (t, answer = (req, body, res) => res.end('mirror\n')) {
  const mirror = new EventEmitter()
  mirror.copies = []
  mirror.server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', chunk => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const copy = { method: req.method, url: req.url, headers: req.headers, body: body.toString() }
      mirror.copies.push(copy)
      mirror.emit('copy', copy)
      answer(req, body, res)
    })
  })
  mirror.address = `127.0.0.1:${await listenOn(t, mirror.server)}`
  // Resolves once `n` copies came in (bounded).
  mirror.received = n => within(10000, `${n} copies at the mirror (got ${mirror.copies.length})`, new Promise(resolve => {
    const check = () => {
      if (mirror.copies.length < n) return
      mirror.off('copy', check)
      resolve()
    }
    mirror.on('copy', check)
    check()
  }))
  return mirror
}

// Polls /status.json until the listener's mirror snapshot passes `check` (bounded).
async function mirrorState (lila, check, what) {
  let last = null
  await until(async () => check(last = (await statusJson(lila)).listeners[0].mirror), what, { every: 20 })
    .catch(err => { throw new Error(`${err.message}; last: ${JSON.stringify(last)}`) })
  return last
}

const primary = (req, res) => {
  req.resume()
  req.on('end', () => res.end(`primary ${req.url}\n`))
}

t.test('a slow mirror: clients are answered without it; copies in order, marked, with the primary\'s head; ' +
  'a body over 64 KiB is not copied', async t => {
  const a = await httpBackend(t, 'A', primary)
  const held = [] // the mirror answers nothing until the test lets it
  const events = []
  const mirror = await mirrorBackend(t, (req, body, res) => held.push(res))
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--mirror', mirror.address])

  for (let i = 1; i <= 5; i++) {
    const res = await request(lila.port, { path: `/${i}` })
    t.equal(res.status, 200)
    t.equal(res.body.toString(), `primary /${i}\n`, 'the primary\'s answer')
    events.push(`client /${i}`)
  }
  const posted = await request(lila.port, { method: 'POST', path: '/small', body: 'hello' })
  t.equal(posted.body.toString(), 'primary /small\n')
  events.push('client /small')
  const chunked = await curl(['-H', 'Transfer-Encoding: chunked', '--data-binary', 'hello, chunked',
    `http://127.0.0.1:${lila.port}/chunked`])
  t.equal(chunked.stdout, 'primary /chunked\n')
  events.push('client /chunked')
  const big = await request(lila.port, { method: 'POST', path: '/big', body: Buffer.alloc(70 * 1024, 'x') })
  t.equal(big.status, 200, 'a body over 64 KiB goes to the primary')
  t.equal(a.requests, 8, 'the primary saw every request')
  events.push('client /big')

  await mirror.received(7)
  t.same(mirror.copies.map(c => c.url), ['/1', '/2', '/3', '/4', '/5', '/small', '/chunked'],
    'the mirror got a copy of each, in order, but the big one')
  t.equal(held.length, 7, 'and has answered none of them')
  const copy = mirror.copies[0]
  t.equal(copy.headers['x-lila-mirror'], '1', 'a copy says it is one')
  t.equal(copy.headers['x-forwarded-for'], '127.0.0.1', 'with the X-Forwarded-* the primary gets')
  t.equal(copy.headers['x-forwarded-proto'], 'http')
  t.equal(copy.headers.host, `127.0.0.1:${lila.port}`, 'and the client\'s Host')
  t.match(copy.headers.via, /^1\.1 lila-/, 'and lila\'s Via')
  t.same(a.last.headers.via, copy.headers.via, 'the same Via as the primary\'s')
  t.equal(mirror.copies[5].body, 'hello', 'a body comes whole')
  t.equal(mirror.copies[6].body, 'hello, chunked', 'a chunked body decoded')
  t.equal(mirror.copies[6].headers['content-length'], '14', 'and sent with its length')
  t.notOk(mirror.copies[6].headers['transfer-encoding'])

  let state = await mirrorState(lila, m => m.inFlight === 7, '7 copies in flight')
  t.same(state.requests, { sent: 0, dropped: 0, 'too-large': 1, failed: 0 }, 'the big body counted too-large')

  for (const res of held) {
    res.statusCode = 503
    res.end('mirror\n')
  }
  events.push('mirror answered')
  t.same(events.slice(0, 8), ['client /1', 'client /2', 'client /3', 'client /4', 'client /5', 'client /small',
    'client /chunked', 'client /big'], 'every client was answered before the mirror answered any copy')
  state = await mirrorState(lila, m => m.inFlight === 0, 'the copies answered')
  t.same(state.requests, { sent: 7, dropped: 0, 'too-large': 1, failed: 0 }, 'its 503s change nothing but the count')
  t.equal(state.compare, null, 'no comparison without --compare')
})

t.test('percent=50: about half the requests are copied', async t => {
  const a = await httpBackend(t, 'A')
  const mirror = await mirrorBackend(t)
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--mirror', `${mirror.address},percent=50`])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  for (let i = 0; i < 100; i++) t.equal((await request(lila.port, { path: `/${i}`, agent })).status, 200)
  const state = await mirrorState(lila, m => m.inFlight === 0 && m.requests.sent === mirror.copies.length,
    'the copies answered')
  t.ok(state.requests.sent >= 15 && state.requests.sent <= 85, `about half copied (${state.requests.sent} of 100)`)
  t.equal(state.percent, 50)
  t.equal(a.requests, 100, 'the primary saw them all')
})

t.test('a dead mirror: copies fail, counted and said once; clients are not affected', async t => {
  const a = await httpBackend(t, 'A')
  const port = await deadPort()
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--mirror', `:${port}`])
  for (let i = 0; i < 5; i++) {
    const res = await request(lila.port)
    t.equal(res.status, 200, 'answered by the primary')
    t.equal(res.body.toString(), 'A\n')
  }
  const state = await mirrorState(lila, m => m.requests.failed === 5, '5 failed copies')
  t.same(state.requests, { sent: 0, dropped: 0, 'too-large': 0, failed: 5 })
  await lila.waitForLine(new RegExp(`mirror 127\\.0\\.0\\.1:${port} failed: connection refused`))
  t.equal(lila.lines.filter(line => / failed: connection refused/.test(line)).length, 1, 'said once')
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, /lila_mirror_requests_total\{listener="[^"]+",outcome="failed"\} 5/)
})

t.test('a mirror that holds its copies: past 64 in flight, copies are dropped (counted), never queued', async t => {
  const a = await httpBackend(t, 'A')
  const mirror = await mirrorBackend(t, () => {}) // never answers
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--mirror', mirror.address])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  for (let i = 0; i < 70; i++) t.equal((await request(lila.port, { agent })).status, 200)
  const state = await mirrorState(lila, m => m.requests.dropped === 6, '6 dropped')
  t.equal(state.inFlight, 64, '64 copies wait for the mirror')
  t.equal(state.maxInFlight, 64)
  await mirror.received(64)
  t.equal(mirror.copies.length, 64, 'the mirror got no more than that')
  mirror.server.closeAllConnections() // the mirror gives up: its copies fail, and the room is back
  await mirrorState(lila, m => m.inFlight === 0 && m.requests.failed === 64, 'the held copies failed')
  t.equal((await request(lila.port, { agent })).status, 200)
  await mirror.received(65)
})

t.test('--compare: the one path whose answer differs, in /status.json, /metrics, the page and the log', async t => {
  const a = await httpBackend(t, 'A', (req, res) => {
    req.resume()
    if (req.url === '/chunky') { // chunked here, with a length at the mirror: the same body
      res.write('one, ')
      return res.end('two\n')
    }
    req.on('end', () => res.end(`item ${req.url}\n`))
  })
  const mirror = await mirrorBackend(t, (req, body, res) => {
    if (req.url === '/cart') res.statusCode = 500
    res.end(req.url === '/chunky' ? 'one, two\n' : `item ${req.url}\n`)
  })
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--mirror', mirror.address, '--compare'])
  for (const path of ['/', '/a', '/cart', '/b', '/chunky', '/cart']) {
    const res = await request(lila.port, { path })
    t.equal(res.status, 200, `${path}: the primary's answer`)
  }
  t.equal((await request(lila.port, { method: 'POST', path: '/order', body: '{"n":1}' })).status, 200)
  const state = await mirrorState(lila, m => m.compare.same + m.compare.status + m.compare.body === 7, '7 compared')
  t.match(state.compare, { same: 5, status: 2, body: 0 }, 'only /cart differs, twice')
  t.equal(state.compare.divergences.length, 1, 'one divergent path')
  t.match(state.compare.divergences[0], {
    name: 'GET /cart', method: 'GET', path: '/cart', result: 'status', primaryStatus: 200, mirrorStatus: 500, count: 2
  })
  t.type(state.compare.primaryTime.p50, 'number', 'the primary\'s median time')
  t.type(state.compare.mirrorTime.p50, 'number', 'and the mirror\'s')

  await lila.waitForLine(/compare: GET \/cart 200 ≠ 500 \(mirror\)$/)
  t.equal(lila.lines.filter(line => /compare: /.test(line) && !/\/cart/.test(line)).length, 0, 'no other path said')
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, /lila_compare_total\{listener="[^"]+",result="status"\} 2/)
  t.match(metrics, /lila_compare_total\{listener="[^"]+",result="same"\} 5/)
  t.match(metrics, /lila_compare_total\{listener="[^"]+",result="body"\} 0/)
  t.match(metrics, /lila_mirror_requests_total\{listener="[^"]+",outcome="sent"\} 7/)
  const page = (await request(lila.statusPort, { path: '/status' })).body.toString()
  t.match(page, /compare: same 5 · another status 2 · another body 0/)
  t.match(page, /<td>GET \/cart<\/td><td class="st">status<\/td><td>200<\/td><td>500<\/td><td>2<\/td>/)
})

t.test('HTTP/2 clients are mirrored too, and compared', async t => {
  const a = await httpBackend(t, 'A', primary)
  const mirror = await mirrorBackend(t, (req, body, res) => res.end(`primary ${req.url}\n`))
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--port', '0', '--status-port', '0',
    '--mirror', mirror.address, '--compare'])
  const got = await curl(['--http2-prior-knowledge', `http://127.0.0.1:${lila.port}/h2`])
  t.equal(got.stdout, 'primary /h2\n')
  const posted = await curl(['--http2-prior-knowledge', '--data-binary', 'an h2 body', `http://127.0.0.1:${lila.port}/h2post`])
  t.equal(posted.stdout, 'primary /h2post\n')
  await mirror.received(2)
  t.same(mirror.copies.map(c => c.url), ['/h2', '/h2post'])
  t.match(mirror.copies[0].headers.via, /^2\.0 lila-/, 'the copy says the request came in HTTP/2')
  t.equal(mirror.copies[0].headers['x-lila-mirror'], '1')
  t.equal(mirror.copies[1].body, 'an h2 body', 'with its body')
  const state = await mirrorState(lila, m => m.compare.same === 2, '2 compared the same')
  t.match(state.compare, { same: 2, status: 0, body: 0 })
})

t.test('HTTP/1.1 clients of HTTP/2 backends (--backend-protocol h2) are mirrored too', async t => {
  const a = await h2Backend(t, 'A', (stream, headers) => {
    stream.resume()
    stream.on('end', () => {
      stream.respond({ ':status': 200 })
      stream.end(`h2 ${headers[':path']}\n`)
    })
  })
  const mirror = await mirrorBackend(t, (req, body, res) => {
    if (req.url === '/differs') return res.end('not the same\n')
    res.end(`h2 ${req.url}\n`)
  })
  const lila = await spawnLila(t, [a.address, '--protocol', 'http', '--backend-protocol', 'h2', '--port', '0',
    '--status-port', '0', '--mirror', mirror.address, '--compare'])
  const posted = await curl(['-H', 'Transfer-Encoding: chunked', '--data-binary', 'to h2',
    `http://127.0.0.1:${lila.port}/up`])
  t.equal(posted.stdout, 'h2 /up\n')
  t.equal((await request(lila.port, { path: '/differs' })).body.toString(), 'h2 /differs\n')
  await mirror.received(2)
  t.equal(mirror.copies[0].body, 'to h2', 'the chunked body, decoded')
  const state = await mirrorState(lila, m => m.compare.same + m.compare.body === 2, '2 compared')
  t.match(state.compare, { same: 1, status: 0, body: 1 }, 'the other body found')
  t.match(state.compare.divergences[0], { name: 'GET /differs', result: 'body', primaryStatus: 200, mirrorStatus: 200 })
  await lila.waitForLine(/compare: GET \/differs 200, body of 12 bytes ≠ 13 bytes \(mirror\)/)
})

t.test('a reload replaces the mirror; the config file has "mirror" and "compare"', async t => {
  const a = await httpBackend(t, 'A')
  const first = await mirrorBackend(t)
  const second = await mirrorBackend(t, (req, body, res) => res.end('A\n'))
  const args = [a.address, '--protocol', 'http', '--check', 'none']
  const { log } = captureLog('info')
  const lila = await startLila(t, [...args, '--mirror', first.address], { log })
  await request(lila.port, { path: '/before' })
  await first.received(1)
  const next = parseCommandLine([...args, '--host', '127.0.0.1', '--port', '0', '--mirror', `${second.address},percent=100`,
    '--compare']).config
  const lines = await lila.lb.reload(next)
  t.match(lines.join('\n'), new RegExp(`mirror ${first.address} -> ${second.address}`), 'the reload says it')
  t.match(lines.join('\n'), /compare false -> true/)
  await request(lila.port, { path: '/after' })
  await second.received(1)
  t.same(first.copies.map(c => c.url), ['/before'])
  t.same(second.copies.map(c => c.url), ['/after'], 'copies go to the new mirror')
  await until(() => lila.stats().mirror.compare.same === 1, 'the comparison')
  t.equal(lila.stats().mirror.address, second.address)
  const off = parseCommandLine([...args, '--host', '127.0.0.1', '--port', '0']).config
  await lila.lb.reload(off)
  t.equal(lila.stats().mirror, null, 'a reload without --mirror stops it')

  const { parseConfigFile } = require('../lib/config/file')
  const config = parseConfigFile(JSON.stringify({
    protocol: 'http', listeners: [{ port: 8080, backends: [':9001'], mirror: '127.0.0.1:9000,percent=10', compare: true }]
  }), '/tmp/lila.json')
  t.match(config.listeners[0], { mirror: { address: '127.0.0.1:9000', percent: 10 }, compare: true })
  t.throws(() => parseConfigFile(JSON.stringify({ protocol: 'http', listeners: [{ backends: [':9001'], compare: true }] }),
    '/tmp/lila.json'), /listeners\[0\]\.compare: option "compare" needs "mirror"|needs "mirror"/)
})

t.test('Comparison: a body divergence, the last 20 paths, at most a log line a second', async t => {
  const lines = []
  let clock = 1000
  const comparison = new Comparison({ warn: line => lines.push(line) }, () => clock)
  const answer = (status, body) => {
    const digest = new BodyDigest()
    digest.update(Buffer.from(body))
    return { status, digest, ms: 3 }
  }
  comparison.record('GET', '/same', answer(200, 'x'), answer(200, 'x'))
  comparison.record('GET', '/price', answer(200, '10 EUR'), answer(200, '12 EUR'))
  t.same(lines, ['compare: GET /price 200, body of 6 bytes ≠ 6 bytes (mirror)'])
  for (let i = 0; i < 30; i++) comparison.record('GET', `/p${i}`, answer(200, 'x'), answer(404, 'x'))
  t.equal(lines.length, 1, 'the rest within the second are not said')
  clock += 1000
  comparison.record('DELETE', '/cart', answer(204, ''), answer(500, 'oops'))
  t.equal(lines[1], 'compare: DELETE /cart 204 ≠ 500 (mirror) (and 30 more like it in the last 1s)', 'then counted')
  const snapshot = comparison.snapshot()
  t.match(snapshot, { same: 1, status: 31, body: 1 })
  t.equal(snapshot.divergences.length, DIVERGENT, 'the last 20 paths only')
  t.equal(snapshot.divergences[0].name, 'DELETE /cart', 'the latest first')
  t.equal(snapshot.primaryTime.p50, 3.75, 'the median time, from the histogram')

  const framed = new BodyDigest(true)
  for (const piece of ['5\r\nhel', 'lo\r\n', '6\r\n world\r\n0\r\n\r\n']) framed.update(Buffer.from(piece))
  const plain = new BodyDigest()
  plain.update(Buffer.from('hello world'))
  t.same(framed.result(), plain.result(), 'a chunked body hashes as its data')
})

t.test('the renderings: page, metrics, dashboard, and the workers\' sum', async t => {
  const mirror = {
    address: '127.0.0.1:9000',
    percent: 10,
    inFlight: 2,
    maxInFlight: 64,
    requests: { sent: 120, dropped: 3, 'too-large': 1, failed: 4 },
    compare: {
      same: 118,
      status: 1,
      body: 1,
      divergences: [{
        name: 'GET /cart',
        method: 'GET',
        path: '/cart',
        result: 'status',
        primaryStatus: 200,
        mirrorStatus: 500,
        primaryBytes: 10,
        mirrorBytes: 3,
        count: 1,
        seenAt: 5000
      }],
      primaryTime: { p50: 3, bounds: [1, 5], counts: [0, 1, 1] },
      mirrorTime: { p50: 4, bounds: [1, 5], counts: [0, 1, 1] }
    }
  }
  const listener = {
    name: 'web',
    protocol: 'http',
    mode: 'random',
    active: 0,
    waiting: 0,
    queued: 0,
    accepted: 0,
    unserved: 0,
    queueTimeouts: 0,
    retries: {},
    panic: false,
    backends: [],
    routes: [],
    mirror
  }
  const snapshot = { listeners: [listener] }
  const page = renderPage(snapshot, { now: 7000 })
  t.match(page, /mirror 127\.0\.0\.1:9000 \(10%\): sent 120 · in flight 2 · dropped 3 · too large 1 · failed 4/)
  t.match(page, /p50 3 ms \(primary\) vs 4 ms \(mirror\)/)
  t.match(page, /<td>GET \/cart<\/td>.*<td>2s ago<\/td>/)
  const metrics = renderMetrics(snapshot)
  t.match(metrics, /lila_mirror_requests_total\{listener="web",outcome="too-large"\} 1/)
  t.match(metrics, /lila_mirror_in_flight\{listener="web"\} 2/)
  t.match(metrics, /lila_compare_total\{listener="web",result="same"\} 118/)
  t.notMatch(renderMetrics({ listeners: [{ ...listener, mirror: null }] }), /lila_mirror_requests_total\{/)
  const screen = render(snapshot, createView(), { width: 120, height: 20, colour: false }).join('\n')
  t.match(screen, /mirror 127\.0\.0\.1:9000 \(10%\) · sent 120 · dropped 3 · too large 1 · failed 4 · compare 118 same, 1 status, 1 body/)
  const summed = sumStats([snapshot, snapshot]).listeners[0].mirror
  t.match(summed, { percent: 10, inFlight: 4, requests: { sent: 240 }, compare: { same: 236 } })
  t.match(summed.compare.divergences[0], { name: 'GET /cart', primaryStatus: 200, mirrorStatus: 500, count: 2, seenAt: 5000 })
})

t.test('a copy carries the primary\'s request ID and header rules', async t => {
  const primary = await httpBackend(t, 'primary')
  const mirror = await mirrorBackend(t)
  const lila = await spawnLila(t, ['rr', primary.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--mirror', mirror.address, '--request-id', '--set-header', 'X-Env: shadow-test'])
  const res = await request(lila.port, { headers: { 'x-request-id': 'abc-123' } })
  t.equal(res.headers['x-request-id'], 'abc-123')
  await mirror.received(1)
  t.equal(mirror.copies[0].headers['x-request-id'], 'abc-123', 'the same ID as the primary got')
  t.equal(primary.last.headers['x-request-id'], 'abc-123')
  t.equal(mirror.copies[0].headers['x-env'], 'shadow-test', 'the request rules apply to the copy')
  t.equal(mirror.copies[0].headers['x-forwarded-for'], '127.0.0.1')
})
