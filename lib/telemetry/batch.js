'use strict'

// Spans on their way out, as OpenTelemetry's BatchSpanProcessor holds them: a bounded
// queue (OTEL_BSP_MAX_QUEUE_SIZE, 2048) that a request's end only appends to; a span
// past it is dropped and counted, never memory without bound. A batch (up to
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512) is encoded and exported every
// OTEL_BSP_SCHEDULE_DELAY (5 s), or as soon as a batch is full; one export at a time
// (exporter.js retries it), the queue filling meanwhile. close() sends what is left,
// once, within the export's timeout.
//
//   const batch = new SpanBatch(exporter, encode, { maxQueue, size, delay })
//   batch.add(span)       from the request path: one comparison and a push
//   batch.snapshot() -> { queued, dropped, ...exporter.snapshot() }

class SpanBatch {
  constructor (exporter, encode, { maxQueue, size, delay }) {
    this.exporter = exporter
    this.encode = encode // spans -> the request's bytes
    this.maxQueue = maxQueue
    this.size = size
    this.queue = []
    this.dropped = 0 // over the queue's bound
    this.exporting = null // the export under way: a Promise
    this.soon = false // an export asked for at the next turn
    this.timer = setInterval(() => this.flush(), delay)
    this.timer.unref()
  }

  add (span) {
    if (this.queue.length >= this.maxQueue) {
      this.dropped++
      return
    }
    this.queue.push(span)
    if (this.queue.length >= this.size && this.exporting === null && !this.soon) {
      this.soon = true
      setImmediate(() => {
        this.soon = false
        this.flush()
      })
    }
  }

  flush () {
    if (this.exporting !== null || this.queue.length === 0) return this.exporting
    const spans = this.queue.length <= this.size ? this.queue : this.queue.slice(0, this.size)
    this.queue = spans === this.queue ? [] : this.queue.slice(this.size)
    this.exporting = this.exporter.send(this.encode(spans), spans.length).then(() => {
      this.exporting = null
      if (this.queue.length >= this.size) this.flush()
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
    return { queued: this.queue.length, dropped: this.dropped, ...this.exporter.snapshot() }
  }
}

module.exports = { SpanBatch }
