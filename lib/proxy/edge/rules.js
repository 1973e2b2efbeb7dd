'use strict'

// Rules at the edge: one mechanism for what a listener or a route says about the
// requests it takes before and after balancing, answered by lila itself where it says
// no, counted (EdgeStats), shown, and compiled again on every reload. The rules:
//   --allow, --deny             who may come in, by address (addresses.js)
//   --basic-auth FILE           who may come in, by password (basic-auth.js, passwords.js)
//   --compress                  responses compressed on the way (compress.js, compressor.js)
//   --trace                     W3C trace context (trace.js)
//   --forward-auth URL          who may come in, by an auth service's answer (forward-auth.js)
//   a route's strip             its path prefix taken off (prefix.js)
//
//   loadEdge(config, { readFile }) -> what the rules need from files (the htpasswd
//                      files, the pages of --error-page and --maintenance, read now and
//                      on every reload), or a UsageError; balancer.js
//                      calls it where TLS files are read, before anything changes
//   compileEdge(config, loaded, stats) -> { gate, own, routes }:
//     gate     an AddressGate the listener asks of each connection as it arrives (tcp:
//              a client refused is closed at once), or null (always, for HTTP: there
//              the exchange asks `admit`, and a refused client is answered 403)
//     own      the Rules of requests no route takes, or null: nothing to do
//     routes   Map of route name -> its Rules (the listener's and the route's), or null
//
// A Rules object is what an HTTP exchange asks, once per request (ARCHITECTURE.md, "How
// the exchange calls the rules"):
//   rules.admit(clientAddress, authorization, grpc, head, proto) -> null (go on), a
//       Grant (go on with these headers: { pass: Map lower-case name -> value }, from
//       --forward-auth's 2xx: the exchange keeps `pass` for message/rewrite.js,
//       which puts --forward-auth-copy's fields in what any backend gets), a Refusal
//       to answer ({ status, grpcStatus, fields: [[name, value]], reason, detail, page
//       }: `page` the body of an auth service's answer, else undefined), or a Promise
//       of one (a password checked for the first time, an auth service asked); `head`
//       the request's, `proto` http or https
//   rules.rewriteRequest(target, get) -> null, or { path, fields: [[name, value |
//       null]], traceId }: `target` the request's origin form with its query
//       ("/api/x?y=1"); the target to send on (null: as it is), fields to set (null:
//       remove), the request's trace ID (null: no --trace)
//   rules.responseTransform(method, acceptEncoding, status, get) -> null, or
//       { fields, encoding }: fields to set or remove in the response head, and the
//       coding to compress the body with (null: none)
//   rules.compressor(encoding, sink) -> a Compressor (compressor.js)
// `get(name)`: a field of the head's value (name in lower case; repeated fields joined
// with ", "), or undefined. A listener without rules has null: the exchange pays a null
// check (http/exchange.js, http/edge-calls.js).

const fs = require('fs')
const { UsageError } = require('../../errors')
const { AddressGate } = require('./addresses')
const { encodingChooser } = require('./negotiate')
const { compressible, compressedFields, typeMatcher } = require('./compress')
const { Compressor } = require('./compressor')
const { nextTraceparent } = require('./trace')
const { stripPrefix } = require('./prefix')
const { readPages } = require('./error-pages')

// lila's answers when a rule says no. gRPC calls get the status in grpcStatus.
const refusal = (status, grpcStatus, reason, detail, fields = []) =>
  Object.freeze({ status, grpcStatus, fields: Object.freeze(fields), reason, detail })
const REFUSALS = {
  allow: refusal(403, 7, 'allow', 'the client\'s address is not on the --allow list'),
  deny: refusal(403, 7, 'deny', 'the client\'s address is on the --deny list')
}
const BUSY = refusal(503, 14, 'auth-busy', 'too many password checks under way; try again', [['retry-after', '1']])

class Rules {
  // gates: AddressGates, listener's first; auths: BasicAuths; chooser: negotiate.js's
  // or null (no --compress); where: " on route NAME" or "" for log lines.
  // services: --forward-auth's AuthServices (forward-auth.js), listener's first.
  constructor ({ gates, auths, pass, chooser, types, trace, prefix, stats, where, services = [] }) {
    this.gates = gates
    this.auths = auths.map(auth => ({
      auth,
      missing: refusal(401, 16, 'no-credentials', 'credentials needed', [['www-authenticate', auth.challenge]]),
      wrong: refusal(401, 16, 'wrong-credentials', 'wrong user or password', [['www-authenticate', auth.challenge]])
    }))
    this.pass = pass
    this.chooser = chooser
    this.types = types
    this.trace = trace
    this.prefix = prefix
    this.stats = stats
    this.where = where
    this.services = services
  }

  admit (clientAddress, authorization, grpc, head, proto) {
    for (const gate of this.gates) {
      const why = gate.judge(clientAddress)
      if (why !== null) return this.refuse(REFUSALS[why], clientAddress)
    }
    if (this.auths.length + this.services.length === 0) return null
    return this.authenticate(0, { clientAddress, authorization, head, proto })
  }

  // The i-th --basic-auth (the listener's, then the route's) and those after it, then
  // the auth services.
  authenticate (i, ask) {
    if (i === this.auths.length) return this.forwarded(0, ask, null)
    const verdict = this.auths[i].auth.check(ask.authorization)
    if (typeof verdict === 'string') return this.authenticated(verdict, i, ask)
    return verdict.then(v => this.authenticated(v, i, ask))
  }

