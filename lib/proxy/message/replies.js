'use strict'

// The answers lila gives itself (502, 503, 504, 429, 400, ...), for every request
// whichever its client's protocol: answerOf decides what an answer says, once, as a
// response head in lila's form; the header options apply to it as to a backend's
// (message/rewrite.js responseFields), and the codecs write it (http1/replies.js
// reply as HTTP/1.1 bytes, http2/replies.js as an HTTP/2 header list). Said to a
// person or a plain HTTP client: the status and a short plain-text body naming the
// reason. Said to a gRPC call (`grpc`, its content-type,
// see grpc.js callType): a trailers-only response, HTTP 200 with grpc-status and
// grpc-message and no body, as gRPC clients read errors.

const { codeOf, encodeMessage, CODES } = require('./grpc')

const REASONS = {
  200: 'OK',
  // an auth service's answer passed on (--forward-auth), as well as lila's own
  301: 'Moved Permanently',
  302: 'Found',
  303: 'See Other',
  307: 'Temporary Redirect',
  308: 'Permanent Redirect',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  413: 'Content Too Large', // RFC 9110 15.5.14 (was Payload Too Large)
  414: 'URI Too Long',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  505: 'HTTP Version Not Supported',
  508: 'Loop Detected'
}

const EMPTY = Buffer.alloc(0)

// The names of the fields lila's answers hold, as HTTP/1.1 has always spelt them.
const SPELT = {
  'content-type': 'Content-Type',
  'cache-control': 'Cache-Control',
  'retry-after': 'Retry-After',
  'www-authenticate': 'WWW-Authenticate',
  location: 'Location',
  'set-cookie': 'Set-Cookie'
}

// -> a response head in lila's form: { status, reason, version: 1, fields (three
// entries each: name, lower-case name, value; no framing), connection: null, body:
// a Buffer, length: the body's (undefined for a gRPC status: no body, no length) }
// `retryAfter`: seconds; `fields`: more [[name, value]] to say (a rule at the edge's
// refusal: WWW-Authenticate, proxy/edge/rules.js); `head`: a HEAD request (no body,
// though its length is told);
// `exact`: the body is `detail` itself (an ACME key authorization, tls/http01.js);
// `page`: the body is this page's, of its type (edge/error-pages.js Page: --error-page,
// --maintenance; an auth service's answer passed on: type null, none said), rendered
// for `ctx`;
// `grpc`: the call's content-type, or null; `exhausted`: every backend is at its
// max-conn and there is no room to wait (gRPC's RESOURCE_EXHAUSTED rather than
// UNAVAILABLE); `ctx`: { clientAddress, requestId, traceId } (--request-id, --trace:
// the body names the IDs). The detail may quote what a backend sent (any byte): the body is UTF-8, as its
// content-type says and its length counts. header-rules.js's response rules are the
// writers' to apply (reply, http2/replies.js), as for a backend's answers.
function answerOf (status, detail, {
  retryAfter = 0, head = false, grpc = null, exhausted = false, ctx = null, fields: more = null, exact = false,
  page = null
} = {}) {
  if (grpc !== null) {
    const code = exhausted ? CODES.RESOURCE_EXHAUSTED : codeOf(status)
    const fields = ['Content-Type', 'content-type', grpc, 'grpc-status', 'grpc-status', String(code),
      'grpc-message', 'grpc-message', encodeMessage(detail)]
    if (retryAfter > 0) fields.push('Retry-After', 'retry-after', String(retryAfter))
    return answerHead(200, withMore(fields, more), EMPTY, undefined)
  }
  if (page !== null) return pageAnswer(status, page, retryAfter, head, ctx, more)
  const body = Buffer.from(exact ? detail : bodyOf(status, REASONS[status] || 'Error', detail, ctx))
  const fields = ['Content-Type', 'content-type', 'text/plain; charset=utf-8',
    'Cache-Control', 'cache-control', 'no-store']
  if (retryAfter > 0) fields.push('Retry-After', 'retry-after', String(retryAfter))
  return answerHead(status, withMore(fields, more), head ? EMPTY : body, body.length)
}

// What ends a gRPC call whose answer its backend cut after the head reached the client
// (an HTTP/2 client's: http2/session.js cut): trailers saying UNAVAILABLE and why, which
// a gRPC client reads as the call's status (and may retry by its policy), where a reset
// stream is INTERNAL to it. -> [name, value, ...]
function cutTrailers (detail) {
  return ['grpc-status', String(CODES.UNAVAILABLE), 'grpc-message', encodeMessage(detail)]
}

function pageAnswer (status, page, retryAfter, head, ctx, more) {
  const body = page.render(ctx)
  const fields = ['Cache-Control', 'cache-control', 'no-store']
  if (page.type !== null) fields.unshift('Content-Type', 'content-type', page.type)
  if (retryAfter > 0) fields.push('Retry-After', 'retry-after', String(retryAfter))
  return answerHead(status, withMore(fields, more), head ? EMPTY : body, body.length)
}

function answerHead (status, fields, body, length) {
  return { status, reason: REASONS[status] || 'Error', version: 1, fields, connection: null, body, length }
}

// `more`: [[lower-case name, value]]
function withMore (fields, more) {
  if (more !== null) for (const [lower, value] of more) fields.push(SPELT[lower] || lower, lower, value)
  return fields
}

// The plain-text body: the status and why, then the request's ID (--request-id) and
// trace ID (--trace) for whoever reports the error.
function bodyOf (status, reason, detail, ctx) {
  let text = `${status} ${reason}: ${detail}\n`
  if (ctx === null) return text
  if (ctx.requestId !== null && ctx.requestId !== undefined) text += `request ID: ${ctx.requestId}\n`
  if (ctx.traceId !== null && ctx.traceId !== undefined) text += `trace ID: ${ctx.traceId}\n`
  return text
}

module.exports = { answerOf, cutTrailers }
