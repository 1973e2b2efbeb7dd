'use strict'

// The heads lila sends on: pure functions from a parsed head (parse.js) and a few
// facts to the text of the new head. Hop-by-hop fields (RFC 9110 section 7.6.1) stop
// here in both directions; lila adds its own framing, X-Forwarded-* and Via.

const { STATUS_CODES } = require('http')
const { TOKEN, trimOws } = require('../message/grammar')

const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'transfer-encoding', 'upgrade'
])
// Trailer (RFC 9110 6.6.2) is end-to-end: it announces the trailer fields, which pass
// only in a chunked message. It goes on when lila sends the message chunked, and is
// dropped with the trailers when it does not (a body decoded for an HTTP/1.0 client).
const TRAILER = 'trailer'
// Framing lila writes itself, once, from what it parsed: a repeated Content-Length
// (allowed when the values agree) goes out as one field.
const FRAMING = 'content-length'
// Fields lila sets itself on requests (the client's values are folded into lila's).
const SET_BY_LILA = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded'])
// Never dropped because Connection lists them: they frame or route the message, and
// dropping them would make the backend read the body differently from lila.
const PROTECTED = new Set(['host', 'content-length'])

function dropped (lower, listed) {
  return HOP_BY_HOP.has(lower) || (listed !== null && listed.includes(lower) && !PROTECTED.has(lower))
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

// The request as the backend gets it: always HTTP/1.1 with keep-alive. An HTTP/2
// request (http2/request.js makes its head, version 2) says so in Via. `hostIfMissing`
// stands in for the Host an HTTP/1.0 client may leave out (the backend's hostHeader).
//   ctx: { clientAddress, requestId } (the exchange)
//   settings: { proto: 'http' | 'https', via: lila's Via token, forwarded: add RFC 7239
//              Forwarded, host, request: header-rules.js's (null when not set) }
//   continued: lila answered the client's Expect: 100-continue itself, so the backend
//              gets the body with the head and no Expect
function requestHead (head, ctx, hostIfMissing, settings, { continued = false } = {}) {
  const clientAddress = ctx.clientAddress
  const rules = settings.request // --set-header, --del-header, --request-id: they have the last word
  const host = settings.host === null ? null : (settings.host.fixed || hostIfMissing) // --host-header
  let out = `${head.method} ${head.target} HTTP/1.1\r\n`
  let xff = null
  let forwarded = null
  const listed = head.connection
  const fields = head.fields // name, lower-case name, value; see parse.js
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    const value = fields[i + 2]
    if (rules !== null && rules.touched.has(lower)) continue
    if (SET_BY_LILA.has(lower)) {
      if (lower === 'x-forwarded-for') xff = xff === null ? value : `${xff}, ${value}`
      else if (lower === 'forwarded') forwarded = forwarded === null ? value : `${forwarded}, ${value}`
      continue
    }
    if (dropped(lower, listed) || lower === FRAMING) continue
    if (lower === 'host' && (head.authority !== null || host !== null)) continue // replaced
    if (lower === TRAILER && !head.chunked) continue
    if (continued && lower === 'expect') continue
    out += `${fields[i]}: ${value}\r\n`
  }
  if (host !== null) out += `Host: ${host}\r\n`
  else if (head.authority !== null) out += `Host: ${head.authority}\r\n`
  else if (head.host === null) out += `Host: ${hostIfMissing}\r\n`
  if (head.chunked) out += 'Transfer-Encoding: chunked\r\n'
  else if (head.contentLength !== -1) out += `Content-Length: ${head.contentLength}\r\n`
  if (head.isUpgrade) out += `Connection: upgrade\r\nUpgrade: ${head.upgrade}\r\n`
  const forwardedAt = out.length // where lila's X-Forwarded-* and Forwarded begin
  out += `X-Forwarded-For: ${xff === null ? clientAddress : `${xff}, ${clientAddress}`}\r\n`
  out += `X-Forwarded-Proto: ${settings.proto}\r\n`
  if (head.host !== null) out += `X-Forwarded-Host: ${head.host}\r\n`
  if (settings.forwarded) {
    let node = `for=${forwardedNode(clientAddress)};proto=${settings.proto}`
    if (head.host !== null) node += `;host=${forwardedValue(head.host)}`
    out += `Forwarded: ${forwarded === null ? node : `${forwarded}, ${node}`}\r\n`
  } else if (forwarded !== null) {
    out += `Forwarded: ${forwarded}\r\n`
  }
  if (rules !== null) out = out.slice(0, forwardedAt) + withoutTouched(out.slice(forwardedAt), rules) + rules.lines(ctx)
  out += `Via: ${head.version === 2 ? '2.0' : '1.1'} ${settings.via}\r\n\r\n`
  return out
}

