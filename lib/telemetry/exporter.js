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

const http = require('http')
const https = require('https')
const zlib = require('zlib')
const { CONTENT_TYPES } = require('../wire/otlp')

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
    this.transport = this.url.protocol === 'https:' ? https : http
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: 1 })
    this.headers = { 'content-type': json ? CONTENT_TYPES.json : CONTENT_TYPES.protobuf }
    for (const [name, value] of headers) this.headers[name] = value
    if (this.gzip) this.headers['content-encoding'] = 'gzip'
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
    return new Promise(resolve => {
      let settled = false
      const settle = answer => {
        if (settled) return
        settled = true
        resolve(answer)
      }
      const headers = { ...this.headers, 'content-length': payload.length }
      const req = this.transport.request(this.url, { method: 'POST', headers, agent: this.agent }, res => {
        res.resume() // a partial success's words are not kept
        res.on('end', () => settle({ status: res.statusCode, error: null, retryAfter: retryAfterOf(res) }))
        res.on('error', err => settle({ status: 0, error: err.message, retryAfter: -1 }))
      })
      req.setTimeout(this.timeout, () => req.destroy(new Error(`no answer within ${this.timeout} ms`)))
      req.on('error', err => settle({ status: 0, error: err.code || err.message, retryAfter: -1 }))
      req.end(payload)
    })
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
    this.agent.destroy()
  }
}

// Retry-After: seconds, or an HTTP date; -1 when absent or unreadable.
function retryAfterOf (res) {
  const value = res.headers['retry-after']
  if (value === undefined) return -1
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? -1 : Math.max(0, at - Date.now())
}

function gzip (body) {
  return new Promise((resolve, reject) => zlib.gzip(body, { level: 1 }, (err, out) => err ? reject(err) : resolve(out)))
}

module.exports = { OtlpExporter }
