'use strict'

// OTLP (OpenTelemetry's protocol, opentelemetry-proto v1): the two requests lila sends
// a collector, ExportTraceServiceRequest and ExportMetricsServiceRequest, as protobuf
// (protobuf.js) or as OTLP/JSON. Pure: plain data in, a Buffer out. Only the fields
// lila fills are written; field numbers are the .proto's, in their order, and proto3's
// defaults are left out, so the bytes are what protobufjs writes for the same message
// (test/otlp-wire.test.js decodes them with the real .proto files).
//
//   encodeTraces({ resource, scope, spans }, json) -> Buffer
//   new EncodedSpans({ resource, scope }): spans encoded as they end, taken by batches
//   encodeMetrics({ resource, scope, start, time, metrics }, json) -> Buffer
//
// resource: attributes; scope: { name, version }. Attributes are flat [key, value, ...]
// with a string, a boolean or a number (an integer is an int, else a double). Times
// are milliseconds since the epoch, to the microsecond (nanoseconds on the wire).
//   span: { traceId, spanId (hex), parentId (hex or null), traceState (or null), flags,
//           name, kind (KIND), start, end, attributes, events: null or [{ time, name,
//           attributes }], status (STATUS), message (or null) }
//   metric: { name, description, unit, type: 'sum' | 'gauge' | 'histogram', points }
//           a sum is cumulative and monotonic (a counter); a point is { attributes,
//           value }, or for a histogram { attributes, count, sum, bounds, counts }
//           (counts per bucket, one more than bounds)

const { ProtoWriter } = require('./protobuf')

const KIND = Object.freeze({ internal: 1, server: 2, client: 3 })
const STATUS = Object.freeze({ unset: 0, ok: 1, error: 2 })
// Span.flags: the W3C trace flags in the low byte, and whether the parent is remote.
const FLAGS = Object.freeze({ sampled: 0x01, hasIsRemote: 0x100, isRemote: 0x200 })
const CUMULATIVE = 2
const CONTENT_TYPES = Object.freeze({ protobuf: 'application/x-protobuf', json: 'application/json' })

// Milliseconds (a double: a fraction past the microsecond is noise) -> nanoseconds, for
// OTLP/JSON (the protobuf writer has its own: protobuf.js nanos).
function nanos (ms) {
  const seconds = Math.floor(ms / 1000)
  const micros = Math.min(999999, Math.round((ms - seconds * 1000) * 1000))
  return BigInt(seconds) * 1000000000n + BigInt(micros) * 1000n
}

function encodeTraces (batch, json = false) {
  if (json) return Buffer.from(JSON.stringify(tracesJson(batch)))
  const w = new ProtoWriter(16384)
  w.begin(1) // ResourceSpans
  resource(w, batch.resource)
  w.begin(2) // ScopeSpans
  scope(w, batch.scope)
  for (const span of batch.spans) writeSpan(w, span)
  w.end()
  w.end()
  return w.finish()
}

// Span { ... } as field 2 of ScopeSpans.
function writeSpan (w, span) {
  w.begin(2)
  w.hex(1, span.traceId)
  w.hex(2, span.spanId)
  if (span.traceState) w.string(3, span.traceState)
  if (span.parentId) w.hex(4, span.parentId)
  w.string(5, span.name)
  w.uint(6, span.kind)
  w.nanos(7, span.start)
  w.nanos(8, span.end)
  attributes(w, 9, span.attributes)
  if (span.events !== null) {
    for (const event of span.events) {
      w.begin(11)
      w.nanos(1, event.time)
      w.string(2, event.name)
      attributes(w, 3, event.attributes)
      w.end()
    }
  }
  if (span.status !== STATUS.unset || span.message) {
    w.begin(15)
    if (span.message) w.string(2, span.message)
    if (span.status !== STATUS.unset) w.uint(3, span.status)
    w.end()
  }
  if (span.flags !== 0) w.fixed32(16, span.flags)
  w.end()
}

