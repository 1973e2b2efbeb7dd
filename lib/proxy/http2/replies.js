'use strict'

// The answers lila gives an HTTP/2 request itself (502, 503, 504, 400, ...): the same
// status and plain-text body as over HTTP/1.1 (http1/replies.js), as HTTP/2 headers and
// a body for Http2Stream#respond and #end.

const { REASONS } = require('../http1/replies')

// -> { headers, body (a Buffer, empty for HEAD) }
function replyOf (status, detail, { retryAfter = 0, head = false } = {}) {
  const text = Buffer.from(`${status} ${REASONS[status] || 'Error'}: ${detail}\n`)
  const headers = {
    __proto__: null,
    ':status': status,
    'content-type': 'text/plain; charset=utf-8',
    'content-length': text.length,
    'cache-control': 'no-store'
  }
  if (retryAfter > 0) headers['retry-after'] = retryAfter
  return { headers, body: head ? Buffer.alloc(0) : text }
}

module.exports = { replyOf }
