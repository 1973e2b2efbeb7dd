'use strict'

// --otlp's spans made again (lib/telemetry/tracer.js, span.js): a span the batch
// encoded as it ended, or one not sampled, is taken back and begun afresh for a later
// request, its bytes already kept; OTLP/JSON's batch keeps its spans as objects, which
// are never reused.

const t = require('tap')
const { Tracer } = require('../lib/telemetry/tracer')
const { JsonSpans } = require('../lib/telemetry/batch')
const { EncodedSpans, encodeTraces, KIND, STATUS } = require('../lib/wire/otlp')

const RESOURCE = { resource: ['service.name', 'spans-test'], scope: { name: 'lila', version: '1' } }
const SAMPLED = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
const UNSAMPLED = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00'

t.test('a span encoded as it ended is made again, begun afresh; its bytes stay as they were', async t => {
  const queue = new EncodedSpans(RESOURCE)
  const tracer = new Tracer({ sample: 1, batch: queue })
  const first = tracer.serverSpan(SAMPLED, 'vendor=1', 'GET /a', 1000)
  first.set('url.path', '/a')
  first.event('retry', ['lila.backend', 'b:1'], 1001)
  first.fail('answered 502')
  first.finish(1002)
  const bytes = Buffer.from(queue.take(1))
  const copy = { ...first, attributes: [...first.attributes], events: [...first.events] }
  t.same(bytes, encodeTraces({ ...RESOURCE, spans: [copy] }), 'encoded as it ended')
  const second = tracer.serverSpan(undefined, undefined, 'POST', 2000)
  t.equal(second, first, 'the same object, made again')
  const { attributes, events, status, message, end, parentId, traceState } = second
  t.same([attributes, events, status, message, end, parentId, traceState],
    [[], null, STATUS.unset, null, 0, null, null], 'begun afresh')
  t.not(second.traceId, copy.traceId, 'a trace of its own')
  second.set('url.path', '/b')
  second.finish(2001)
  t.not(Buffer.from(queue.take(1)).equals(bytes), 'the second span\'s bytes are its own')
  const child = tracer.childSpan(tracer.serverSpan(SAMPLED, undefined, 'GET', 3000), KIND.client, 'GET')
  t.equal(child.kind, KIND.client)
})

t.test('a span not sampled is made again too; OTLP/JSON\'s spans never are', async t => {
  const queue = new EncodedSpans(RESOURCE)
  const tracer = new Tracer({ sample: 1, batch: queue })
  const unsampled = tracer.serverSpan(UNSAMPLED, undefined, 'GET', 1000)
  t.equal(unsampled.recording, false)
  unsampled.finish()
  t.equal(queue.count, 0, 'nothing exported')
  t.equal(tracer.serverSpan(SAMPLED, undefined, 'GET', 1001), unsampled, 'made again')

  const json = new JsonSpans(spans => spans)
  const jsonTracer = new Tracer({ sample: 1, batch: json })
  const kept = jsonTracer.serverSpan(SAMPLED, undefined, 'GET', 1000)
  kept.set('url.path', '/kept')
  kept.finish(1001)
  const next = jsonTracer.serverSpan(SAMPLED, undefined, 'GET', 1002)
  t.not(next, kept, 'a new object: the batch holds the first until it goes')
  t.same(json.take(1)[0].attributes, ['url.path', '/kept'], 'as it ended')
})
