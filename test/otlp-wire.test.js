'use strict'

// lib/wire/otlp.js against a real decoder: protobufjs (from @grpc/proto-loader) with
// opentelemetry-proto's own .proto files (test/fixtures/otlp). Each request lila
// encodes is decoded and compared field by field, and protobufjs, given the same
// message, writes the same bytes. The collector reading them is test/otel.test.js.

const t = require('tap')
const path = require('path')
// protobufjs as @grpc/proto-loader (a dev dependency) has it
const protobuf = require(require.resolve('protobufjs', { paths: [path.dirname(require.resolve('@grpc/proto-loader'))] }))
const { encodeTraces, encodeMetrics, EncodedSpans, KIND, STATUS, FLAGS } = require('../lib/wire/otlp')
const { ProtoWriter } = require('../lib/wire/protobuf')

const root = new protobuf.Root()
root.resolvePath = (origin, target) => path.join(__dirname, 'fixtures/otlp', target)
root.loadSync([
  'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  'opentelemetry/proto/collector/metrics/v1/metrics_service.proto'
])
const TraceRequest = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest')
const MetricsRequest = root.lookupType('opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest')
const toObject = (type, bytes) =>
  type.toObject(type.decode(bytes), { longs: String, bytes: String, enums: Number, defaults: false })
const hex = text => Buffer.from(text, 'hex')
const b64 = text => hex(text).toString('base64')
// ms since the epoch with a fraction -> the nanoseconds lila writes
const NOW = 1764331200123.456
const NOW_NS = '1764331200123456000'

const resourceAttrs = ['service.name', 'edge', 'service.instance.id', 'abc', 'process.pid', 4242]
const scope = { name: 'lila', version: '1.2.3' }
const server = {
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  parentId: 'a3ce929d0e0e4736',
  traceState: 'congo=t61rcWkgMzE',
  flags: FLAGS.sampled | FLAGS.hasIsRemote | FLAGS.isRemote,
  name: 'GET /api',
  kind: KIND.server,
  start: NOW,
  end: NOW + 1.5,
  attributes: ['http.request.method', 'GET', 'http.response.status_code', 200, 'lila.queue_ms', 0.25,
    'lila.tls', false, 'lila.offset', -3, 'url.path', 'é/ü'],
  events: [{ time: NOW + 1, name: 'retry', attributes: ['lila.backend', '127.0.0.1:3000'] }],
  status: STATUS.error,
  message: 'answered 502'
}
const client = {
  traceId: server.traceId,
  spanId: '1111111111111111',
  parentId: server.spanId,
  traceState: null,
  flags: FLAGS.sampled | FLAGS.hasIsRemote,
  name: 'GET',
  kind: KIND.client,
  start: NOW,
  end: NOW + 1,
  attributes: [],
  events: null,
  status: STATUS.unset,
  message: null
}

t.test('ExportTraceServiceRequest: decoded as written, and the bytes protobufjs writes', async t => {
  const bytes = encodeTraces({ resource: resourceAttrs, scope, spans: [server, client] })
  const got = toObject(TraceRequest, bytes)
  const expected = {
    resourceSpans: [{
      resource: {
        attributes: [
          { key: 'service.name', value: { stringValue: 'edge' } },
          { key: 'service.instance.id', value: { stringValue: 'abc' } },
          { key: 'process.pid', value: { intValue: '4242' } }
        ]
      },
      scopeSpans: [{
        scope: { name: 'lila', version: '1.2.3' },
        spans: [{
          traceId: b64(server.traceId),
          spanId: b64(server.spanId),
          traceState: 'congo=t61rcWkgMzE',
          parentSpanId: b64(server.parentId),
          flags: 0x301,
          name: 'GET /api',
          kind: 2,
          startTimeUnixNano: NOW_NS,
          endTimeUnixNano: '1764331200124956000',
          attributes: [
            { key: 'http.request.method', value: { stringValue: 'GET' } },
            { key: 'http.response.status_code', value: { intValue: '200' } },
            { key: 'lila.queue_ms', value: { doubleValue: 0.25 } },
            { key: 'lila.tls', value: { boolValue: false } },
            { key: 'lila.offset', value: { intValue: '-3' } },
            { key: 'url.path', value: { stringValue: 'é/ü' } }
          ],
          events: [{
            timeUnixNano: '1764331200124456000',
            name: 'retry',
            attributes: [{ key: 'lila.backend', value: { stringValue: '127.0.0.1:3000' } }]
          }],
          status: { message: 'answered 502', code: 2 }
        }, {
          traceId: b64(client.traceId),
          spanId: b64(client.spanId),
          parentSpanId: b64(client.parentId),
          flags: 0x101,
          name: 'GET',
          kind: 3,
          startTimeUnixNano: NOW_NS,
          endTimeUnixNano: '1764331200124456000'
        }]
      }]
    }]
  }
  t.same(got, expected)
  // protobufjs writes the same message, given as it decoded it, byte for byte
  const again = TraceRequest.encode(TraceRequest.fromObject(expected)).finish()
  t.equal(Buffer.from(again).toString('hex'), bytes.toString('hex'), 'the same bytes')
})

