'use strict'

// One span, as wire/otlp.js encodes it: its IDs, kind, name, times (ms since the epoch,
// to the microsecond), attributes (flat: key, value, ...), events and status. A span
// that is not sampled still has IDs (the traceparent a backend gets names it, as the
// SDKs' non-recording spans do) but keeps nothing: set() and event() return at once,
// and its end is not exported. Made by tracer.js; ended once. A span not sampled, or
// one whose end the batch encoded at once, is taken back by the tracer and made again
// for a later request: whoever holds a span lets go of it as it ends.

const { performance } = require('perf_hooks')
const { traceparentOf } = require('../wire/trace-context')
const { STATUS } = require('../wire/otlp')

const ORIGIN = performance.timeOrigin

// Now, in ms since the epoch with performance.now()'s precision.
const epochNow = () => ORIGIN + performance.now()
// A performance.now() reading (exchange.openedAt) as ms since the epoch.
const epochOf = reading => ORIGIN + reading

class Span {
  constructor (tracer) {
    this.tracer = tracer
    this.recording = false
    this.traceId = ''
    this.spanId = ''
    this.parentId = null
    this.traceState = null
    this.flags = 0
    this.kind = 0
    this.name = ''
    this.start = 0
    this.end = 0 // not ended
    this.attributes = []
    this.events = null
    this.status = STATUS.unset
    this.message = null
  }

  // A span made anew (tracer.js), fresh or taken back.
  begin (traceId, spanId, parentId, traceState, flags, kind, name, start, recording) {
    this.recording = recording
    this.traceId = traceId
    this.spanId = spanId
    this.parentId = parentId
    this.traceState = traceState
    this.flags = flags
    this.kind = kind
    this.name = name
    this.start = start
    this.end = 0
    if (this.attributes.length !== 0) this.attributes = [] // (setting length 0 costs more)
    this.events = null
    this.status = STATUS.unset
    this.message = null
    return this
  }

  // What the next hop gets: this span as its parent.
  get traceparent () {
    return traceparentOf(this.traceId, this.spanId, this.recording)
  }

  set (key, value) {
    if (this.recording) this.attributes.push(key, value)
  }

  event (name, attributes = [], time = epochNow()) {
    if (this.recording) (this.events ||= []).push({ time, name, attributes })
  }

  fail (message) {
    this.status = STATUS.error
    this.message = message
  }

  finish (time) {
    if (this.end !== 0) return
    this.end = this.recording ? time || epochNow() : 1 // not sampled: its end is no one's
    this.tracer.ended(this)
  }
}

module.exports = { Span, epochNow, epochOf }
