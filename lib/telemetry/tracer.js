'use strict'

// --otlp's spans: which are sampled and who their parents are. Parent-based, as the
// SDKs' default sampler: a request whose traceparent (wire/trace-context.js) says
// sampled is, one that says not is not; one without (or with one that cannot be read)
// starts a trace, sampled when its trace ID falls under --trace-sample (by the ID, so
// that every hop that samples by ratio agrees). The spans a request makes under its
// SERVER span (each attempt's CLIENT span, a mirror's) follow it. A sampled span's end
// goes to the batch (batch.js), off the request's path.
//
//   const tracer = new Tracer({ sample, batch })
//   tracer.serverSpan(traceparent, tracestate, name, start) -> Span   (a request, a tcp connection)
//   tracer.childSpan(parent, kind, name) -> Span

const { Span, epochNow } = require('./span')
const { parseTraceparent, randomTraceId, randomSpanId } = require('../wire/trace-context')
const { KIND, FLAGS } = require('../wire/otlp')

const TWO_56 = 2 ** 56

// Spans taken back (span.js), at most this many waiting to be made again.
const SPARE = 256

class Tracer {
  constructor ({ sample, batch }) {
    this.sample = sample // 0..1
    this.batch = batch // SpanBatch, or null: nothing exported (a test)
    this.spare = [] // spans whose end the batch is done with
  }

  serverSpan (traceparent, tracestate, name, start = epochNow(), kind = KIND.server) {
    const parent = traceparent === undefined ? null : parseTraceparent(traceparent)
    if (parent !== null) {
      const recording = (parseInt(parent.flags, 16) & 1) === 1
      return this.span().begin(parent.traceId, randomSpanId(), parent.parentId,
        tracestate === undefined ? null : tracestate,
        (recording ? FLAGS.sampled : 0) | FLAGS.hasIsRemote | FLAGS.isRemote, kind, name, start, recording)
    }
    const traceId = randomTraceId()
    const recording = this.sampled(traceId)
    return this.span().begin(traceId, randomSpanId(), null, null, (recording ? FLAGS.sampled : 0) | FLAGS.hasIsRemote,
      kind, name, start, recording)
  }

  childSpan (parent, kind, name) {
    const { recording } = parent
    return this.span().begin(parent.traceId, randomSpanId(), parent.spanId, parent.traceState,
      (recording ? FLAGS.sampled : 0) | FLAGS.hasIsRemote, kind, name, epochNow(), recording)
  }

  span () {
    return this.spare.length > 0 ? this.spare.pop() : new Span(this)
  }

  // TraceIdRatioBased: the trace ID's last 56 bits, as a fraction, under the ratio.
  sampled (traceId) {
    if (this.sample >= 1) return true
    if (this.sample <= 0) return false
    return parseInt(traceId.slice(18), 16) / TWO_56 < this.sample
  }

  // A span ended: a sampled one to the batch; back here unless the batch keeps the
  // object (OTLP/JSON's, until it goes).
  ended (span) {
    if (span.recording && (this.batch === null || !this.batch.add(span))) return
    if (this.spare.length < SPARE) this.spare.push(span)
  }
}

module.exports = { Tracer }