// Spans encoded as they end, so that a batch waiting for its export holds bytes, not
// objects (which would live long enough to cost the garbage collector a copy or two);
// the request is made around the first `n` of them when the batch goes. The same bytes
// as encodeTraces of the same spans.
//   const spans = new EncodedSpans({ resource, scope })
//   spans.add(span) -> true (the span's bytes are kept, not the span); spans.count
//   spans.take(n) -> the ExportTraceServiceRequest of the first n (the rest stay): its
//                    bytes are good until the next take (batch.js exports one at a time)
class EncodedSpans {
  constructor ({ resource: attrs, scope: scopeOf }) {
    const w = new ProtoWriter(1024)
    resource(w, attrs)
    this.resource = w.finish() // ResourceSpans' field 1, whole
    const s = new ProtoWriter(256)
    scope(s, scopeOf)
    this.scope = s.finish() // ScopeSpans' field 1, whole
    this.w = new ProtoWriter(65536, false) // its own buffer: kept while spans wait
    this.ends = [] // where each span's bytes end
    this.out = new ProtoWriter(65536, false) // the request taken last, its buffer kept
  }

  get count () {
    return this.ends.length
  }

  add (span) {
    writeSpan(this.w, span)
    this.ends.push(this.w.pos)
    return true
  }

  take (n) {
    const { w, ends } = this
    const length = ends[n - 1]
    const scopeSpans = this.scope.length + length
    const resourceSpans = this.resource.length + 1 + varintSize(scopeSpans) + scopeSpans
    const out = this.out
    out.pos = 0
    out.tag(1, 2)
    out.varint(resourceSpans)
    out.raw(this.resource)
    out.tag(2, 2)
    out.varint(scopeSpans)
    out.raw(this.scope)
    out.raw(w.buf.subarray(0, length))
    // what is left moves to the start
    w.buf.copyWithin(0, length, w.pos)
    w.pos -= length
    ends.splice(0, n)
    for (let i = 0; i < ends.length; i++) ends[i] -= length
    return out.buf.subarray(0, out.pos)
  }
}

function varintSize (n) {
  let size = 1
  for (; n >= 0x80; n = Math.floor(n / 0x80)) size++
  return size
}

function encodeMetrics (batch, json = false) {
  if (json) return Buffer.from(JSON.stringify(metricsJson(batch)))
  const w = new ProtoWriter(16384)
  w.begin(1) // ResourceMetrics
  resource(w, batch.resource)
  w.begin(2) // ScopeMetrics
  scope(w, batch.scope)
  for (const metric of batch.metrics) {
    w.begin(2)
    w.string(1, metric.name)
    if (metric.description) w.string(2, metric.description)
    if (metric.unit) w.string(3, metric.unit)
    const histogram = metric.type === 'histogram'
    w.begin(histogram ? 9 : metric.type === 'sum' ? 7 : 5)
    for (const point of metric.points) {
      w.begin(1)
      w.nanos(2, batch.start)
      w.nanos(3, batch.time)
      if (histogram) {
        w.fixed64(4, point.count)
        w.double(5, point.sum)
        w.packedFixed64(6, point.counts)
        w.packedDoubles(7, point.bounds)
        attributes(w, 9, point.attributes)
      } else {
        if (Number.isInteger(point.value)) w.sfixed64(6, point.value)
        else w.double(4, point.value)
        attributes(w, 7, point.attributes)
      }
      w.end()
    }
    if (metric.type !== 'gauge') w.uint(2, CUMULATIVE)
    if (metric.type === 'sum') w.bool(3, true)
    w.end()
    w.end()
  }
  w.end()
  w.end()
  return w.finish()
}

function resource (w, attrs) {
  w.begin(1)
  attributes(w, 1, attrs)
  w.end()
}

function scope (w, { name, version }) {
  w.begin(1)
  w.string(1, name)
  if (version) w.string(2, version)
  w.end()
}

// KeyValue { key = 1; AnyValue value = 2 }, AnyValue's one of string 1, bool 2, int 3,
// double 4. Most attributes repeat from span to span (the method, the backend, the
// status): each key's KeyValues are kept encoded, up to PER_KEY values a key (then
// that key's start afresh), so a batch copies bytes rather than encoding them again;
// the value a key had last is checked first, as it mostly comes again. A fraction
// (a time) is written as it comes: it seldom repeats.
const ENCODED = new Map() // key -> Encoded
const PER_KEY = 256

class Encoded {
  constructor () {
    this.last = undefined // the value seen last, and its KeyValue's bytes
    this.bytes = null
    this.values = new Map() // value -> its KeyValue's bytes
  }
}

