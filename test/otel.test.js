'use strict'

// --otlp through the spawned lila against the real OpenTelemetry Collector (.ci/otelcol:
// its OTLP/HTTP receiver, a file exporter; test/fixtures/otelcol.js), with real clients
// (curl over HTTP/1.1 and HTTP/2, a grpc-js client): the spans a request makes and how
// they hang together, the traceparent each backend gets, a retry, sampling, a tcp
// connection, the metrics pushed, and a collector that goes away under load.

const t = require('tap')
const { spawnLila, httpBackend, curl, until, statusJson, request, tcpBackend, resettingBackends, exchange, deadPort, runLila } = require('./fixtures/helpers')
const { startCollector, MISSING } = require('./fixtures/otelcol')
const grpcFixture = require('./fixtures/grpc')
const { parseTraceparent } = require('../lib/wire/trace-context')

if (MISSING) {
  t.skip(MISSING)
  process.exit(0)
}

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT = '00f067aa0ba902b7'
const SERVER = 2
const CLIENT = 3
const ERROR = 2
// Spans leave within 50 ms (OTEL_BSP_SCHEDULE_DELAY): the tests wait on the files.
const ENV = { ...process.env, OTEL_BSP_SCHEDULE_DELAY: '50' }
const args = (backends, col, ...more) =>
  ['rr', ...backends, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--otlp', col.endpoint, ...more]
const randomTrace = () => require('crypto').randomBytes(16).toString('hex')
const spansOf = (col, traceId) => col.spans().filter(s => s.traceId === traceId)
const waitSpans = (col, traceId, n) =>
  until(() => spansOf(col, traceId).length >= n, `${n} spans of ${traceId}`, { timeout: 15000, every: 25 })

let col
t.before(async () => { col = await startCollector(t) })

t.test('HTTP/1.1: a SERVER span under the client\'s, a CLIENT span under it, named by the traceparent', async t => {
  const backend = await httpBackend(t, 'a')
  const deadBackend = `127.0.0.1:${await deadPort()}`
  const lila = await spawnLila(t, args([backend.address], col, '--route', `/api=${backend.address}`, '--route', `/dead=${deadBackend}`, '--retries', '0'),
    { env: { ...ENV, OTEL_SERVICE_NAME: 'edge', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test', OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip' } })
  const res = await curl(['-H', `traceparent: 00-${TRACE}-${PARENT}-01`, '-H', 'tracestate: congo=t61', `http://127.0.0.1:${lila.port}/api/items?x=1`])
  t.equal(res.stdout, 'a\n')
  const sent = parseTraceparent(backend.last.headers.traceparent)
  t.equal(sent.traceId, TRACE, 'the backend gets the client\'s trace')
  t.equal(sent.flags, '01')
  t.equal(backend.last.headers.tracestate, 'congo=t61', 'and its tracestate')
  await waitSpans(col, TRACE, 2)
  const server = spansOf(col, TRACE).find(s => s.kind === SERVER)
  const client = spansOf(col, TRACE).find(s => s.kind === CLIENT)
  t.equal(server.parentSpanId, PARENT, 'the SERVER span is a child of the client\'s parent')
  t.equal(client.parentSpanId, server.spanId, 'the CLIENT span is under it')
  t.equal(sent.parentId, client.spanId, 'the traceparent the backend got names the CLIENT span')
  t.equal(server.traceState, 'congo=t61')
  t.equal(server.name, 'GET /api')
  t.match(server.attrs, {
    'http.request.method': 'GET',
    'url.path': '/api/items',
    'url.scheme': 'http',
    'http.route': '/api',
    'http.response.status_code': 200,
    'server.address': '127.0.0.1',
    'server.port': lila.port,
    'network.peer.address': '127.0.0.1',
    'network.protocol.version': '1.1'
  })
  t.match(client.attrs, {
    'http.request.method': 'GET',
    'lila.backend': backend.address,
    'lila.attempt': 1,
    'lila.queue_ms': 0,
    'http.response.status_code': 200,
    'server.port': backend.port
  })
  t.notOk(server.status && server.status.code === ERROR, 'no error')
  t.equal(server.resource['service.name'], 'edge', 'OTEL_SERVICE_NAME')
  t.equal(server.resource['deployment.environment'], 'test', 'OTEL_RESOURCE_ATTRIBUTES')
  t.ok(Number(server.endTimeUnixNano) >= Number(client.endTimeUnixNano), 'the request ends after its attempt')

  // lila's own answer, no backend left: a 502 with an error status
  const down = randomTrace()
  const dead = await curl(['-H', `traceparent: 00-${down}-${PARENT}-01`, '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${lila.port}/dead`])
  t.equal(dead.stdout, '502')
  await waitSpans(col, down, 2)
  const failed = spansOf(col, down).find(s => s.kind === SERVER)
  t.equal(failed.status.code, ERROR, 'the SERVER span of a 502 is an error')
  t.match(failed.status.message, /connection refused/)
  t.equal(spansOf(col, down).find(s => s.kind === CLIENT).status.code, ERROR, 'and its attempt')
})

t.test('HTTP/2 (curl) and a gRPC call: the same spans and traceparent', async t => {
  const backend = await httpBackend(t, 'h2')
  const lila = await spawnLila(t, args([backend.address], col), { env: ENV })
  const trace = randomTrace()
  const res = await curl(['--http2-prior-knowledge', '-H', `traceparent: 00-${trace}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/two`])
  t.equal(res.stdout, 'h2\n')
  await waitSpans(col, trace, 2)
  const server = spansOf(col, trace).find(s => s.kind === SERVER)
  const client = spansOf(col, trace).find(s => s.kind === CLIENT)
  t.equal(server.attrs['network.protocol.version'], '2')
  t.equal(server.parentSpanId, PARENT)
  t.equal(parseTraceparent(backend.last.headers.traceparent).parentId, client.spanId)

  if (grpcFixture.load() === null) return t.skip(grpcFixture.MISSING)
  const { grpc } = grpcFixture.load()
  const g = await grpcFixture.grpcBackend(t, 'g')
  const glila = await spawnLila(t, ['rr', g.address, '--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--otlp', col.endpoint], { env: ENV })
  const echo = grpcFixture.echoClient(t, glila.port)
  const gtrace = randomTrace()
  const metadata = new grpc.Metadata()
  metadata.set('traceparent', `00-${gtrace}-${PARENT}-01`)
  const value = await new Promise((resolve, reject) => echo.Unary({ text: 'hi' }, metadata, (err, v) => err ? reject(err) : resolve(v)))
  t.equal(value.text, 'g: hi')
  await waitSpans(col, gtrace, 2)
  const gserver = spansOf(col, gtrace).find(s => s.kind === SERVER)
  const gclient = spansOf(col, gtrace).find(s => s.kind === CLIENT)
  t.equal(gserver.attrs['rpc.system'], 'grpc')
  t.equal(gserver.attrs['url.path'], '/lila.test.Echo/Unary')
  t.equal(parseTraceparent(g.metadata.traceparent).parentId, gclient.spanId, 'the gRPC backend gets the CLIENT span')
})

t.test('a backend that resets once: two CLIENT spans under one SERVER span, the first an error', async t => {
  let resets = 1
  const handler = (req, res, b) => {
    if (resets-- > 0) return req.socket.destroy()
    res.end(`${b.name}\n`)
  }
  const a = await httpBackend(t, 'a', handler)
  const b = await httpBackend(t, 'b', handler)
  const lila = await spawnLila(t, args([a.address, b.address], col), { env: ENV })
  const trace = randomTrace()
  const res = await curl(['-H', `traceparent: 00-${trace}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/`])
  t.match(res.stdout, /^[ab]\n$/, 'answered by the other backend')
  await waitSpans(col, trace, 3)
  const spans = spansOf(col, trace)
  const server = spans.find(s => s.kind === SERVER)
  const attempts = spans.filter(s => s.kind === CLIENT).sort((x, y) => x.attrs['lila.attempt'] - y.attrs['lila.attempt'])
  t.equal(attempts.length, 2, 'two CLIENT spans')
  t.ok(attempts.every(s => s.parentSpanId === server.spanId), 'both under the SERVER span')
  t.same(attempts.map(s => s.attrs['lila.attempt']), [1, 2])
  t.equal(attempts[0].status.code, ERROR, 'the first failed')
  t.notOk(attempts[1].status && attempts[1].status.code === ERROR, 'the second did not')
  t.not(attempts[0].attrs['lila.backend'], attempts[1].attrs['lila.backend'])
  const retry = (server.events || []).find(e => e.name === 'retry')
  t.ok(retry, 'a retry event on the SERVER span')
  t.equal(server.attrs['http.response.status_code'], 200)
})

t.test('a backend that traffic takes out: an ejection event on the SERVER span, naming it', async t => {
  const down = await httpBackend(t, 'down', req => req.socket.destroy())
  const up = await httpBackend(t, 'up')
  const lila = await spawnLila(t, args([down.address, up.address], col, '--eject-after', '1', '--status-port', '0'), { env: ENV })
  // Round robin: one of the first two requests tries `down` first, and its reset takes
  // it out (--eject-after 1) before `up` answers.
  const traces = [randomTrace(), randomTrace()]
  for (const trace of traces) {
    const res = await curl(['-H', `traceparent: 00-${trace}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/`])
    t.equal(res.stdout, 'up\n', 'answered by the backend that is up')
  }
  await until(() => traces.some(trace => spansOf(col, trace).length >= 3), 'the retried request\'s 3 spans',
    { timeout: 15000, every: 25 })
  const retried = traces.find(trace => spansOf(col, trace).length >= 3)
  const server = spansOf(col, retried).find(s => s.kind === SERVER)
  const ejection = (server.events || []).find(e => e.name === 'ejection')
  t.ok(ejection, 'an ejection event')
  const attrs = Object.fromEntries((ejection ? ejection.attributes : []).map(a => [a.key, a.value.stringValue]))
  t.equal(attrs['lila.backend'], down.address, 'naming the backend taken out')
  t.ok(attrs['lila.reason'], `and why (${attrs['lila.reason']})`)
  t.equal((await statusJson(lila)).listeners[0].backends.find(b => b.address === down.address).state, 'down',
    'the backend is out')
})

t.test('OTLP/JSON (OTEL_EXPORTER_OTLP_PROTOCOL=http/json): the same spans and metrics reach the collector', async t => {
  const backend = await httpBackend(t, 'a')
  const env = { ...ENV, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'json-edge' }
  const lila = await spawnLila(t, args([backend.address], col, '--otlp-interval', '1s'), { env })
  const trace = randomTrace()
  t.equal((await curl(['-H', `traceparent: 00-${trace}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/json`])).stdout, 'a\n')
  await waitSpans(col, trace, 2)
  const spans = spansOf(col, trace)
  const server = spans.find(s => s.kind === SERVER)
  const client = spans.find(s => s.kind === CLIENT)
  t.equal(server.parentSpanId, PARENT, 'the SERVER span under the client\'s')
  t.equal(client.parentSpanId, server.spanId, 'the CLIENT span under it')
  t.equal(parseTraceparent(backend.last.headers.traceparent).parentId, client.spanId, 'the backend\'s parent: the CLIENT span')
  t.equal(server.attrs['url.path'], '/json')
  t.equal(server.attrs['http.response.status_code'], 200, 'an int attribute, as JSON\'s decimal string')
  t.equal(server.resource['service.name'], 'json-edge')
  t.ok(BigInt(server.startTimeUnixNano) < BigInt(server.endTimeUnixNano), 'times in nanoseconds, in order')
  const counter = () => {
    const metric = col.metrics('json-edge').find(m => m.name === 'lila_backend_requests_total')
    return metric === undefined ? -1 : Number(metric.sum.dataPoints[0].asInt)
  }
  await until(() => counter() === 1, 'lila_backend_requests_total = 1 at the collector, over OTLP/JSON',
    { timeout: 15000, every: 50 })
  t.pass('the metrics too')
})

t.test('--trace-sample 0: a request without a decision is not exported; a sampled traceparent is', async t => {
  const backend = await httpBackend(t, 'a')
  const lila = await spawnLila(t, args([backend.address], col, '--trace-sample', '0'), { env: ENV })
  const unsampledClient = randomTrace()
  t.equal((await curl([`http://127.0.0.1:${lila.port}/`])).stdout, 'a\n')
  const own = parseTraceparent(backend.last.headers.traceparent)
  t.equal(own.flags, '00', 'the backend is told: not sampled')
  t.equal((await curl(['-H', `traceparent: 00-${unsampledClient}-${PARENT}-00`, `http://127.0.0.1:${lila.port}/`])).stdout, 'a\n')
  t.equal(parseTraceparent(backend.last.headers.traceparent).traceId, unsampledClient, 'an unsampled trace goes on')
  const sampled = randomTrace()
  t.equal((await curl(['-H', `traceparent: 00-${sampled}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/`])).stdout, 'a\n')
  await waitSpans(col, sampled, 2)
  // Spans leave in the order they end: those before the sampled ones would be there.
  t.equal(spansOf(col, own.traceId).length, 0, 'nothing of the request without a decision')
  t.equal(spansOf(col, unsampledClient).length, 0, 'nothing of the client\'s unsampled trace')
})

t.test('a tcp connection is one span; a mirrored request has its own', async t => {
  const backend = await tcpBackend(t, 'a')
  const tcp = await spawnLila(t, ['rr', backend.address, '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--otlp', col.endpoint, '--otlp-interval', '1h'],
    { env: { ...ENV, OTEL_SERVICE_NAME: 'tcp-edge' } })
  await exchange(tcp.port, 'x')
  await until(() => col.spans().some(s => s.resource['service.name'] === 'tcp-edge'), 'the tcp span', { timeout: 15000, every: 25 })
  const span = col.spans().find(s => s.resource['service.name'] === 'tcp-edge')
  t.equal(span.name, 'tcp')
  t.equal(span.kind, SERVER)
  t.equal(span.attrs['lila.backend'], backend.address)
  t.equal(span.attrs['network.peer.address'], '127.0.0.1')

  const primary = await httpBackend(t, 'p')
  const shadow = await httpBackend(t, 's')
  const lila = await spawnLila(t, args([primary.address], col, '--mirror', shadow.address), { env: ENV })
  const trace = randomTrace()
  t.equal((await curl(['-H', `traceparent: 00-${trace}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/m`])).stdout, 'p\n')
  await waitSpans(col, trace, 3)
  const spans = spansOf(col, trace)
  const server = spans.find(s => s.kind === SERVER)
  const mirror = spans.find(s => s.attrs['lila.mirror'] !== undefined)
  const attempt = spans.find(s => s.attrs['lila.backend'] !== undefined)
  t.equal(mirror.parentSpanId, server.spanId)
  t.equal(parseTraceparent(shadow.last.headers.traceparent).parentId, mirror.spanId, 'the mirror gets its own span')
  t.equal(parseTraceparent(primary.last.headers.traceparent).parentId, attempt.spanId)
})

t.test('--retry-on reset, every backend resets: the tcp span names the last that took the bytes', async t => {
  const { backends: [a, b], resets } = await resettingBackends(t, ['a', 'b'])
  const tcp = await spawnLila(t, ['rr', a.address, b.address, '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    '--retry-on', 'reset', '--retries', '1', '--eject-after', '0', '--otlp', col.endpoint, '--otlp-interval', '1h'],
  { env: { ...ENV, OTEL_SERVICE_NAME: 'tcp-reset-edge' } })
  const { error } = await exchange(tcp.port, 'x')
  t.equal(error && error.code, 'ECONNRESET', 'the client is reset')
  t.equal(resets.length, 2, 'both backends took the bytes and reset')
  const mine = () => col.spans().find(s => s.resource['service.name'] === 'tcp-reset-edge')
  await until(() => mine() !== undefined, 'the tcp span', { timeout: 15000, every: 25 })
  const span = mine()
  t.equal(span.attrs['lila.attempts'], 2)
  t.equal(span.attrs['lila.backend'], { a: a.address, b: b.address }[resets[1]], 'the backend that reset last')
})

t.test('the metrics reach the collector: the request counters, after N requests', async t => {
  const backend = await httpBackend(t, 'a')
  const lila = await spawnLila(t, args([backend.address], col, '--otlp-interval', '1s'), { env: { ...ENV, OTEL_SERVICE_NAME: 'metrics-edge' } })
  for (let i = 0; i < 7; i++) t.equal((await request(lila.port)).status, 200)
  const counter = () => {
    const metric = col.metrics('metrics-edge').find(m => m.name === 'lila_backend_requests_total')
    return metric === undefined ? -1 : Number(metric.sum.dataPoints[0].asInt)
  }
  await until(() => counter() === 7, 'lila_backend_requests_total = 7 at the collector', { timeout: 15000, every: 50 })
  const metric = col.metrics('metrics-edge').find(m => m.name === 'lila_backend_requests_total')
  t.equal(metric.sum.isMonotonic, true)
  t.equal(metric.sum.aggregationTemporality, 2, 'cumulative')
  t.match(metric.sum.dataPoints[0].attributes, [{ key: 'listener' }, { key: 'backend', value: { stringValue: backend.address } }])
  const histogram = col.metrics('metrics-edge').find(m => m.name === 'lila_listener_request_duration_seconds')
  t.equal(Number(histogram.histogram.dataPoints[0].count), 7)
})

t.test('--workers: each worker exports its spans; the primary pushes the metrics summed', async t => {
  const backend = await httpBackend(t, 'a')
  const lila = await spawnLila(t, args([backend.address], col, '--workers', '2', '--otlp-interval', '1s', '--status-port', '0'),
    { env: { ...ENV, OTEL_SERVICE_NAME: 'workers-edge' } })
  const traces = []
  for (let i = 0; i < 6; i++) {
    const trace = randomTrace()
    traces.push(trace)
    t.equal((await request(lila.port, { headers: { traceparent: `00-${trace}-${PARENT}-01` } })).status, 200)
  }
  await until(() => traces.every(trace => spansOf(col, trace).length === 2), 'every request\'s two spans', { timeout: 15000, every: 50 })
  const pids = new Set(traces.map(trace => spansOf(col, trace)[0].resource['process.pid']))
  t.ok(pids.size >= 1 && !pids.has(lila.child.pid), 'the spans come from the workers')
  const counter = () => {
    const metric = col.metrics('workers-edge').find(m => m.name === 'lila_backend_requests_total')
    return metric === undefined ? -1 : Number(metric.sum.dataPoints[0].asInt)
  }
  await until(() => counter() === 6, 'the requests of both workers summed at the collector', { timeout: 15000, every: 50 })
  await until(async () => (await statusJson(lila)).telemetry.spans.sent >= 12, 'the spans sent, summed over the workers')
})

t.test('the collector stopped, then started under load: no request fails, drops are counted, export resumes', async t => {
  const own = await startCollector(t)
  const backend = await httpBackend(t, 'a')
  const env = { ...ENV, OTEL_BSP_MAX_QUEUE_SIZE: '20', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '10', OTEL_EXPORTER_OTLP_TIMEOUT: '2000' }
  const lila = await spawnLila(t, args([backend.address], own, '--status-port', '0'), { env })
  await own.stop()
  // Load while the collector is down: every request is answered.
  const answers = []
  for (let round = 0; round < 10; round++) {
    answers.push(...await Promise.all(Array.from({ length: 10 }, () => request(lila.port))))
  }
  t.equal(answers.filter(a => a.status !== 200).length, 0, '0 failed requests')
  await lila.waitForLine(/OTLP: cannot export spans to http:\/\/127\.0\.0\.1:\d+\/v1\/traces: ECONNREFUSED/)
  const down = await statusJson(lila)
  t.ok(down.telemetry.spans.dropped > 0, `spans past the queue dropped and counted (${down.telemetry.spans.dropped})`)
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, /lila_otlp_dropped_total\{signal="spans",reason="queue-full"\} [1-9]/, '/metrics counts them')
  const page = (await request(lila.statusPort, { path: '/status' })).body.toString()
  t.match(page, /<h2>OpenTelemetry<\/h2>/, 'the status page says where spans go')
  t.match(page, new RegExp(`${own.endpoint}/v1/traces`))

  await own.start()
  // Under load again until a traced request's spans come through: the queue the outage
  // filled drains first (its spans were held), then new ones are taken.
  const traces = []
  let failed = 0
  await until(async () => {
    const trace = randomTrace()
    traces.push(trace)
    const res = await request(lila.port, { headers: { traceparent: `00-${trace}-${PARENT}-01` } })
    if (res.status !== 200) failed++
    return traces.some(tr => spansOf(own, tr).length >= 2)
  }, 'the spans of a request after the collector came back', { timeout: 30000, every: 50 })
  t.equal(failed, 0, '0 failed requests after')
  await lila.waitForLine(/OTLP: spans reach http:\/\/127\.0\.0\.1:\d+\/v1\/traces again/)
  const back = await statusJson(lila)
  t.ok(back.telemetry.spans.sent >= 2, 'sent counted')
  t.equal(lila.lines.filter(l => /cannot export spans/.test(l)).length, 1, 'said once')
})

t.test('bad input: an --otlp URL that is not http(s), --trace-sample outside 0-1, OTEL_* that cannot be read', async t => {
  const bad = await runLila(['rr', ':3000', '--otlp', 'grpc://127.0.0.1:4317'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /^lila: invalid OTLP endpoint "grpc:\/\/127\.0\.0\.1:4317" for --otlp: expected an http:\/\/ or https:\/\/ URL/)
  const ratio = await runLila(['rr', ':3000', '--otlp', '--trace-sample', '1.5'])
  t.equal(ratio.code, 2)
  t.match(ratio.stderr, /invalid ratio "1\.5" for --trace-sample: expected a number from 0 to 1/)
  // Environment variables: a warning and the default, as the SDKs do; lila runs.
  const backend = await httpBackend(t, 'a')
  const env = { ...ENV, OTEL_EXPORTER_OTLP_TIMEOUT: 'soon', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_HEADERS: 'x-key=1,broken' }
  const lila = await spawnLila(t, args([backend.address], col), { env })
  t.match(lila.stderr, /OTLP: OTEL_EXPORTER_OTLP_TIMEOUT="soon" cannot be read \(expected milliseconds, a whole number above 0\); using 10000/)
  t.match(lila.stderr, /OTLP: OTEL_EXPORTER_OTLP_PROTOCOL="grpc" cannot be read \(expected http\/protobuf or http\/json/)
  t.match(lila.stderr, /OTEL_EXPORTER_OTLP_HEADERS: "broken" cannot be read \(expected key=value\); left out/)
  const trace = randomTrace()
  t.equal((await curl(['-H', `traceparent: 00-${trace}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/`])).stdout, 'a\n')
  await waitSpans(col, trace, 2)
})

t.test('nothing on a listener without --otlp: the traceparent as it came', async t => {
  const backend = await httpBackend(t, 'a')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none'])
  await curl(['-H', `traceparent: 00-${TRACE}-${PARENT}-01`, `http://127.0.0.1:${lila.port}/`])
  t.equal(backend.last.headers.traceparent, `00-${TRACE}-${PARENT}-01`)
})
