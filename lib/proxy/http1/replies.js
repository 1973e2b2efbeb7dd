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
// (so no body, though the length is still told) }
function reply (status, detail, { close = false, retryAfter = 0, head = false } = {}) {
  const reason = REASONS[status] || 'Error'
  const body = `${status} ${reason}: ${detail}\n`
  let out = `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n`
  if (retryAfter > 0) out += `Retry-After: ${retryAfter}\r\n`
  if (close) out += 'Connection: close\r\n'
  return Buffer.from(head ? `${out}\r\n` : `${out}\r\n${body}`)
}

module.exports = { reply, REASONS }
