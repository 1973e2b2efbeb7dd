'use strict'

const { reasonOf } = require('../../errors')
const { fieldOf, editedRequest } = require('./edge-calls')
const { originForm } = require('../message/rewrite')
const { challengeAnswer } = require('../../tls/http01')
const { MAINTENANCE_RETRY_AFTER } = require('../maintenance')

// lila's words for a request body over --max-body-size.
const overSize = max => `the request body is over --max-body-size (${max} bytes)`

// What a request passes before it may go to any backend, in one order for every kind of
// request: an ACME HTTP-01 validation lila answers, a loop through this lila (508), the
// --maintenance page, the rules at the edge (--allow/--deny, --auth, --forward-auth),
// --max-body-size, the rules' request edits, then the route and --rate-limit
// (protocol.js refusal). Each check that answers ends the request with the exchange's
// own answer (exchange.answer); one that passes has the exchange proceed. `x` is the
// exchange (exchange.js): read here, moved only through its methods.
function admit (x) {
  const { listener } = x
  const { acme } = listener
  if (acme !== null && acme.http.size > 0 && answeredChallenge(x, acme.http)) return
  const looped = listener.protocol.looped(x)
  if (looped !== null) return x.answer(...looped)
  if (listener.maintenance.active && underMaintenance(x)) return
  const { rules } = x
  if (rules !== null) {
    const authorization = fieldOf(x.head.fields, 'authorization')
    const proto = listener.tls === null ? 'http' : 'https' // --forward-auth's X-Forwarded-Proto
    const verdict = rules.admit(x.clientAddress, authorization, x.grpc !== null, x.head, proto)
    if (verdict !== null) return judged(x, verdict)
  }
  admitted(x, null)
}

// --maintenance, POST /maintenance (proxy/maintenance.js): 503 with its page, unless
// the client is on --maintenance-allow. True when answered.
function underMaintenance (x) {
  const { listener } = x
  const held = listener.maintenance.holds(x.pool.name, x.clientAddress)
  if (held === null) return false
  listener.edgeStats.refused('maintenance', x.clientAddress)
  const page = held.page === null ? x.errorPage(503) : held.page
  x.answer(503, 'under maintenance; try again later', { retryAfter: MAINTENANCE_RETRY_AFTER, quiet: true, page })
  return true
}

// An ACME HTTP-01 validation of a token lila holds (tls/http01.js), on a plain-HTTP
// listener while a certificate is being got: answered before any rule or route.
// Other tokens go on (a backend may get its own certificates).
function answeredChallenge (x, http) {
  const challenge = challengeAnswer(http, x.head.method, x.head.path)
  if (challenge === null || challenge.keyAuthorization === undefined) return false
  x.listener.log.info(`ACME: answered an HTTP-01 validation from ${x.clientAddress}`)
  x.answer(200, challenge.keyAuthorization, { exact: true })
  return true
}

// A rule at the edge said no (answered as lila's own, never forwarded), or yes with
// headers for the backend (--forward-auth's 2xx), or will say (a password checked for
// the first time, bcrypt's cost paid in slices; an auth service asked): the request
// waits, its body unread (held up to a window, then the client paused), and is
// dropped if the client leaves meanwhile.
function judged (x, verdict) {
  if (typeof verdict.then !== 'function') {
    return verdict.pass === undefined ? refused(x, verdict) : admitted(x, verdict)
  }
  if (x.reading) x.client.pauseBody(x) // the body waits, unread
  const { generation } = x // (an exchange over is never made new while this waits: a belt)
  verdict.then(later => {
    if (x.done || x.generation !== generation) return
    if (later !== null && later.pass === undefined) return refused(x, later)
    if (x.reading) x.client.resumeBody(x)
    admitted(x, later)
  }, err => {
    if (!x.done && x.generation === generation) x.answer(503, `the check at the edge failed (${reasonOf(err)})`)
  })
}

// `page`: an auth service's answer's body (else --error-page's, or lila's words).
function refused (x, { status, detail, fields, page }) {
  x.answer(status, detail, { fields, quiet: true, page }) // counted and logged by the rules
}

// `grant`: rules.admit's Grant (the headers --forward-auth lets the request in with), or null.
function admitted (x, grant) {
  const { head, rules } = x
  // A body said to be too large is refused before any of it is read (and before a
  // client waiting for 100 Continue sends it); one of unknown length, as it comes
  // (exchange.js onBody).
  if (x.body.length > x.maxBody) return x.answer(413, overSize(x.maxBody))
  if (grant !== null) x.granted(grant.pass)
  if (rules !== null) {
    const edits = rules.rewriteRequest(originForm(head), name => fieldOf(head.fields, name))
    if (edits !== null) x.edited(editedRequest(head, edits), edits.traceId)
  }
  const refusal = x.listener.protocol.refusal(x)
  if (refusal === null) return proceed(x)
  if (typeof refusal.then !== 'function') return x.answer(...refusal)
  // --fleet: the fleet decides --rate-limit (within a few ms, fleet/shared-limits.js).
  if (x.reading) x.client.pauseBody(x) // the body waits, unread
  const { generation } = x
  refusal.then(later => {
    if (x.done || x.generation !== generation) return
    if (x.reading) x.client.resumeBody(x)
    if (later !== null) return x.answer(...later)
    proceed(x)
  })
}

// Admitted: on to a backend, unless it asks for what no backend of this listener can do.
function proceed (x) {
  const { head } = x
  if (head.isUpgrade && x.listener.protocol.backendProtocol === 'h2') {
    return x.answer(502, `an upgrade to ${head.upgrade} cannot be carried to an HTTP/2 backend`)
  }
  x.proceed()
}

module.exports = { admit, overSize }
