'use strict'

// The answers lila gives an HTTP/2 request itself (502, 503, 504, 400, ...): the same
// status and plain-text body as over HTTP/1.1 (http1/replies.js), as HTTP/2 headers and
// a body for Http2Stream#respond and #end.

const { REASONS, bodyOf } = require('../http1/replies')

// -> { headers, body (a Buffer, empty for HEAD) }; `rules` and `ctx` as http1's reply.
function replyOf (status, detail, { retryAfter = 0, head = false, rules = null, ctx = null } = {}) {
  const text = Buffer.from(bodyOf(status, REASONS[status] || 'Error', detail, ctx))
  const headers = {
    __proto__: null,
    ':status': status,
    'content-type': 'text/plain; charset=utf-8',
    'content-length': text.length,
    'cache-control': 'no-store'
  }
  if (retryAfter > 0) headers['retry-after'] = retryAfter
  if (rules !== null) rules.apply(headers, ctx)
  return { headers, body: head ? Buffer.alloc(0) : text }
}

module.exports = { replyOf }
