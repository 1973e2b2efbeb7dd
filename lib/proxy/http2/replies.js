'use strict'

// The answers lila gives an HTTP/2 request itself (502, 503, 504, 400, ...): what
// message/replies.js answerOf says, as a header list for lila's codec and a body. An
// empty body (HEAD, or a gRPC call's trailers-only answer) is no DATA: the headers end
// the stream, as gRPC clients need to read them as trailers.

const { answerOf } = require('../message/replies')
const { Fields, responseFields } = require('../message/rewrite')
const { responseList } = require('./headers')

const FIELDS = new Fields() // the answer's fields (message/rewrite.js), listed at once

// -> { list: [name, value, ...], body (a Buffer, empty when the headers end the stream) };
// `rules` (header-rules.js's for responses) and `ctx` as http1/replies.js reply's.
function answerList (status, detail, options = {}) {
  const answer = answerOf(status, detail, options)
  const { rules = null, ctx = null } = options
  responseFields(answer, false, rules, ctx, null, FIELDS)
  const list = responseList(answer.status, FIELDS, answer.length === undefined ? -1 : answer.length)
  return { list, body: answer.body }
}

module.exports = { answerList }
