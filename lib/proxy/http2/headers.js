'use strict'

// HTTP/2 header lists, pure: an HTTP/1.1 backend's response head (parse.js
// parseResponseHead) and trailer section for an HTTP/2 client; a request head (an
// HTTP/2 stream's, request.js, or an HTTP/1.1 one, parse.js) for an HTTP/2 backend,
// with rewrite.js's rules; an HTTP/2 backend's response and trailers passed on. What
// HTTP/2 does not carry is dropped: hop-by-hop fields and those Connection names (RFC
// 9113 8.2.2), the reason phrase, Transfer-Encoding (HTTP/2 frames the body itself).

const { HOP_BY_HOP } = require('../http1/rewrite')
const { trimOws, TOKEN } = require('../http1/parse')

// Never dropped because Connection names them (as rewrite.js: they frame the message).
const PROTECTED = new Set(['content-length'])
// Not passed in trailers: framing and routing fields (RFC 9110 6.5.1).
const NOT_TRAILERS = new Set(['content-length', 'host', 'trailer'])

function dropped (lower, listed) {
  return HOP_BY_HOP.has(lower) || lower === 'http2-settings' ||
    (listed !== null && listed.includes(lower) && !PROTECTED.has(lower))
}

// Add a field to an HTTP/2 header object: a repeated name becomes an array, which Node
// sends as one field per value (Set-Cookie must stay separate).
function add (headers, lower, value) {
  const had = headers[lower]
  if (had === undefined) headers[lower] = value
  else if (typeof had === 'string') headers[lower] = [had, value]
  else had.push(value)
}

// The final (or a 1xx) head as the client gets it. `trailers`: the body comes chunked,
// so the Trailer field that announces its trailers stays.
function responseHeaders (res, trailers = false) {
  const headers = { __proto__: null, ':status': res.status }
  const listed = res.connection
  const fields = res.fields
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    if (dropped(lower, listed) || (lower === 'trailer' && !trailers)) continue
    add(headers, lower, fields[i + 2])
  }
  return headers
}

// The trailer section a ChunkedReader kept ("Name: value\r\n" lines) as HTTP/2
// trailers; null when there are none.
function trailerHeaders (text) {
  if (text === null || text === '') return null
  let headers = null
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const lower = line.slice(0, colon).toLowerCase()
    if (dropped(lower, null) || NOT_TRAILERS.has(lower)) continue
    add(headers ||= { __proto__: null }, lower, trimOws(line, colon + 1))
  }
  return headers
}

// Fields lila sets itself on requests (as rewrite.js: the client's values folded in).
const SET_BY_LILA = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded', 'via', 'host'])

// A request head as an HTTP/2 backend gets it: the same rewriting as rewrite.js
// requestHead for HTTP/1.1 (X-Forwarded-*, Forwarded, Via, hop-by-hop fields out),
// with :authority for Host (`hostIfMissing` for an HTTP/1.0 request with none),
// `scheme` the backend connection's ('http' or 'https'), and TE kept when it says
// "trailers" (gRPC needs it). The header options (header-rules.js) have the last word.
//   ctx, settings: as requestHead's ({ clientAddress, requestId, continued: lila
//   answered the client's Expect: 100-continue itself, so the backend is not sent it };
//   { proto, via, forwarded, host, request })
function backendRequestHeaders (head, ctx, hostIfMissing, settings, scheme) {
  const clientAddress = ctx.clientAddress
  const host = settings.host !== null
    ? (settings.host.fixed || hostIfMissing) // --host-header
    : head.host === null ? hostIfMissing : head.host
  const headers = {
    __proto__: null,
    ':method': head.method,
    ':scheme': scheme,
    ':authority': host,
    ':path': originForm(head)
  }
  let xff = null
  let forwarded = null
  let via = null
  const listed = head.connection
  const fields = head.fields // name, lower-case name, value
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    const value = fields[i + 2]
    if (SET_BY_LILA.has(lower)) {
      if (lower === 'x-forwarded-for') xff = xff === null ? value : `${xff}, ${value}`
      else if (lower === 'forwarded') forwarded = forwarded === null ? value : `${forwarded}, ${value}`
      else if (lower === 'via') via = via === null ? value : `${via}, ${value}`
      continue
    }
    if (lower === 'te') {
      if (value.toLowerCase() === 'trailers') headers.te = 'trailers'
      continue
    }
    if (dropped(lower, listed) || lower === 'content-length') continue
    if (lower === 'expect' && ctx.continued) continue
    add(headers, lower, value)
  }
  if (head.contentLength !== -1) headers['content-length'] = String(head.contentLength)
  headers['x-forwarded-for'] = xff === null ? clientAddress : `${xff}, ${clientAddress}`
  headers['x-forwarded-proto'] = settings.proto
  if (head.host !== null) headers['x-forwarded-host'] = head.host
  if (settings.forwarded) {
    let node = `for=${forwardedNode(clientAddress)};proto=${settings.proto}`
    if (head.host !== null) node += `;host=${forwardedValue(head.host)}`
    headers.forwarded = forwarded === null ? node : `${forwarded}, ${node}`
  } else if (forwarded !== null) {
    headers.forwarded = forwarded
  }
  const hop = `${head.version === 2 ? '2.0' : head.version === 0 ? '1.0' : '1.1'} ${settings.via}`
  headers.via = via === null ? hop : `${via}, ${hop}`
  if (settings.request !== null) settings.request.apply(headers, ctx)
  return headers
}

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