t.test('ExportMetricsServiceRequest: sums, gauges, histograms', async t => {
  const metrics = [
    {
      name: 'lila_backend_requests_total',
      description: 'Requests.',
      type: 'sum',
      points: [
        { attributes: ['listener', 'http:4444', 'backend', '127.0.0.1:3000'], value: 7 },
        { attributes: ['listener', 'http:4444', 'backend', '127.0.0.1:3001'], value: 2 ** 40 }
      ]
    },
    { name: 'process_cpu_seconds_total', description: 'CPU.', unit: 's', type: 'sum', points: [{ attributes: [], value: 1.5 }] },
    {
      name: 'lila_tls_certificate_expiry_seconds',
      description: 'Expiry.',
      type: 'gauge',
      points: [
        { attributes: ['names', 'a.test'], value: -60 }
      ]
    },
    {
      name: 'lila_backend_response_time_seconds',
      description: 'Time.',
      unit: 's',
      type: 'histogram',
      points: [
        { attributes: ['backend', 'x'], count: 5, sum: 0.0125, bounds: [0.001, 0.01], counts: [2, 3, 0] }
      ]
    }
  ]
  const bytes = encodeMetrics({ resource: resourceAttrs.slice(0, 2), scope, start: NOW - 1000, time: NOW, metrics })
  const got = toObject(MetricsRequest, bytes)
  const start = '1764331199123456000'
  const point = (attributes, value) => ({ attributes, startTimeUnixNano: start, timeUnixNano: NOW_NS, ...value })
  const expected = {
    resourceMetrics: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'edge' } }] },
      scopeMetrics: [{
        scope: { name: 'lila', version: '1.2.3' },
        metrics: [{
          name: 'lila_backend_requests_total',
          description: 'Requests.',
          sum: {
            dataPoints: [
              point([{ key: 'listener', value: { stringValue: 'http:4444' } }, { key: 'backend', value: { stringValue: '127.0.0.1:3000' } }], { asInt: '7' }),
              point([{ key: 'listener', value: { stringValue: 'http:4444' } }, { key: 'backend', value: { stringValue: '127.0.0.1:3001' } }], { asInt: String(2 ** 40) })
            ],
            aggregationTemporality: 2,
            isMonotonic: true
          }
        }, {
          name: 'process_cpu_seconds_total',
          description: 'CPU.',
          unit: 's',
          sum: { dataPoints: [point(undefined, { asDouble: 1.5 })], aggregationTemporality: 2, isMonotonic: true }
        }, {
          name: 'lila_tls_certificate_expiry_seconds',
          description: 'Expiry.',
          gauge: { dataPoints: [point([{ key: 'names', value: { stringValue: 'a.test' } }], { asInt: '-60' })] }
        }, {
          name: 'lila_backend_response_time_seconds',
          description: 'Time.',
          unit: 's',
          histogram: {
            dataPoints: [point([{ key: 'backend', value: { stringValue: 'x' } }],
              { count: '5', sum: 0.0125, bucketCounts: ['2', '3', '0'], explicitBounds: [0.001, 0.01] })],
            aggregationTemporality: 2
          }
        }]
      }]
    }]
  }
  for (const p of expected.resourceMetrics[0].scopeMetrics[0].metrics[1].sum.dataPoints) delete p.attributes
  t.same(got, expected)
  const again = MetricsRequest.encode(MetricsRequest.fromObject(expected)).finish()
  t.equal(Buffer.from(again).toString('hex'), bytes.toString('hex'), 'the same bytes')
})

