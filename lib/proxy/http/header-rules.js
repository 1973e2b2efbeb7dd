'use strict'

// The header options of an http listener, compiled once per config (at its start and
// on each reload) into what message/rewrite.js applies to every request sent on and
// every response answered (lila's own answers too, message/replies.js):
//   --request-id [NAME]          each request's ID (request-id.js) in NAME, to the
//                                backend and back to the client
//   --set-header, --del-header   the request as the backend gets it
//   --set-response-header, --del-response-header
//                                every final response the client gets: the backend's
//                                and lila's own answers to a request (502, 503, 504,
//                                429, ...), as nginx's add_header ... always
//   --host-header backend|VALUE  the Host (HTTP/2: :authority) the backend gets
// A rule has the last word: it replaces or removes the client's (or the backend's)
// fields of its name and lila's own (X-Forwarded-*, Forwarded); a set header's value
// may hold {client_ip} and {request_id}, filled in per request.
//
// Nothing is compiled for a listener without these options: the rewrite settings hold
// null, and the hot path pays a null check.

const { HOP_BY_HOP } = require('../message/rewrite')
const { HEADERS: CLIENT_CERT_HEADERS, NO_CERT, clientCertOf } = require('../client-cert')

// What a value may fill in, from the exchange (`ctx`: { clientAddress, requestId }).
const PLACEHOLDERS = {
  client_ip: ctx => ctx.clientAddress,
  request_id: ctx => ctx.requestId
}
const PLACEHOLDER = /\{(client_ip|request_id)\}/

// --tls-client-ca: what the handshake verified (client-cert.js), from the client's
// connection (its exchange's client's `socket`). Lila's own
// values, never a user's: a client that sent no certificate on a connection that began
// before a reload asked for one counts as having sent none.
const certOf = ctx => clientCertOf(ctx.client.socket) || NO_CERT
const CLIENT_CERT = Object.fromEntries(CLIENT_CERT_HEADERS.map(([, key]) => [
  `client_cert_${key}`, ctx => certOf(ctx)[key]
]))
const VALUES = { ...PLACEHOLDERS, ...CLIENT_CERT }

// Why no rule may set or remove a field of this name (lower case) on the `side`
// ('request' or 'response'), in words after "cannot be set or removed: ", or null.
function refusal (lower, side) {
  if (HOP_BY_HOP.has(lower) || lower === 'http2-settings') return 'it is hop-by-hop: lila writes the connection\'s own'
  if (lower === 'content-length' || lower === 'trailer') return 'it frames the message: lila writes it from the body'
  if (side === 'request' && lower === 'host') return 'use --host-header backend|VALUE for the Host a backend gets'
  if (side === 'request' && lower === 'via') return 'lila\'s Via is how it finds a loop'
  return null
}

// One direction's rules. `set`: [{ name, value }]; `del`: [name].
// A set field may be `optional`: left out when its value comes out empty.
class RuleSet {
  constructor (set, del) {
    // The names whose fields in the message are left out: replaced or removed.
    this.touched = new Set([...del.map(name => name.toLowerCase()), ...set.map(f => f.name.toLowerCase())])
    this.fields = set.map(({ name, value, parts = template(value), optional = false }) => ({
      name, lower: name.toLowerCase(), parts, optional
    }))
    // Without placeholders, the fields are the same for every message: made once, with
    // their HTTP/1.1 lines (message/rewrite.js Fields).
    this.fixed = this.fields.every(f => typeof f.parts === 'string')
      ? this.fields.flatMap(f => [f.name, f.lower, f.parts, `${f.name}: ${f.parts}\r\n`])
      : null
  }

  // The fields to add to `out` (message/rewrite.js Fields), the message's own fields
  // of the `touched` names having been left out by the caller.
  addTo (out, ctx) {
    const fixed = this.fixed
    if (fixed !== null) {
      for (let i = 0; i < fixed.length; i += 4) out.add(fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3])
      return
    }
    for (const f of this.fields) {
      const value = valueOf(f, ctx)
      if (value !== '' || !f.optional) out.add(f.name, f.lower, value, null)
    }
  }
}

// "a {client_ip} b" -> ['a ', 'client_ip', ' b']: text at even indexes, placeholders
// at odd ones; a value without placeholders stays a string.
function template (value) {
  if (!PLACEHOLDER.test(value)) return value
  return value.split(new RegExp(PLACEHOLDER.source, 'g'))
}

function valueOf (field, ctx) {
  const { parts } = field
  if (typeof parts === 'string') return parts
  let out = ''
  for (let i = 0; i < parts.length; i++) out += i % 2 === 0 ? parts[i] : VALUES[parts[i]](ctx)
  return out
}

// A listener's config -> what message/rewrite.js reads with the other rewrite
// settings (protocol.js, rewriteSettings):
//   idHeader  the request ID's header name in lower case, or null (no --request-id)
//   host      null (the client's Host), or { fixed: VALUE }, or { fixed: null } for
//             the backend's own (its hostHeader, backend.js)
//   request   a RuleSet for the request to the backend, or null
//   response  a RuleSet for the response to the client, or null
// With --tls-client-ca (config.tls.clientAuth), the request gets the X-Client-Cert-*
// fields (client-cert.js), after the user's rules, which may not touch them.
function compileHeaderRules (config) {
  const { requestId, setHeader = [], delHeader = [], setResponseHeader = [], delResponseHeader = [] } = config
  const { hostHeader = null, tls = null } = config
  let setRequest = requestId === null ? setHeader : [...setHeader, { name: requestId, value: '{request_id}' }]
  if (tls !== null && tls.clientAuth !== null) {
    const certFields = CLIENT_CERT_HEADERS.map(([name, key]) => ({
      name, parts: ['', `client_cert_${key}`, ''], optional: key !== 'verified'
    }))
    const ours = new Set(certFields.map(f => f.name.toLowerCase()))
    setRequest = [...setRequest.filter(f => !ours.has(f.name.toLowerCase())), ...certFields]
  }
  const setResponse = requestId === null
    ? setResponseHeader
    : [...setResponseHeader, { name: requestId, value: '{request_id}' }]
  return {
    idHeader: requestId === null ? null : requestId.toLowerCase(),
    host: hostHeader === null ? null : { fixed: hostHeader === 'backend' ? null : hostHeader },
    request: setRequest.length + delHeader.length === 0 ? null : new RuleSet(setRequest, delHeader),
    response: setResponse.length + delResponseHeader.length === 0 ? null : new RuleSet(setResponse, delResponseHeader)
  }
}

module.exports = { compileHeaderRules, refusal, PLACEHOLDERS }