// An HTTP/2 backend's response (or 1xx) headers as the client gets them: its status
// and fields, less what is connection-specific.
function relayedHeaders (incoming) {
  const headers = { __proto__: null, ':status': incoming[':status'] }
  for (const name of Object.keys(incoming)) {
    if (name.charCodeAt(0) === 58 || dropped(name, null)) continue // ":"
    headers[name] = incoming[name]
  }
  return headers
}

// An HTTP/2 backend's trailers as the client gets them; null when there are none.
function relayedTrailers (incoming) {
  let headers = null
  for (const name of Object.keys(incoming)) {
    if (name.charCodeAt(0) === 58 || dropped(name, null) || NOT_TRAILERS.has(name)) continue
    (headers ||= { __proto__: null })[name] = incoming[name]
  }
  return headers
}

module.exports = { responseHeaders, trailerHeaders, backendRequestHeaders, relayedHeaders, relayedTrailers, originForm }

// --- Header lists, for lila's own codec (lib/wire/h2): [name, value, ...] ---

// A request head (either codec's) as an HTTP/2 backend gets it: what
// backendRequestHeaders says, as a list, and `grpcTimeout` (what is left of a call's
// deadline, or null) for its grpc-timeout.
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
  const own = []
  own.push('x-forwarded-for', xff === null ? clientAddress : `${xff}, ${clientAddress}`)
  own.push('x-forwarded-proto', settings.proto)
  if (head.host !== null) own.push('x-forwarded-host', head.host)
  if (settings.forwarded) {
    let node = `for=${forwardedNode(clientAddress)};proto=${settings.proto}`
    if (head.host !== null) node += `;host=${forwardedValue(head.host)}`
    own.push('forwarded', forwarded === null ? node : `${forwarded}, ${node}`)
  } else if (forwarded !== null) {
    own.push('forwarded', forwarded)
  }
  for (let i = 0; i < own.length; i += 2) {
    if (rules === null || !rules.touched.has(own[i])) list.push(own[i], own[i + 1])
  }
  const hop = `${head.version === 2 ? '2.0' : head.version === 0 ? '1.0' : '1.1'} ${settings.via}`
  list.push('via', via === null ? hop : `${via}, ${hop}`)
  if (rules !== null) rules.addTo(list, ctx)
  return list
}

// A response (or 1xx) head, either codec's, as an HTTP/2 client gets it: its status and
// fields less what HTTP/2 does not carry; `chunked`: its body came chunked, so the
// Trailer field that announces its trailers stays; `rules` (--set-response-header,
// --request-id) and `cookie` (--sticky), or null.
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
  if (cookie !== null) list.push('set-cookie', cookie)
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

module.exports.requestList = requestList
module.exports.responseList = responseList
module.exports.trailerList = trailerList
