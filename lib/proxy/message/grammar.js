'use strict'

// What every head lila reads must be, whichever codec read it (http1/parse.js from
// bytes, wire/h2/message.js from a header list): HTTP's tokens and field values
// (RFC 9110 5.6.2, 5.5), the whitespace around values (OWS), and the sizes lila
// accepts of a request head. A request may go on in either protocol, so both codecs
// refuse alike what the other could not carry. Pure.

const MAX_HEAD = 16 * 1024 // bytes, request line and headers (Node's default too)
const MAX_TARGET = 8 * 1024 // bytes of request-target: beyond, 414
const MAX_HEADERS = 100 // fields of a head: beyond, 431

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
// Field values: visible ASCII, obs-text, space and tab; no other control bytes.
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const BAD_VALUE = /[\x00-\x08\x0a-\x1f\x7f]/

// The field value without the spaces and tabs around it (RFC 9110 OWS); only those:
// String#trim would also eat vertical tabs, form feeds and latin1 no-break spaces.
function trimOws (line, start) {
  let end = line.length
  while (start < end && (line.charCodeAt(start) === 32 || line.charCodeAt(start) === 9)) start++
  while (end > start && (line.charCodeAt(end - 1) === 32 || line.charCodeAt(end - 1) === 9)) end--
  return line.slice(start, end)
}

module.exports = { TOKEN, BAD_VALUE, trimOws, MAX_HEAD, MAX_TARGET, MAX_HEADERS }