function attributes (w, field, flat) {
  for (let i = 0; i < flat.length; i += 2) {
    const key = flat[i]
    const value = flat[i + 1]
    let known = ENCODED.get(key)
    if (known === undefined) ENCODED.set(key, known = new Encoded())
    if (value === known.last) {
      w.message(field, known.bytes)
      continue
    }
    if (typeof value === 'number' && !Number.isInteger(value)) {
      w.begin(field)
      w.string(1, key)
      w.begin(2)
      w.double(4, value)
      w.end()
      w.end()
      continue
    }
    const { values } = known
    let bytes = values.get(value)
    if (bytes === undefined) {
      if (values.size >= PER_KEY) values.clear()
      values.set(value, bytes = keyValue(key, value))
    }
    known.last = value
    known.bytes = bytes
    w.message(field, bytes)
  }
}

function keyValue (key, value) {
  const w = new ProtoWriter(64)
  w.string(1, key)
  w.begin(2)
  if (typeof value === 'string') w.string(1, value)
  else if (typeof value === 'boolean') w.bool(2, value)
  else if (Number.isInteger(value)) w.int64(3, value)
  else w.double(4, value)
  w.end()
  return w.finish()
}

// OTLP/JSON (the protobuf's JSON mapping, as OTLP specifies it): lowerCamelCase names,
// IDs in hex, enums as numbers, 64-bit integers as decimal strings.

function tracesJson ({ resource, scope, spans }) {
  return {
    resourceSpans: [{
      resource: { attributes: attributesJson(resource) },
      scopeSpans: [{ scope: scopeJson(scope), spans: spans.map(spanJson) }]
    }]
  }
}

function spanJson (span) {
  const out = { traceId: span.traceId, spanId: span.spanId }
  if (span.traceState) out.traceState = span.traceState
  if (span.parentId) out.parentSpanId = span.parentId
  out.flags = span.flags
  out.name = span.name
  out.kind = span.kind
  out.startTimeUnixNano = String(nanos(span.start))
  out.endTimeUnixNano = String(nanos(span.end))
  out.attributes = attributesJson(span.attributes)
  if (span.events !== null) {
    out.events = span.events.map(e =>
      ({ timeUnixNano: String(nanos(e.time)), name: e.name, attributes: attributesJson(e.attributes) }))
  }
  if (span.status !== STATUS.unset || span.message) {
    out.status = { code: span.status }
    if (span.message) out.status.message = span.message
  }
  return out
}

function metricsJson ({ resource, scope, start, time, metrics }) {
  const startTimeUnixNano = String(nanos(start))
  const timeUnixNano = String(nanos(time))
  const pointJson = point => {
    const out = { attributes: attributesJson(point.attributes), startTimeUnixNano, timeUnixNano }
    if (point.counts === undefined) {
      if (Number.isInteger(point.value)) out.asInt = String(point.value)
      else out.asDouble = point.value
      return out
    }
    out.count = String(point.count)
    out.sum = point.sum
    out.bucketCounts = point.counts.map(String)
    out.explicitBounds = point.bounds
    return out
  }
  const metricJson = metric => {
    const out = { name: metric.name }
    if (metric.description) out.description = metric.description
    if (metric.unit) out.unit = metric.unit
    const dataPoints = metric.points.map(pointJson)
    if (metric.type === 'gauge') out.gauge = { dataPoints }
    else if (metric.type === 'sum') out.sum = { dataPoints, aggregationTemporality: CUMULATIVE, isMonotonic: true }
    else out.histogram = { dataPoints, aggregationTemporality: CUMULATIVE }
    return out
  }
  return {
    resourceMetrics: [{
      resource: { attributes: attributesJson(resource) },
      scopeMetrics: [{ scope: scopeJson(scope), metrics: metrics.map(metricJson) }]
    }]
  }
}

function scopeJson ({ name, version }) {
  return version ? { name, version } : { name }
}

function attributesJson (flat) {
  const out = []
  for (let i = 0; i < flat.length; i += 2) {
    const value = flat[i + 1]
    let any
    if (typeof value === 'string') any = { stringValue: value }
    else if (typeof value === 'boolean') any = { boolValue: value }
    else if (Number.isInteger(value)) any = { intValue: String(value) }
    else any = { doubleValue: value }
    out.push({ key: flat[i], value: any })
  }
  return out
}

module.exports = { encodeTraces, encodeMetrics, EncodedSpans, KIND, STATUS, FLAGS, CONTENT_TYPES }