  authenticated (verdict, i, ask) {
    if (verdict === 'ok') return this.authenticate(i + 1, ask)
    const { missing, wrong } = this.auths[i]
    return this.refuse(verdict === 'missing' ? missing : verdict === 'bad' ? wrong : BUSY, ask.clientAddress)
  }

  // The i-th --forward-auth (the listener's, then the route's) and those after it;
  // `grant`: what those before let in with, or null.
  forwarded (i, ask, grant) {
    if (i === this.services.length) return grant
    const verdict = this.services[i].ask(ask.head, ask.proto, ask.clientAddress)
    if (typeof verdict.then !== 'function') return this.allowed(verdict, i, ask, grant)
    return verdict.then(v => this.allowed(v, i, ask, grant))
  }

  allowed (verdict, i, ask, grant) {
    if (verdict.pass === undefined) return this.refuse(verdict, ask.clientAddress)
    const merged = grant === null ? verdict : { pass: new Map([...grant.pass, ...verdict.pass]) }
    return this.forwarded(i + 1, ask, merged)
  }

  refuse (answer, clientAddress) {
    const why = answer.reason === 'forward-auth-failed' ? answer.detail : null
    this.stats.refused(answer.reason, `${clientAddress}${this.where}`, why)
    return answer
  }

  rewriteRequest (target, get) {
    let edits = null
    const edit = () => (edits ||= { path: null, fields: [], traceId: null })
    if (this.prefix !== null) {
      edit().path = stripPrefix(target, this.prefix)
      edits.fields.push(['x-forwarded-prefix', this.prefix])
    }
    if (this.auths.length > 0 && !this.pass && get('authorization') !== undefined) {
      edit().fields.push(['authorization', null])
    }
    if (this.trace) {
      const { traceparent, traceId, fresh } = nextTraceparent(get('traceparent'))
      edit().fields.push(['traceparent', traceparent])
      if (fresh && get('tracestate') !== undefined) edits.fields.push(['tracestate', null])
      edits.traceId = traceId
    }
    return edits
  }

  responseTransform (method, acceptEncoding, status, get) {
    if (this.chooser === null || !compressible(method, status, get, this.types)) return null
    const encoding = this.chooser(acceptEncoding)
    const fields = compressedFields(get, encoding)
    if (encoding === null && fields.length === 0) return null
    if (encoding !== null) this.stats.compressedResponse(encoding)
    return { fields, encoding }
  }

  compressor (encoding, sink) {
    return new Compressor(encoding, sink, this.stats)
  }
}

function loadEdge (config, { readFile = fs.readFileSync } = {}) {
  const passwords = new Map()
  for (const file of [config.basicAuth, ...config.routes.map(route => route.basicAuth)]) {
    if (file === null || passwords.has(file)) continue
    passwords.set(file, readPasswords(file, readFile))
  }
  return { passwords, pages: readPages(config, readFile) } // pages: --error-page, --maintenance
}

// An htpasswd file, read and checked; a UsageError says why not.
function readPasswords (file, readFile = fs.readFileSync) {
  let text
  try {
    text = readFile(file, 'utf8')
  } catch (err) {
    const reasons = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'it is a folder' }
    throw new UsageError(`cannot read --basic-auth file ${JSON.stringify(file)}: ${reasons[err.code] || err.code}`)
  }
  return require('./passwords').parsePasswords(text, file) // loaded with --basic-auth only (ARCHITECTURE.md)
}

// services: the listener's AuthServices (forward-auth.js), configured for this config.
function compileEdge (config, loaded, stats, services) {
  const http = config.protocol !== 'tcp'
  const gateOf = ({ allow, deny }) => allow.length + deny.length === 0 ? null : new AddressGate(allow, deny)
  const auths = new Map() // one per file: routes that share the listener's file share what it remembers
  const authOf = file => {
    if (file === null) return null
    const { BasicAuth } = require('./basic-auth') // loaded with --basic-auth only
    if (!auths.has(file)) auths.set(file, new BasicAuth(loaded.passwords.get(file), { realm: config.basicAuthRealm }))
    return auths.get(file)
  }
  const listenerGate = gateOf(config)
  const listenerAuth = http ? authOf(config.basicAuth) : null
  const base = {
    gates: http && listenerGate !== null ? [listenerGate] : [],
    auths: listenerAuth === null ? [] : [listenerAuth],
    pass: config.basicAuthPass,
    chooser: http && config.compress !== null ? encodingChooser(config.compress) : null,
    types: http && config.compress !== null ? typeMatcher(config.compressTypes) : null,
    trace: http && config.trace,
    prefix: null,
    stats,
    where: '',
    services: http && config.forwardAuth !== null ? [services.get(config.forwardAuth)] : []
  }
  const rulesOf = parts => {
    const empty = parts.gates.length + parts.auths.length + parts.services.length === 0 && parts.chooser === null &&
      !parts.trace && parts.prefix === null
    return empty || !http ? null : new Rules(parts)
  }
  const routes = new Map()
  for (const route of config.routes) {
    const gate = gateOf(route)
    const auth = authOf(route.basicAuth)
    routes.set(route.name, rulesOf({
      ...base,
      gates: gate === null ? base.gates : [...base.gates, gate],
      auths: auth === null ? base.auths : [...base.auths, auth],
      prefix: route.strip ? route.match.path : null,
      where: ` on route ${route.name}`,
      services: route.forwardAuth === null ? base.services : [...base.services, services.get(route.forwardAuth)]
    }))
  }
  return { gate: http ? null : listenerGate, own: rulesOf(base), routes }
}

module.exports = { loadEdge, compileEdge, readPasswords, REFUSALS }
