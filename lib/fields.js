'use strict'

// A request's header fields as the modes (header-hash, cookie-hash) and stickiness
// (--sticky) read them. Pure. `fields` is a parsed head's list (http1/parse.js, and
// http2/request.js the same): name, lower-case name, value, repeated; an HTTP/2
// request's cookie crumbs are one Cookie field again there.

// A cookie header carries at most this many cookies that are looked at: a hostile
// header costs a bounded scan.
const MAX_COOKIES = 64

// The first value of the field named `lower` (lower case), or null.
function fieldValue (fields, lower) {
  for (let i = 1; i < fields.length; i += 3) if (fields[i] === lower) return fields[i + 1]
  return null
}

// Every value of the cookie `name` (case-sensitive, RFC 6265) in the request's Cookie
// fields, in the order sent (a browser sends the one with the longest Path first), at
// most `max`. An empty list when there is none.
function cookieValues (fields, name, max = 4) {
  const out = []
  let seen = 0
  for (let i = 1; i < fields.length && out.length < max; i += 3) {
    if (fields[i] !== 'cookie') continue
    const text = fields[i + 1]
    let start = 0
    while (start < text.length && out.length < max && seen++ < MAX_COOKIES) {
      let end = text.indexOf(';', start)
      if (end === -1) end = text.length
      const eq = text.indexOf('=', start)
      if (eq !== -1 && eq < end && text.slice(start, eq).trim() === name) {
        let value = text.slice(eq + 1, end).trim()
        if (value.length >= 2 && value[0] === '"' && value[value.length - 1] === '"') value = value.slice(1, -1)
        out.push(value)
      }
      start = end + 1
    }
  }
  return out
}

// The first value of the cookie `name`, or null.
function cookieValue (fields, name) {
  const values = cookieValues(fields, name, 1)
  return values.length === 0 ? null : values[0]
}

module.exports = { fieldValue, cookieValues, cookieValue }
