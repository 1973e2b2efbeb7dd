'use strict'

// The one rewrite: what a backend is sent of a request, and what a client gets back of
// a response, decided once for every pairing of codecs (as HAProxy applies its rules
// on HTX before mux_h1 or mux_h2 formats it, and Go's ReverseProxy sets them whatever
// the transport). Hop-by-hop fields (RFC 9110 7.6.1) stop here both ways; a request
// gets lila's X-Forwarded-*, Forwarded (RFC 7239) and Via (7.6.3), the fields a
// --forward-auth 2xx gives it (--forward-auth-copy) and the traceparent of lila's
// CLIENT span (--otlp), and the header options (header-rules.js) have the last word.
// Each codec only serialises what comes out (http1/heads.js as HTTP/1.1 text,
// http2/headers.js as a header list), adding what is its protocol's own: the request
// line or pseudo-headers, and the framing (Transfer-Encoding, a response's
// Content-Length, Connection, Upgrade).
//
// The output, `out`: a Fields the caller gives, refilled from its start. Its `list`
// holds four entries per field: the name as HTTP/1.1 writes it, the name in lower case
// (as HTTP/2 writes it), the value, and the field's HTTP/1.1 line pre-encoded
// ("Name: value\r\n") where lila made it once per config (X-Forwarded-Proto, its own
// Via, a header rule's fixed field), else null; all strings. `length` says how many
// entries are this head's: those after are stale, left for the next head to
// overwrite, as the array never shrinks and refilling it allocates nothing. Names lila
// writes are constants, the client's or backend's are theirs as parsed; the values
// lila composes (X-Forwarded-For, Forwarded, Via after another proxy's,
// Content-Length's digits) are the only strings made per head. A request's first
// field is always its Host (HTTP/2's :authority). Nothing of `out` is kept here: a
// codec reuses one Fields for every head and serialises it straight away (HTTP/1.1:
// the line, or name, ": ", value, CRLF; HTTP/2: lower-case name and value). Pure but
// for writing into `out`.

const { TOKEN, trimOws } = require('./grammar')

const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'transfer-encoding', 'upgrade'
])

// What the request's loop does with a field of a name, beyond passing it on.
const DROP = 1 // hop-by-hop, or written by lila itself from what it parsed
const XFF = 2 // X-Forwarded-For: the client's values, lila's address appended
const FORWARDED = 3 // Forwarded: likewise, with --forwarded
const VIA = 4 // Via: likewise, always
const TE = 5 // only "trailers" goes on (what HTTP/2 allows; gRPC needs it)
const TRAILER = 6 // goes on where trailers can follow
const EXPECT = 7 // not when lila answered 100 Continue itself
const TRACEPARENT = 8 // not when lila's CLIENT span (--otlp) is the backend's parent
const TRACESTATE = 9 // nor then when the trace is lila's, not the client's
const REQUEST = new Map([
  ...[...HOP_BY_HOP].map(name => [name, DROP]),
  ['te', TE],
  ['http2-settings', DROP], // h2c's, never passed on (RFC 9113 8.2.2)
  ['host', DROP], // the first field, from what the head says (head.host) or the options
  ['content-length', DROP], // framing: one, from the parsed length
  ['grpc-timeout', DROP], // what is left of the call's deadline
  ['x-forwarded-proto', DROP],
  ['x-forwarded-host', DROP],
  ['x-forwarded-for', XFF],
  ['forwarded', FORWARDED],
  ['via', VIA],
  ['trailer', TRAILER],
  ['expect', EXPECT],
  ['traceparent', TRACEPARENT],
  ['tracestate', TRACESTATE]
])

// Responses: framing is the client's codec's (a length, chunks, or the end of a stream).
const RESPONSE = new Map([
  ...[...HOP_BY_HOP].map(name => [name, DROP]),
  ['http2-settings', DROP],
  ['content-length', DROP],
  ['trailer', TRAILER]
])

// Fields that may not be trailers (RFC 9110 6.5.1: framing, routing, connection fields).
const NOT_TRAILERS = new Set(['content-length', 'host', 'trailer', 'http2-settings', ...HOP_BY_HOP])

// Fields as the rewrite gives them (see above): `list[0, length)`, FIELD entries each.
const FIELD = 4
class Fields {
  constructor () {
    this.list = []
    this.length = 0
  }

  add (name, lower, value, line) {
    const list = this.list
    const n = this.length
    list[n] = name
    list[n + 1] = lower
    list[n + 2] = value
    list[n + 3] = line
    this.length = n + FIELD
  }
}

