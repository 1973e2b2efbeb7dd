'use strict'

// --trace: W3C Trace Context (wire/trace-context.js). lila is one hop of a trace: a
// request with a valid traceparent keeps its trace ID and flags and gets a new parent ID
// (lila's own span); one without (or with one that cannot be read) starts a trace,
// sampled. tracestate belongs to the trace it came with: kept with it, dropped with it.
// (With --otlp, the spans lila exports decide instead: telemetry/tracer.js.)
//
//   nextTraceparent(value)  -> { traceparent, traceId, fresh } for the request sent on
//                              (fresh: the trace starts here)

const { parseTraceparent, randomTraceId, randomSpanId } = require('../../wire/trace-context')

const SAMPLED = '01'

function nextTraceparent (value) {
  const parent = parseTraceparent(value)
  const fresh = parent === null
  const traceId = fresh ? randomTraceId() : parent.traceId
  const flags = fresh ? SAMPLED : parent.flags
  return { traceparent: `00-${traceId}-${randomSpanId()}-${flags}`, traceId, fresh }
}

module.exports = { nextTraceparent }
