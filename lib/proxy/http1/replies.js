'use strict'

// lila's own answers (http/replies.js answerOf says what they say) as HTTP/1.1 bytes.

const { answerOf, REASONS } = require('../http/replies')

// The answer as HTTP/1.1 bytes, in a Buffer. { close: last response on the connection,
// rules: header-rules.js's for responses (lila's own answers get them too), and
// answerOf's options }
function reply (status, detail, options = {}) {
  const answer = answerOf(status, detail, options)
  const { rules = null, ctx = null } = options
  let out = `HTTP/1.1 ${answer.status} ${REASONS[answer.status] || 'Error'}\r\n`
  const { fields } = answer
  for (let i = 0; i < fields.length; i += 2) {
    if (rules !== null && rules.touched.has(fields[i])) continue
    out += `${FIELD_NAMES[fields[i]] || fields[i]}: ${fields[i + 1]}\r\n`
  }
  out += `Content-Length: ${answer.length === undefined ? 0 : answer.length}\r\n`
  if (rules !== null) out += rules.lines(ctx)
  if (options.close) out += 'Connection: close\r\n'
  return Buffer.concat([Buffer.from(`${out}\r\n`, 'latin1'), answer.body])
}

// What lila says itself to a client waiting with Expect: 100-continue for a body it
// reads before taking a backend.
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'

// How HTTP/1.1 answers have always spelt them.
const FIELD_NAMES = {
  'content-type': 'Content-Type',
  'cache-control': 'Cache-Control',
  'retry-after': 'Retry-After',
  'www-authenticate': 'WWW-Authenticate',
  location: 'Location',
  'set-cookie': 'Set-Cookie'
}

module.exports = { reply, CONTINUE }