// A listener's rewrite settings, made once per config (http/protocol.js):
//   proto      'http' | 'https': how the client reached lila (X-Forwarded-Proto)
//   via        this lila's Via token (proxy/via.js)
//   forwarded  true: add lila's RFC 7239 Forwarded element
//   rules      header-rules.js compileHeaderRules: { idHeader, host, request, response }
//   copy       --forward-auth-copy's names as written: the fields a forward-auth 2xx
//              gives the backend (the client's own of those names never go on)
// and, made here once, Via's value for each version a request was received in (RFC
// 9110 7.6.3: the received protocol), the HTTP/1.1 lines that never change, and
// `omit`: the names of the client's fields left out, as a rule or the copy replaces
// them (null: none).
function rewriteSettings ({ proto, via, forwarded, rules, copy = [] }) {
  const viaHops = [`1.0 ${via}`, `1.1 ${via}`, `2.0 ${via}`] // by head.version: 0, 1, 2
  const touched = rules.request === null ? [] : [...rules.request.touched]
  const omit = [...touched, ...copy.map(name => name.toLowerCase())]
  return Object.freeze({
    proto,
    via,
    forwarded,
    ...rules,
    copy: copy.length === 0 ? null : Object.freeze(copy.flatMap(name => [name, name.toLowerCase()])),
    omit: omit.length === 0 ? null : new Set(omit),
    viaHops: Object.freeze(viaHops),
    viaLines: Object.freeze(viaHops.map(hop => `Via: ${hop}\r\n`)),
    protoLine: `X-Forwarded-Proto: ${proto}\r\n`
  })
}

// The fields a backend is sent for `head` (lila's form, as the exchange sends it on:
// exchange.sent), into `out`.
//   ctx: the exchange: clientAddress, requestId, continued (lila answered the client's
//        Expect: 100-continue itself: the backend gets the body without it), grant
//        (--forward-auth's 2xx: Map lower-case name -> value, or null), and what
//        header rules read (header-rules.js)
//   backendHost: the backend's hostHeader, for a request without Host (HTTP/1.0) and
//        --host-header backend
//   settings: rewriteSettings'
//   grpcTimeout: what is left of a gRPC call's deadline (grpc-timeout's form), or null:
//        the client's grpc-timeout as it came, if any
//   span: the CLIENT span (--otlp, telemetry/span.js) this request is sent under, or
//        null: its `traceparent` replaces the client's; the client's tracestate goes
//        on only with its own trace (`traceState` not null)
function requestFields (head, ctx, backendHost, settings, grpcTimeout, span, out) {
  out.length = 0
  const rules = settings.request // --set-header, --del-header, --request-id
  const touched = rules === null ? null : rules.touched
  const omit = settings.omit
  const hostRule = settings.host // --host-header
  const host = hostRule !== null ? hostRule.fixed || backendHost : head.host !== null ? head.host : backendHost
  out.add('Host', 'host', host, null)
  let xff = null
  let forwarded = null
  let via = null
  let te = false
  const listed = head.connection // what the client's Connection names: hop-by-hop too
  const fields = head.fields
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    if (omit !== null && omit.has(lower)) continue
    const kind = REQUEST.get(lower)
    if (kind === undefined) {
      if (listed === null || !listed.includes(lower)) out.add(fields[i], lower, fields[i + 2], null)
      continue
    }
    const value = fields[i + 2]
    switch (kind) {
      case XFF: xff = xff === null ? value : `${xff}, ${value}`; break
      case FORWARDED: forwarded = forwarded === null ? value : `${forwarded}, ${value}`; break
      case VIA: via = via === null ? value : `${via}, ${value}`; break
      case TE: te = te || saysTrailers(value); break
      case TRAILER: // announces trailers: a chunked HTTP/1.1 body or an HTTP/2 one can carry them
        if ((head.chunked || head.version === 2) && (listed === null || !listed.includes(lower))) {
          out.add(fields[i], lower, value, null)
        }
        break
      case EXPECT:
        if (!ctx.continued && (listed === null || !listed.includes(lower))) out.add(fields[i], lower, value, null)
        break
      case TRACEPARENT:
        if (span === null && (listed === null || !listed.includes(lower))) out.add(fields[i], lower, value, null)
        break
      case TRACESTATE:
        if ((span === null || span.traceState !== null) && (listed === null || !listed.includes(lower))) {
          out.add(fields[i], lower, value, null)
        }
        break
    }
  }
  const copy = settings.copy // --forward-auth-copy: the auth service's values, never the client's
  const grant = ctx.grant
  if (copy !== null && grant !== undefined && grant !== null) {
    for (let i = 0; i < copy.length; i += 2) {
      const lower = copy[i + 1]
      const value = grant.get(lower)
      if (value !== undefined && (touched === null || !touched.has(lower))) out.add(copy[i], lower, value, null)
    }
  }
  if (span !== null && (touched === null || !touched.has('traceparent'))) {
    out.add('traceparent', 'traceparent', span.traceparent, null)
  }
  if (head.contentLength !== -1) out.add('Content-Length', 'content-length', String(head.contentLength), null)
  if (te) out.add('TE', 'te', 'trailers', null)
  const timeout = grpcTimeout !== null ? grpcTimeout : head.grpcTimeout
  if (timeout !== null && timeout !== undefined && (touched === null || !touched.has('grpc-timeout'))) {
    out.add('grpc-timeout', 'grpc-timeout', timeout, null)
  }
  const client = ctx.clientAddress
  const { proto } = settings
  if (touched === null || !touched.has('x-forwarded-for')) {
    out.add('X-Forwarded-For', 'x-forwarded-for', xff === null ? client : `${xff}, ${client}`, null)
  }
  if (touched === null || !touched.has('x-forwarded-proto')) {
    out.add('X-Forwarded-Proto', 'x-forwarded-proto', proto, settings.protoLine)
  }
  if (head.host !== null && (touched === null || !touched.has('x-forwarded-host'))) {
    out.add('X-Forwarded-Host', 'x-forwarded-host', head.host, null)
  }
  if (touched === null || !touched.has('forwarded')) {
    if (settings.forwarded) {
      let node = `for=${forwardedNode(client)};proto=${proto}`
      if (head.host !== null) node += `;host=${forwardedValue(head.host)}`
      out.add('Forwarded', 'forwarded', forwarded === null ? node : `${forwarded}, ${node}`, null)
    } else if (forwarded !== null) {
      out.add('Forwarded', 'forwarded', forwarded, null)
    }
  }
  if (rules !== null) rules.addTo(out, ctx)
  // No rule may touch Via: it is how lila finds a loop.
  const hop = settings.viaHops[head.version]
  if (via === null) out.add('Via', 'via', hop, settings.viaLines[head.version])
  else out.add('Via', 'via', `${via}, ${hop}`, null)
}

