'use strict'

const { fieldValue, cookieValues } = require('../fields')

// --route: which pool serves a request, by its Host and path, and a header, cookie or
// query parameter. Pure.
//
// A route's match (config/route-spec.js parseRouteMatch) is { host, wildcard, path,
// condition }, null where not given; condition { kind: 'header' | 'cookie' | 'query',
// name, value } (value null: present with any value). The most specific match wins, as
// nginx picks a server and then a location: an exact host over a wildcard one over
// none, a longer wildcard over a shorter one, then the longest path prefix; of the same
// host and path, a route with a condition the request meets before one without (a
// canary by header before the pool it tries). A path prefix matches whole segments:
// /static matches /static, /static/app.js and /static?v=2, not /statically.
//
//   const router = new Router(routes)     routes: [{ match, ... }], any order
//   router.match(hostHeader, path, fields, target)  -> the route, or null (fields: the
//                                          head's, name, lower-case name, value,
//                                          repeated; target: the path with its query)
class Router {
  constructor (routes) {
    this.routes = [...routes].sort((a, b) => rank(b.match) - rank(a.match)) // stable: ties keep their order
  }

  match (hostHeader, path, fields = [], target = path) {
    const host = hostName(hostHeader)
    for (const route of this.routes) {
      const { match } = route
      if (hostMatches(match, host) && pathMatches(match.path, path) &&
        (!match.condition || meets(match.condition, target, fields))) return route
    }
    return null
  }
}

// Exact host 3, wildcard 2, none 1; times a bound on lengths, so that a longer host or
// path ranks higher within a class (/ as no path: both match every path); then a
// condition over none.
function rank ({ host, wildcard, path, condition = null }) {
  const hostClass = host === null ? 1 : wildcard ? 2 : 3
  const place = hostClass * 1e6 + (host === null ? 0 : host.length) * 1e3 + (path === null ? 0 : path.length - 1)
  return place * 2 + (condition === null ? 0 : 1)
}

// Does the request carry the header, cookie or query parameter (with that value)?
// `target`: its request target, the query in it.
function meets ({ kind, name, value }, target, fields) {
  if (kind === 'header') {
    if (value === null) return fieldValue(fields, name) !== null
    for (let i = 1; i < fields.length; i += 3) if (fields[i] === name && fields[i + 1].trim() === value) return true
    return false
  }
  if (kind === 'cookie') {
    const values = cookieValues(fields, name)
    return value === null ? values.length > 0 : values.includes(value)
  }
  return queryMeets(target, name, value)
}

// A query parameter of the target (its name and value percent-decoded, + a space), at
// most MAX_PARAMETERS of them looked at.
const MAX_PARAMETERS = 64
function queryMeets (target, name, value) {
  const q = typeof target === 'string' ? target.indexOf('?') : -1
  if (q === -1) return false
  const pairs = target.slice(q + 1).split('&', MAX_PARAMETERS)
  for (const pair of pairs) {
    const eq = pair.indexOf('=')
    if (decoded(eq === -1 ? pair : pair.slice(0, eq)) !== name) continue
    if (value === null || decoded(eq === -1 ? '' : pair.slice(eq + 1)) === value) return true
  }
  return false
}

function decoded (text) {
  if (!/[%+]/.test(text)) return text
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return text
  }
}

function hostMatches ({ host, wildcard }, requestHost) {
  if (host === null) return true
  if (requestHost === null) return false
  if (!wildcard) return requestHost === host
  return requestHost.length > host.length + 1 && requestHost.endsWith(host) &&
    requestHost.charCodeAt(requestHost.length - host.length - 1) === 46 // '.'
}

function pathMatches (prefix, path) {
  if (prefix === null || prefix === '/') return true
  if (typeof path !== 'string' || !path.startsWith(prefix)) return false
  if (path.length === prefix.length) return true
  const next = path.charCodeAt(prefix.length)
  return next === 47 || next === 63 // '/' or '?'
}

// A Host header (or :authority) as routes match it: lowercased, without its port or a
// trailing dot; null when there is none.
function hostName (header) {
  if (typeof header !== 'string' || header === '') return null
  let end = header.length
  if (header.charCodeAt(0) === 91) { // '[': an IPv6 literal
    end = header.indexOf(']') + 1
  } else {
    const colon = header.lastIndexOf(':')
    if (colon !== -1) end = colon
  }
  if (header.charCodeAt(end - 1) === 46) end-- // 'example.com.'
  return header.slice(0, end).toLowerCase()
}

module.exports = { Router, hostName }
