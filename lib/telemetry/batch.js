'use strict'

// Spans on their way out, as OpenTelemetry's BatchSpanProcessor holds them: a bounded
// queue (OTEL_BSP_MAX_QUEUE_SIZE, 2048) that a request's end only appends to; a span
// past it is dropped and counted, never memory without bound. A batch (up to
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512) is exported every
// OTEL_BSP_SCHEDULE_DELAY (5 s), or as soon as a batch is full; one export at a time
// (exporter.js retries it), the queue filling meanwhile. close() sends what is left,
// once, within the export's timeout.
//
//   const batch = new SpanBatch(exporter, spans, { maxQueue, size, delay })
//                         spans: wire/otlp.js EncodedSpans (protobuf: each span encoded
//                         as it ends), or JsonSpans here; { add, count, take(n) }
//   batch.add(span) -> done  from the request path: a comparison and the span encoded;
//                         done: nothing of the span object is kept (it may be reused)
//   batch.snapshot() -> { queued, dropped, ...exporter.snapshot() }

class SpanBatch {
  constructor (exporter, spans, { maxQueue, size, delay }) {
    this.exporter = exporter
    this.queue = spans // what waits: { add, count, take(n) -> the request's bytes }
    this.maxQueue = maxQueue
    this.size = size
    this.dropped = 0 // over the queue's bound
    this.exporting = null // the export under way: a Promise
    this.soon = false // an export asked for at the next turn
    this.timer = setInterval(() => this.flush(), delay)
    this.timer.unref()
  }

  add (span) {
    if (this.queue.count >= this.maxQueue) {
      this.dropped++
      return true
    }
    const done = this.queue.add(span)
    if (this.queue.count >= this.size && this.exporting === null && !this.soon) {
      this.soon = true
      setImmediate(() => {
        this.soon = false
        this.flush()
      })
    }
    return done
  }

  flush () {
    if (this.exporting !== null || this.queue.count === 0) return this.exporting
    const n = Math.min(this.queue.count, this.size)
    this.exporting = this.exporter.send(this.queue.take(n), n).then(() => {
      this.exporting = null
      if (this.queue.count >= this.size) this.flush()
    })
    return this.exporting
  }

  // The last spans, sent once (the exporter's timeout bounds it); then no more.
  async close () {
    clearInterval(this.timer)
    this.exporter.end()
    if (this.exporting !== null) await this.exporting
    const last = this.flush()
    if (last) await last
    this.exporter.close()
  }

  snapshot () {
    return { queued: this.queue.count, dropped: this.dropped, ...this.exporter.snapshot() }
  }
}

// OTLP/JSON's spans wait as objects, encoded when they go (wire/otlp.js encodeTraces).
class JsonSpans {
  constructor (encode) {
    this.encode = encode // spans -> the request's bytes
    this.spans = []
  }

  get count () {
    return this.spans.length
  }

  add (span) {
    this.spans.push(span)
    return false // kept until it goes
  }

  take (n) {
    return this.encode(this.spans.splice(0, n))
  }
}

module.exports = { SpanBatch, JsonSpans }