// Does a TE value list "trailers"? ("trailers", "trailers, deflate;q=0.5")
function saysTrailers (value) {
  if (value === 'trailers') return true
  for (const part of value.split(',')) if (part.trim().toLowerCase() === 'trailers') return true
  return false
}

// RFC 7239 node: IPv6 in brackets and quotes, IPv4 bare; a Unix socket's client
// ("unix:", origin.js) has no address: unknown.
function forwardedNode (address) {
  if (address === 'unix:') return 'unknown'
  return address.includes(':') ? `"[${address}]"` : address
}

// RFC 7239 value: a token as it is, anything else quoted.
function forwardedValue (value) {
  return TOKEN.test(value) ? value : `"${value.replace(/["\\]/g, '\\$&')}"`
}

// The fields a client gets of a response head `res` (either codec's, or lila's own
// answer: replies.js), into `out`; a 1xx's too (no rules, no cookie).
//   keepTrailer: the client can get the trailers (its codec frames the body in chunks,
//        or it speaks HTTP/2): the Trailer field that announces them stays
//   rules: header-rules.js's for responses (--set-response-header, --request-id), or
//        null; ctx: the exchange, for their values
//   cookie: the Set-Cookie value of --sticky or --canary, a list of both, or null
function responseFields (res, keepTrailer, rules, ctx, cookie, out) {
  out.length = 0
  const touched = rules === null ? null : rules.touched
  const listed = res.connection
  const fields = res.fields
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    const kind = RESPONSE.get(lower)
    if (kind === DROP || (kind === TRAILER && !keepTrailer)) continue
    if (listed !== null && listed.includes(lower)) continue
    if (touched !== null && touched.has(lower)) continue
    out.add(fields[i], lower, fields[i + 2], null)
  }
  if (rules !== null) rules.addTo(out, ctx)
  if (typeof cookie === 'string') out.add('Set-Cookie', 'set-cookie', cookie, null)
  else if (cookie !== null) for (const c of cookie) out.add('Set-Cookie', 'set-cookie', c, null) // both
}

// A trailer section's fields (as in a head) as they go on, into `out`: those that may
// not be trailers left out.
function trailerFields (fields, out) {
  out.length = 0
  if (fields === null) return
  for (let i = 0; i < fields.length; i += 3) {
    if (!NOT_TRAILERS.has(fields[i + 1])) out.add(fields[i], fields[i + 1], fields[i + 2], null)
  }
}

// The target in origin form ("/p?q"), or "*" (OPTIONS): an absolute-form HTTP/1.1
// target ("http://host/p?q") without its scheme and authority (HTTP/2's :path, and
// what the rules at the edge read).
function originForm (head) {
  const target = head.target
  if (head.authority === null || target.charCodeAt(0) === 47) return target
  const from = target.indexOf('//') + 2
  let i = from
  while (i < target.length && target[i] !== '/' && target[i] !== '?') i++
  if (i === target.length) return '/'
  return target[i] === '?' ? `/${target.slice(i)}` : target.slice(i)
}

// Does the request's Via carry lila's own token? Then it went round in a loop.
function viaLoops (head, via) {
  const fields = head.fields
  for (let i = 0; i < fields.length; i += 3) {
    const value = fields[i + 2]
    if (fields[i + 1] === 'via' && value.includes(via)) {
      for (const hop of value.split(',')) {
        // received-protocol RWS received-by [ RWS comment ]; RWS is spaces and tabs
        if (trimOws(hop, 0).split(/[ \t]+/)[1] === via) return true
      }
    }
  }
  return false
}

module.exports = {
  Fields, FIELD, rewriteSettings, requestFields, responseFields, trailerFields, originForm, viaLoops, HOP_BY_HOP
}