t.test('OTLP/JSON: what protobufjs reads from the JSON mapping', async t => {
  const json = JSON.parse(encodeTraces({ resource: resourceAttrs, scope, spans: [server] }, true))
  const span = json.resourceSpans[0].scopeSpans[0].spans[0]
  t.equal(span.traceId, server.traceId, 'IDs in hex, as OTLP/JSON says (not base64)')
  t.equal(span.parentSpanId, server.parentId)
  t.equal(span.startTimeUnixNano, NOW_NS, '64-bit integers as decimal strings')
  t.same(span.attributes[1], { key: 'http.response.status_code', value: { intValue: '200' } })
  t.same(span.status, { code: 2, message: 'answered 502' })
  // The rest of the mapping is protobuf's: with the IDs made base64, protobufjs reads it
  // as the same message the binary form is.
  span.traceId = b64(span.traceId)
  span.spanId = b64(span.spanId)
  span.parentSpanId = b64(span.parentSpanId)
  const fromJson = TraceRequest.encode(TraceRequest.fromObject(json)).finish()
  t.equal(Buffer.from(fromJson).toString('hex'), encodeTraces({ resource: resourceAttrs, scope, spans: [server] }).toString('hex'))

  const metrics = JSON.parse(encodeMetrics({
    resource: [],
    scope,
    start: NOW,
    time: NOW,
    metrics: [
      { name: 'h', type: 'histogram', points: [{ attributes: [], count: 1, sum: 2, bounds: [1], counts: [0, 1] }] }
    ]
  }, true))
  const h = metrics.resourceMetrics[0].scopeMetrics[0].metrics[0].histogram
  t.same(h.dataPoints[0].bucketCounts, ['0', '1'])
  t.equal(h.aggregationTemporality, 2)
})

t.test('the writer: long varints, a nested message past 127 bytes, growth', async t => {
  const w = new ProtoWriter(4)
  w.uint(1, 2 ** 53 - 1)
  w.begin(2)
  w.string(1, 'x'.repeat(300))
  w.begin(2)
  w.string(1, 'y'.repeat(20000))
  w.end()
  w.end()
  const bytes = w.finish()
  const r = protobuf.Reader.create(bytes)
  t.equal(r.uint32(), 8)
  t.equal(r.uint64().toString(), String(2 ** 53 - 1))
  t.equal(r.uint32(), 18)
  const outer = r.bytes()
  t.equal(r.pos, bytes.length, 'one field after the varint, to the end')
  const inner = protobuf.Reader.create(outer)
  t.equal(inner.uint32(), 10)
  t.equal(inner.string(), 'x'.repeat(300))
  t.equal(inner.uint32(), 18)
  const innermost = protobuf.Reader.create(inner.bytes())
  innermost.uint32()
  t.equal(innermost.string().length, 20000)
})

t.test('EncodedSpans: spans encoded as they end, taken by batches: the bytes of encodeTraces', async t => {
  const spans = new EncodedSpans({ resource: resourceAttrs, scope })
  const many = Array.from({ length: 5 }, (_, i) => ({ ...client, spanId: `${i}`.repeat(16), name: `GET ${i}` }))
  for (const span of [server, ...many]) spans.add(span)
  t.equal(spans.count, 6)
  const first = spans.take(2)
  t.equal(first.toString('hex'), encodeTraces({ resource: resourceAttrs, scope, spans: [server, many[0]] }).toString('hex'))
  t.equal(spans.count, 4, 'the rest wait')
  spans.add(server)
  const rest = spans.take(5)
  t.equal(rest.toString('hex'), encodeTraces({ resource: resourceAttrs, scope, spans: [...many.slice(1), server] }).toString('hex'))
  t.equal(toObject(TraceRequest, rest).resourceSpans[0].scopeSpans[0].spans.length, 5, 'protobufjs reads them')
  t.equal(spans.count, 0)
})
