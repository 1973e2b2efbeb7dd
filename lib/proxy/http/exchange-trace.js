'use strict'

// --otlp: one exchange's spans (telemetry/tracer.js), with OpenTelemetry's HTTP
// semantic conventions. The request is a SERVER span, its parent the client's
// traceparent when it sent one; each attempt at a backend is a CLIENT span under it (a
// retry is a second one, the first ended with an error), and a --mirror copy one of its
// own; the traceparent a backend gets names its attempt's CLIENT span, so that the app's
// spans hang under it. Events on the SERVER span: a retry, a backend ejected, lila's own
// refusal (413, 429, ...). The exchange holds one (`trace`, null without --otlp) and
// calls it where its events are; nothing here writes the exchange's fields.

const { KIND } = require('../../wire/otlp')
const { Span, epochOf } = require('../../telemetry/span')

// lila's own answers that are a refusal of the request, not a failure: an event.
const REFUSALS = new Set([400, 401, 403, 404, 408, 413, 429, 431, 508])
const VERSIONS = ['1.0', '1.1', '2']
// What the request's span is once it ended (the tracer may make it again for another
// request): a span that records nothing, for whatever comes late.
const ENDED = new Span(null)
ENDED.end = 1 // ended: never handed back

class ExchangeTrace {
  constructor (tracer, x) {
    const { head } = x
    // http.route: the route's path prefix (a --route of a host alone has none)
    const routed = x.route !== null && x.route.match !== null // a --route's, not the listener's own
    const route = routed ? x.route.match.path : null
    const name = route === null ? head.method : `${head.method} ${route}`
    // the fields read, in one pass
    let traceparent, tracestate, agent
    const { fields } = head
    for (let i = 1; i < fields.length; i += 3) {
      const lower = fields[i]
      const value = fields[i + 1]
      if (lower === 'traceparent') traceparent = traceparent === undefined ? value : null // twice: none
      else if (lower === 'tracestate') tracestate = tracestate === undefined ? value : `${tracestate},${value}`
      else if (lower === 'user-agent') agent = value
    }
    const span = this.span = tracer.serverSpan(traceparent ?? undefined, tracestate, name, epochOf(x.openedAt))
    this.tracer = tracer
    this.attempt = null // the CLIENT span of the attempt under way
    this.seats = null // { backend, wasDown, said } per attempt, for the ejections it led to
    this.traceId = span.traceId
    if (!span.recording) return
    span.set('http.request.method', head.method)
    span.set('url.path', head.path)
    span.set('url.scheme', x.listener.protocol.rewrite.proto)
    if (head.host !== null) {
      const [host, port] = hostAndPort(head.host)
      span.set('server.address', host)
      if (port !== null) span.set('server.port', port)
    }
    span.set('network.peer.address', x.clientAddress)
    span.set('network.protocol.version', VERSIONS[head.version] || String(head.version))
    if (agent !== undefined) span.set('user_agent.original', agent)
    if (route !== null) span.set('http.route', route)
    if (routed) span.set('lila.route', x.route.name)
    if (x.grpc !== null) span.set('rpc.system', 'grpc')
    span.set('lila.listener', x.listener.name)
  }

  // The attempt seated on `lease`: its new CLIENT span, whose traceparent the backend
  // gets (message/rewrite.js requestFields, as the leg sends the request).
  seated (x, lease) {
    this.closeAttempt()
    const { backend } = lease
    const span = this.attempt = this.tracer.childSpan(this.span, KIND.client, x.head.method)
    if (span.recording) {
      (this.seats ||= []).push({ backend, wasDown: backend.state === 'down', said: false })
      span.set('http.request.method', x.head.method)
      if (backend.host !== null) span.set('server.address', backend.host)
      if (backend.port !== null) span.set('server.port', backend.port)
      span.set('network.peer.address', backend.address)
      span.set('lila.backend', backend.address)
      span.set('lila.attempt', x.attempt.attempts)
      span.set('lila.queue_ms', x.attempt.queuedMs)
    }
    return span
  }

  // A --mirror copy (mirror.js start: a Shadow, or null): a CLIENT span of its own, the
  // parent its traceparent names; mirror.js ends the span.
  mirror (x, mirror, bodyDone) {
    const span = this.tracer.childSpan(this.span, KIND.client, x.head.method)
    span.set('http.request.method', x.head.method)
    span.set('lila.mirror', mirror.address)
    return mirror.start(x.sent, x, bodyDone, span)
  }

  // The attempt's backend answered `status` (before the attempt judges it: a retry
  // seats the next attempt at once).
  answered (status) {
    const span = this.attempt
    if (span === null) return
    span.set('http.response.status_code', status)
    if (status >= 400) span.fail(`answered ${status}`)
  }

  // The attempt failed (`reason`; before the attempt judges it): its span ends with an
  // error.
  failed (reason) {
    if (this.attempt === null) return
    this.attempt.fail(reason)
    this.closeAttempt()
  }

  // The attempt judged what happened: `retried`, another backend has the request; a
  // backend may have been taken out.
  judged (x, reason, retried) {
    if (retried) this.span.event('retry', ['lila.backend', x.attempt.lastBackend, 'lila.reason', reason])
    this.ejections()
  }

  // lila answered the request itself.
  answeredByLila (status, detail) {
    if (REFUSALS.has(status)) this.span.event('refused', ['http.response.status_code', status, 'lila.reason', detail])
  }

  // The exchange is over (logged): the attempt under way and the request's span end.
  ended (x) {
    this.closeAttempt()
    const span = this.span
    this.span = ENDED
    if (!span.recording) return span.finish()
    this.ejections(span)
    const status = x.status
    span.set('http.response.status_code', status)
    if (x.res === null && x.tunnel === null) { // lila's own, or none (499); or a backend's, its body a page
      span.set('lila.answer', x.forwarding.interceptedBy === null ? 'lila' : 'error-page')
    }
    if (x.attempt.attempts > 0) span.set('lila.attempts', x.attempt.attempts)
    if (status >= 500) span.fail(x.res === null && x.attempt.attempts > 0 ? x.attempt.failure : `answered ${status}`)
    if (status === 499) span.set('error.type', 'client closed the request')
    span.finish()
  }

  closeAttempt () {
    const span = this.attempt
    if (span === null) return
    this.attempt = null
    span.finish()
  }

  // Backends this request was seated on that traffic took out since (passive health:
  // perhaps once the next backend's verdict blamed them): an event each, once.
  ejections (span = this.span) {
    if (this.seats === null) return
    for (const seat of this.seats) {
      const { backend } = seat
      if (seat.said || seat.wasDown || backend.state !== 'down' || backend.downSource !== 'traffic') continue
      seat.said = true
      span.event('ejection', ['lila.backend', backend.address, 'lila.reason', backend.downReason || ''])
    }
  }
}

// A Host field's name and port ("[::1]:8080" -> ['::1', 8080]); null: no port said.
// Clients of a listener mostly say the same Host: the last one's is kept.
let lastHost = null
let lastParts = null
function hostAndPort (host) {
  if (host === lastHost) return lastParts
  lastHost = host
  lastParts = splitHost(host)
  return lastParts
}

function splitHost (host) {
  const colon = host.lastIndexOf(':')
  if (colon < 0 || host.indexOf(']', colon) >= 0) return [host.replace(/^\[|\]$/g, ''), null]
  const port = Number(host.slice(colon + 1))
  return [host.slice(0, colon).replace(/^\[|\]$/g, ''), Number.isInteger(port) ? port : null]
}

module.exports = { ExchangeTrace }
