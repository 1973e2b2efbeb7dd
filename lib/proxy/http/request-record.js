'use strict'

const { performance } = require('perf_hooks')
const { fieldValue } = require('../../fields')

// Once per exchange (exchange.js), as it ends: counted (response-stats.js, --canary's
// counts), written to the access log, its --otlp span ended.
function recorded (x) {
  const { accessLog, protocol } = x.listener
  const ms = performance.now() - x.openedAt
  const answered = x.res !== null || x.tunnel !== null // by a backend, not lila
  protocol.stats.count(x.status, answered ? x.attempt.backend : x.forwarding.interceptedBy, ms)
  if (x.canary !== null) x.canary.count(x.side, x.status, ms)
  if (accessLog !== null) accessLog.log(requestRecord(x, ms))
  if (x.trace !== null) x.trace.ended(x)
}

// What the access log (admin/access-log.js) prints of one HTTP request, whatever HTTP
// its client and backend spoke: `x` is the exchange (exchange.js), read for its
// listener, head, attempt, status, byte counts, request ID and route.
function requestRecord (x, ms) {
  const { head, attempt } = x
  const record = {
    listener: x.listener.name,
    protocol: 'http',
    client: x.clientAddress,
    backend: attempt.backend !== null ? attempt.backend.address : attempt.lastBackend,
    method: head.method,
    target: head.target,
    version: VERSIONS[head.version],
    status: x.status,
    bytesIn: x.bytesIn,
    bytesOut: x.bytesOut,
    ms,
    host: head.host,
    referer: fieldValue(head.fields, 'referer'),
    userAgent: fieldValue(head.fields, 'user-agent')
  }
  if (x.requestId !== null) record.requestId = x.requestId
  if (x.traceId !== undefined && x.traceId !== null) record.traceId = x.traceId // --trace
  if (x.route !== null && x.route.name !== null) record.route = x.route.name // --route
  if (x.cut !== null) record.cut = x.cut // the response was cut after it started
  return record
}

// A parsed head's `version` (http1/parse.js 0 or 1, http2/request.js 2) as the log says it.
const VERSIONS = ['HTTP/1.0', 'HTTP/1.1', 'HTTP/2.0']

module.exports = { recorded }
