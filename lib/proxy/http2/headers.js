'use strict'

// An HTTP/1.1 backend's response head (parse.js parseResponseHead) as an HTTP/2 header
// list for the client, and its trailer section as HTTP/2 trailers. Pure. What HTTP/2
// does not carry is dropped: hop-by-hop fields and those Connection names (RFC 9113
// 8.2.2), the reason phrase, Transfer-Encoding (HTTP/2 frames the body itself).

const { HOP_BY_HOP } = require('../http1/rewrite')
const { trimOws } = require('../http1/parse')

// Never dropped because Connection names them (as rewrite.js: they frame the message).
const PROTECTED = new Set(['content-length'])
// Not passed in trailers: framing and routing fields (RFC 9110 6.5.1).
const NOT_TRAILERS = new Set(['content-length', 'host', 'trailer'])

function dropped (lower, listed) {
  return HOP_BY_HOP.has(lower) || lower === 'http2-settings' ||
    (listed !== null && listed.includes(lower) && !PROTECTED.has(lower))
}

// Add a field to an HTTP/2 header object: a repeated name becomes an array, which Node
// sends as one field per value (Set-Cookie must stay separate).
function add (headers, lower, value) {
  const had = headers[lower]
  if (had === undefined) headers[lower] = value
  else if (typeof had === 'string') headers[lower] = [had, value]
  else had.push(value)
}

// The final (or a 1xx) head as the client gets it. `trailers`: the body comes chunked,
// so the Trailer field that announces its trailers stays.
function responseHeaders (res, trailers = false) {
  const headers = { __proto__: null, ':status': res.status }
  const listed = res.connection
  const fields = res.fields
  for (let i = 0; i < fields.length; i += 3) {
    const lower = fields[i + 1]
    if (dropped(lower, listed) || (lower === 'trailer' && !trailers)) continue
    add(headers, lower, fields[i + 2])
  }
  return headers
}

// The trailer section a ChunkedReader kept ("Name: value\r\n" lines) as HTTP/2
// trailers; null when there are none.
function trailerHeaders (text) {
  if (text === null || text === '') return null
  let headers = null
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const lower = line.slice(0, colon).toLowerCase()
    if (dropped(lower, null) || NOT_TRAILERS.has(lower)) continue
    add(headers ||= { __proto__: null }, lower, trimOws(line, colon + 1))
  }
  return headers
}

module.exports = { responseHeaders, trailerHeaders }
