'use strict'

// The answers lila writes itself: a status, a short plain-text body naming the reason.

const REASONS = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  414: 'URI Too Long',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  505: 'HTTP Version Not Supported',
  508: 'Loop Detected'
}

// The response's bytes, in a Buffer: the detail may quote what a backend sent (any
// byte), and the body is UTF-8, as its Content-Type says and its length counts.
// { close: last response on the connection, retryAfter: seconds, head: HEAD request
// (so no body, though the length is still told), rules: header-rules.js's for
// responses (lila's own answers get them too), ctx: { clientAddress, requestId } }
function reply (status, detail, { close = false, retryAfter = 0, head = false, rules = null, ctx = null } = {}) {
  const reason = REASONS[status] || 'Error'
  const body = bodyOf(status, reason, detail, ctx)
  const own = rules === null ? () => true : lower => !rules.touched.has(lower)
  let out = `HTTP/1.1 ${status} ${reason}\r\n`
  if (own('content-type')) out += 'Content-Type: text/plain; charset=utf-8\r\n'
  out += `Content-Length: ${Buffer.byteLength(body)}\r\n`
  if (own('cache-control')) out += 'Cache-Control: no-store\r\n'
  if (retryAfter > 0 && own('retry-after')) out += `Retry-After: ${retryAfter}\r\n`
  if (rules !== null) out += rules.lines(ctx)
  if (close) out += 'Connection: close\r\n'
  return Buffer.from(head ? `${out}\r\n` : `${out}\r\n${body}`)
}

// The plain-text body: the status and why, then the request's ID (--request-id) for
// whoever reports the error.
function bodyOf (status, reason, detail, ctx) {
  const text = `${status} ${reason}: ${detail}\n`
  return ctx === null || ctx.requestId === null ? text : `${text}request ID: ${ctx.requestId}\n`
}

module.exports = { reply, bodyOf, REASONS }
