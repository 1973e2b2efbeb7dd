'use strict'

// HTTP/2 header lists for lila's codec (wire/h2: [name, value, ...], lower-case names,
// pseudo-headers first), pure, from heads in lila's form (either codec's): a request
// for an HTTP/2 backend, with rewrite.js's rules; a response (or 1xx) and trailers for
// an HTTP/2 client. What HTTP/2 does not carry is dropped: hop-by-hop fields and those
// Connection names (RFC 9113 8.2.2), the reason phrase, Transfer-Encoding (HTTP/2
// frames the body itself).

const { HOP_BY_HOP } = require('../http1/heads')
const { TOKEN } = require('../message/grammar')

// Never dropped because Connection names them (as rewrite.js: they frame the message).
const PROTECTED = new Set(['content-length'])
// Not passed in trailers: framing and routing fields (RFC 9110 6.5.1).
const NOT_TRAILERS = new Set(['content-length', 'host', 'trailer'])

function dropped (lower, listed) {
  return HOP_BY_HOP.has(lower) || lower === 'http2-settings' ||
    (listed !== null && listed.includes(lower) && !PROTECTED.has(lower))
}

// Fields lila sets itself on requests (as rewrite.js: the client's values folded in).
const SET_BY_LILA = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded', 'via', 'host'])

// The target as HTTP/2's :path: origin form ("/p?q"), or "*" (OPTIONS); an
// absolute-form HTTP/1.1 target ("http://host/p?q") loses its scheme and authority.
function originForm (head) {
  const target = head.target
  if (head.authority === null || target.charCodeAt(0) === 47) return target
  const from = target.indexOf('//') + 2
  let i = from
  while (i < target.length && target[i] !== '/' && target[i] !== '?') i++
  if (i === target.length) return '/'
  return target[i] === '?' ? `/${target.slice(i)}` : target.slice(i)
}

// RFC 7239 node and value (as rewrite.js).
function forwardedNode (address) {
  return address.includes(':') ? `"[${address}]"` : address
}

function forwardedValue (value) {
  return TOKEN.test(value) ? value : `"${value.replace(/["\\]/g, '\\$&')}"`
}

// A request head (either codec's) as an HTTP/2 backend gets it: the same rewriting as
// rewrite.js requestHead for HTTP/1.1 (X-Forwarded-*, Forwarded, Via, hop-by-hop fields
// out), with :authority for Host (`hostIfMissing` for an HTTP/1.0 request with none),
// `scheme` the backend connection's ('http' or 'https'), TE kept when it says
// "trailers" (gRPC needs it), and `grpcTimeout` (what is left of a call's deadline, or
// null: the client's as it came). The header options (header-rules.js) have the last
// word.
//   ctx: { clientAddress, requestId, continued: lila answered the client's Expect:
//   100-continue itself, so the backend is not sent it }; settings: { proto, via,
//   forwarded, host, request }
function requestList (head, ctx, hostIfMissing, settings, scheme, grpcTimeout = null) {
  const clientAddress = ctx.clientAddress
  const rules = settings.request // --set-header, --del-header, --request-id: they have the last word
  const host = settings.host !== null
    ? (settings.host.fixed || hostIfMissing) // --host-header
    : head.host === null ? hostIfMissing : head.host
  const list = [':method', head.method, ':scheme', scheme, ':authority', host, ':path', originForm(head)]
  let xff = null
  let forwarded = null
  let via = null
  const listed = head.connection
  const fields = head.fields // name, lower-case name, value
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    const value = fields[i + 2]
    if (rules !== null && rules.touched.has(lower)) continue
    if (SET_BY_LILA.has(lower)) {
      if (lower === 'x-forwarded-for') xff = xff === null ? value : `${xff}, ${value}`
      else if (lower === 'forwarded') forwarded = forwarded === null ? value : `${forwarded}, ${value}`
      else if (lower === 'via') via = via === null ? value : `${via}, ${value}`
      continue
    }
    if (lower === 'te') {
      if (value.toLowerCase() === 'trailers') list.push('te', 'trailers')
      continue
    }
    if (dropped(lower, listed) || lower === 'content-length' || lower === 'grpc-timeout') continue
    if (lower === 'expect' && ctx.continued) continue
    list.push(lower, value)
  }
  if (head.contentLength !== -1) list.push('content-length', String(head.contentLength))
  if (grpcTimeout !== null) list.push('grpc-timeout', grpcTimeout)
  else if (head.grpcTimeout !== null && head.grpcTimeout !== undefined) list.push('grpc-timeout', head.grpcTimeout)
  // lila's own, unless a rule replaces or removes them.
  const ours = rules === null ? null : rules.touched
  if (ours === null || !ours.has('x-forwarded-for')) {
    list.push('x-forwarded-for', xff === null ? clientAddress : `${xff}, ${clientAddress}`)
  }
  if (ours === null || !ours.has('x-forwarded-proto')) list.push('x-forwarded-proto', settings.proto)
  if (head.host !== null && (ours === null || !ours.has('x-forwarded-host'))) list.push('x-forwarded-host', head.host)
  if (settings.forwarded) {
    let node = `for=${forwardedNode(clientAddress)};proto=${settings.proto}`
    if (head.host !== null) node += `;host=${forwardedValue(head.host)}`
    const value = forwarded === null ? node : `${forwarded}, ${node}`
    if (ours === null || !ours.has('forwarded')) list.push('forwarded', value)
  } else if (forwarded !== null && (ours === null || !ours.has('forwarded'))) {
    list.push('forwarded', forwarded)
  }
  const hop = `${head.version === 2 ? '2.0' : head.version === 0 ? '1.0' : '1.1'} ${settings.via}`
  list.push('via', via === null ? hop : `${via}, ${hop}`)
  if (rules !== null) rules.addTo(list, ctx)
  return list
}

// A response (or 1xx) head, either codec's, as an HTTP/2 client gets it: its status and
// fields less what HTTP/2 does not carry; `chunked`: its body came chunked, so the
// Trailer field that announces its trailers stays; `rules` (--set-response-header,
// --request-id) and `cookie` (--sticky, --canary: one, a list, or null).
function responseList (res, chunked, rules = null, ctx = null, cookie = null) {
  const list = [':status', String(res.status)]
  const listed = res.connection
  const fields = res.fields
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    if (dropped(lower, listed) || (lower === 'trailer' && !chunked)) continue
    if (rules !== null && rules.touched.has(lower)) continue
    list.push(lower, fields[i + 2])
  }
  if (rules !== null) rules.addTo(list, ctx)
  if (typeof cookie === 'string') list.push('set-cookie', cookie)
  else if (cookie !== null) for (const c of cookie) list.push('set-cookie', c) // --sticky's and --canary's
  return list
}

// Trailer fields (as in a head) as an HTTP/2 trailer list; those that may not be
// trailers left out. Null when none is left.
function trailerList (fields) {
  if (fields === null) return null
  const list = []
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    if (!dropped(lower, null) && !NOT_TRAILERS.has(lower) && lower !== 'te') list.push(lower, fields[i + 2])
  }
  return list.length === 0 ? null : list
}

module.exports = { requestList, responseList, trailerList, originForm }
