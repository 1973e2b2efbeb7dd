'use strict'

// OTLP/HTTP export, as the OpenTelemetry SDKs do it: a POST of one encoded request
// (wire/otlp.js) to a collector's /v1/traces or /v1/metrics, gzip when asked (level 1), the
// headers given (OTEL_EXPORTER_OTLP_HEADERS), a timeout per try, and retries with
// backoff (1 s, growing to 5 s, jittered; a Retry-After said by the collector taken,
// up to 30 s) on what may pass: 429, 502, 503, 504, and a connection that failed. At
// most five tries; then the batch is given up and counted. One export at a time: the
// caller (batch.js, admin/metrics-push.js) holds what comes meanwhile, boundedly.
// A collector that is down, slow or refusing is said once, and once when it answers
// again; it never slows a request (nothing here runs on a request's path).
//
//   const exporter = new OtlpExporter({ url, headers, compression, timeout, json }, { what, log })
//   exporter.send(body, count) -> Promise<boolean>   true: the collector took it
//   exporter.snapshot() -> { url, sent, failed, exports, lastError }
//   exporter.end()      closing: no more waiting between tries
//   exporter.close()

const zlib = require('zlib')
const { CONTENT_TYPES } = require('../wire/otlp')
const { PostConnection } = require('./post')

const RETRYABLE = new Set([429, 502, 503, 504])
const TRIES = 5
const FIRST_BACKOFF_MS = 1000
const MAX_BACKOFF_MS = 5000
const MAX_RETRY_AFTER_MS = 30000

class OtlpExporter {
  // settings: config/otel-environment.js's for one signal; what: 'spans' | 'metrics'.
  constructor ({ url, headers, compression, timeout, json }, { what, log, random = Math.random }) {
    this.url = new URL(url)
    this.shown = url
    this.what = what
    this.log = log
    this.random = random
    this.timeout = timeout
    this.gzip = compression === 'gzip'
    const fields = { 'content-type': json ? CONTENT_TYPES.json : CONTENT_TYPES.protobuf }
    for (const [name, value] of headers) fields[name.toLowerCase()] = value
    if (this.gzip) fields['content-encoding'] = 'gzip'
    this.connection = new PostConnection(this.url, { headers: fields, timeout })
    this.sent = 0 // items (spans, metric points) the collector took
    this.failed = 0 // items given up after their tries
    this.exports = 0 // requests the collector took
    this.lastError = null
    this.failing = false // said so, and not yet said that it answers again
    this.ending = false // closing: one try each, no waiting
    this.closed = false
    this.backoff = null // { timer, resolve } while waiting to try again
  }

  async send (body, count) {
    const payload = this.gzip ? await gzip(body) : body
    let delay = FIRST_BACKOFF_MS
    for (let tries = 1; !this.closed; tries++) {
      const { status, error, retryAfter } = await this.post(payload)
      if (status >= 200 && status < 300) {
        this.took(count)
        return true
      }
      const reason = error || `answered ${status}`
      const retryable = error !== null || RETRYABLE.has(status)
      if (!retryable || tries >= TRIES || this.ending) {
        this.gaveUp(count, reason, retryable)
        return false
      }
      const wait = retryAfter >= 0 ? Math.min(retryAfter, MAX_RETRY_AFTER_MS) : delay * (0.5 + this.random() / 2)
      delay = Math.min(delay * 2, MAX_BACKOFF_MS)
      this.lastError = reason
      if (!this.failing) this.say(`${reason}; trying again`)
      await this.wait(wait)
    }
    this.failed += count
    return false
  }

  took (count) {
    this.sent += count
    this.exports++
    if (this.failing) {
      this.failing = false
      this.log.info(`OTLP: ${this.what} reach ${this.shown} again`)
    }
  }

  gaveUp (count, reason, retryable) {
    this.failed += count
    this.lastError = reason
    if (this.failing) return
    const why = retryable ? 'it did not answer within 5 tries' : 'it refused them'
    this.say(`${reason}; ${why}: ${count} ${this.what} dropped (counted in /metrics)`)
  }

  say (words) {
    this.failing = true
    this.log.warn(`OTLP: cannot export ${this.what} to ${this.shown}: ${words}; said once until it answers again`)
  }

  // One POST: { status, error (a reason, or null), retryAfter (ms, or -1) }.
  post (payload) {
    return this.connection.post(payload)
  }

  wait (ms) {
    return new Promise(resolve => {
      const timer = setTimeout(() => {
        this.backoff = null
        resolve()
      }, ms)
      this.backoff = { timer, resolve }
    })
  }

  snapshot () {
    const { shown: url, sent, failed, exports, lastError } = this
    return { url, sent, failed, exports, lastError }
  }

  // lila is closing: what is under way gets one more try, at once, and the rest one each.
  end () {
    this.ending = true
    if (this.backoff !== null) {
      clearTimeout(this.backoff.timer)
      this.backoff.resolve()
      this.backoff = null
    }
  }

  close () {
    this.end()
    this.closed = true
    this.connection.close()
  }
}

function gzip (body) {
  return new Promise((resolve, reject) => zlib.gzip(body, { level: 1 }, (err, out) => err ? reject(err) : resolve(out)))
}

module.exports = { OtlpExporter }
