'use strict'

// A route's strip (--route '/api=strip ...', "strip": true): the path prefix the route
// matched is taken off before the request goes on, and the backend is told what it was
// in X-Forwarded-Prefix (as Traefik and Spring read it). Pure.
//
//   stripPrefix(path, prefix) -> the path without it: /api/x?y -> /x?y, /api -> /,
//                                /api?y -> /?y (the router matched whole segments)

function stripPrefix (path, prefix) {
  const rest = path.slice(prefix.length)
  return rest === '' || rest.charCodeAt(0) === 63 ? `/${rest}` : rest // 63: '?'
}

module.exports = { stripPrefix }