// Header lines less those a rule replaces or removes (rules.touched, lower case).
function withoutTouched (lines, rules) {
  let out = ''
  for (const line of lines.split('\r\n')) {
    if (line !== '' && !rules.touched.has(line.slice(0, line.indexOf(':')).toLowerCase())) out += `${line}\r\n`
  }
  return out
}

// The response as the client gets it, from a head either codec read (an HTTP/2 one has
// no reason phrase: the status's usual one is written).
//   how: { chunked: re-add Transfer-Encoding: chunked, close: this is the last response
//          on the connection, keepAlive10: tell an HTTP/1.0 client the connection stays,
//          upgrade: a 101 switching protocols }
//   rules: header-rules.js's for responses (--set-response-header, --request-id), or
//          null; ctx: { clientAddress, requestId } (the exchange) for their values
//   length: the Content-Length to say (-1: none), when not chunked
function responseHead (res, how, rules = null, ctx = null, length = res.contentLength) {
  let out = `HTTP/1.1 ${res.status} ${reasonOf(res)}\r\n`
  const listed = res.connection
  const fields = res.fields
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    if (dropped(lower, listed) || lower === FRAMING || (lower === TRAILER && !how.chunked)) continue
    if (rules !== null && rules.touched.has(lower)) continue
    out += `${fields[i]}: ${fields[i + 2]}\r\n`
  }
  if (rules !== null) out += rules.lines(ctx)
  if (how.upgrade) return `${out}Connection: upgrade\r\nUpgrade: ${res.upgrade}\r\n\r\n`
  if (how.chunked) out += 'Transfer-Encoding: chunked\r\n'
  else if (length !== -1) out += `Content-Length: ${length}\r\n`
  if (how.close) out += 'Connection: close\r\n'
  else if (how.keepAlive10) out += 'Connection: keep-alive\r\n'
  return `${out}\r\n`
}

// A 1xx (100 Continue, 103 Early Hints) passed on as it came, less hop-by-hop fields.
function interimHead (res) {
  let out = `HTTP/1.1 ${res.status} ${reasonOf(res)}\r\n`
  const fields = res.fields
  for (let i = 0; i < fields.length; i += 3) {
    if (!dropped(fields[i + 1], res.connection)) out += `${fields[i]}: ${fields[i + 2]}\r\n`
  }
  return `${out}\r\n`
}

// An HTTP/2 head has no reason phrase: the status's usual one.
function reasonOf (res) {
  return res.version === 2 ? STATUS_CODES[res.status] || '' : res.reason
}

// Fields that may not be trailers (RFC 9110 6.5.1: framing, routing, connection fields).
const NOT_TRAILERS = new Set(['content-length', 'host', 'trailer', 'te', ...HOP_BY_HOP])

// Trailer fields (as in a head: name, lower-case name, value) as HTTP/1.1 lines for the
// end of a chunked body; those that may not be trailers left out. '' for none.
function trailerLines (fields) {
  if (fields === null) return ''
  let out = ''
  for (let i = 0; i < fields.length; i += 3) {
    if (!NOT_TRAILERS.has(fields[i + 1])) out += `${fields[i]}: ${fields[i + 2]}\r\n`
  }
  return out
}

// A chunked body's trailer section as a ChunkedReader kept it ("Name: value\r\n"
// lines) as fields; null when there are none (or none that may be trailers).
function fieldsOfTrailers (text) {
  if (text === null || text === '') return null
  const out = []
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const name = line.slice(0, colon)
    const lower = name.toLowerCase()
    if (!NOT_TRAILERS.has(lower)) out.push(name, lower, trimOws(line, colon + 1))
  }
  return out.length === 0 ? null : out
}

// Does the Via field carry lila's own token? Then the request went round in a loop.
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
  requestHead, responseHead, interimHead, viaLoops, trailerLines, fieldsOfTrailers, HOP_BY_HOP
}
