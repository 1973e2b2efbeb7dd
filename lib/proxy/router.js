'use strict'

// --route: which pool serves a request, by its Host and path. Pure.
//
// A route's match (config/parsers.js parseRouteMatch) is { host, wildcard, path }, null
// where not given. The most specific match wins, as nginx picks a server and then a
// location: an exact host over a wildcard one over none, a longer wildcard over a
// shorter one, then the longest path prefix. A path prefix matches whole segments:
// /static matches /static, /static/app.js and /static?v=2, not /statically.
//
//   const router = new Router(routes)     routes: [{ match, ... }], any order
//   router.match(hostHeader, path)        -> the route, or null
class Router {
  constructor (routes) {
    this.routes = [...routes].sort((a, b) => rank(b.match) - rank(a.match)) // stable: ties keep their order
  }

  match (hostHeader, path) {
    const host = hostName(hostHeader)
    for (const route of this.routes) {
      if (hostMatches(route.match, host) && pathMatches(route.match.path, path)) return route
    }
    return null
  }
}

// Exact host 3, wildcard 2, none 1; times a bound on lengths, so that a longer host or
// path ranks higher within a class.
function rank ({ host, wildcard, path }) {
  const hostClass = host === null ? 1 : wildcard ? 2 : 3
  return hostClass * 1e6 + (host === null ? 0 : host.length) * 1e3 + (path === null ? 0 : path.length)
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
