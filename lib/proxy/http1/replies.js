'use strict'

// lila's own answers (message/replies.js answerOf says what they say) as HTTP/1.1 bytes.

const { answerOf } = require('../message/replies')
const { Fields, responseFields } = require('../message/rewrite')
const { responseHead } = require('./heads')

const CLOSE = { close: true } // heads.js responseHead's `how`
const KEEP = { close: false }
const FIELDS = new Fields() // the answer's fields (message/rewrite.js), written at once

// The answer as HTTP/1.1 bytes, in a Buffer. { close: last response on the connection,
// rules: header-rules.js's for responses (lila's own answers get them too), and
// answerOf's options }
function reply (status, detail, options = {}) {
  const answer = answerOf(status, detail, options)
  const { rules = null, ctx = null } = options
  responseFields(answer, false, rules, ctx, null, FIELDS)
  const length = answer.length === undefined ? 0 : answer.length
  const head = responseHead(answer, FIELDS, options.close ? CLOSE : KEEP, length)
  return Buffer.concat([head, answer.body])
}

// What lila says itself to a client waiting with Expect: 100-continue for a body it
// reads before taking a backend.
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'

module.exports = { reply, CONTINUE }
