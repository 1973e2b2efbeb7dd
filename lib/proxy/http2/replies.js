'use strict'

// The answers lila gives an HTTP/2 request itself (502, 503, 504, 400, ...): what
// http1/replies.js answerOf says, as HTTP/2 headers and a body for Http2Stream#respond
// and #end. An empty body (HEAD, or a gRPC call's trailers-only answer) is no DATA:
// the headers end the stream, as gRPC clients need to read them as trailers.

const { answerOf } = require('../http1/replies')

// -> { headers, body (a Buffer, empty when the headers end the stream) }; `rules`
// (header-rules.js's for responses) and `ctx` as http1's reply.
function replyOf (status, detail, options = {}) {
  const answer = answerOf(status, detail, options)
  const headers = { __proto__: null, ':status': answer.status }
  const { fields } = answer
  for (let i = 0; i < fields.length; i += 2) headers[fields[i]] = fields[i + 1]
  if (answer.length !== undefined) headers['content-length'] = answer.length
  const { rules = null, ctx = null } = options
  if (rules !== null) rules.apply(headers, ctx)
  return { headers, body: answer.body }
}

module.exports = { replyOf }
