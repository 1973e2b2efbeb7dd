'use strict'

// The answers lila gives an HTTP/2 request itself (502, 503, 504, 400, ...): what
// http/replies.js answerOf says, as a header list for lila's codec and a body. An
// empty body (HEAD, or a gRPC call's trailers-only answer) is no DATA: the headers end
// the stream, as gRPC clients need to read them as trailers.

const { answerOf } = require('../http/replies')

// -> { list: [name, value, ...], body (a Buffer, empty when the headers end the stream) };
// `rules` (header-rules.js's for responses) and `ctx` as http1/replies.js reply's.
function answerList (status, detail, options = {}) {
  const answer = answerOf(status, detail, options)
  const { rules = null, ctx = null } = options
  const list = [':status', String(answer.status)]
  const { fields } = answer
  for (let i = 0; i < fields.length; i += 2) {
    if (rules === null || !rules.touched.has(fields[i])) list.push(fields[i], fields[i + 1])
  }
  if (answer.length !== undefined && (rules === null || !rules.touched.has('content-length'))) {
    list.push('content-length', String(answer.length))
  }
  if (rules !== null) rules.addTo(list, ctx)
  return { list, body: answer.body }
}

module.exports = { answerList }
