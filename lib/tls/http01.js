'use strict'

// ACME HTTP-01 (RFC 8555 8.3): the CA asks for
// http://NAME/.well-known/acme-challenge/TOKEN, on port 80, and expects the key
// authorization for TOKEN. lila answers it wherever it serves plain HTTP: on the
// --redirect-http listener (proxy/redirect.js) and on every plain-HTTP listener, before
// routing and before any rule at the edge (proxy/http/exchange.js). The tokens are the
// board's (proxy/tls.js Challenges), fed by the keeper (keeper.js) in every process.

const { unixPath } = require('../address')

const CHALLENGE_PATH = '/.well-known/acme-challenge/'
const TOKEN = /^[A-Za-z0-9_-]{1,256}$/

// Does a listener (its config) serve plain HTTP, and so answer HTTP-01?
function servesPlainHttp (l) {
  return l.protocol === 'http' && l.tls === null && unixPath(l.host) === null
}

// What to answer a request for `path` with: null, not a challenge's path (or not a GET
// or HEAD: the request goes on as any other); else { keyAuthorization }, undefined
// when lila holds no such token (404).
function challengeAnswer (http, method, path) {
  if (!path.startsWith(CHALLENGE_PATH) || (method !== 'GET' && method !== 'HEAD')) return null
  const token = path.slice(CHALLENGE_PATH.length)
  return { keyAuthorization: TOKEN.test(token) ? http.get(token) : undefined }
}

// The challenge types the keeper may use for a certificate its listeners (configs)
// serve, in the order it tries them, in `config`: none of HTTP-01 when no plain HTTP
// is served; HTTP-01 first where lila serves plain HTTP on port 80 (or --redirect-http
// says it is reachable), or where TLS is not on 443 either (both then take a port
// forward, and HTTP-01 is the one RFC 8555 clients try first); else TLS-ALPN-01 first.
function challengeTypes (config, listeners) {
  const redirect = listeners.some(l => l.redirectHttp !== null)
  const plain = config.listeners.filter(servesPlainHttp)
  if (!redirect && plain.length === 0) return ['tls-alpn-01']
  const httpFirst = redirect || plain.some(l => l.port === 80) || !listeners.some(l => l.port === 443)
  return httpFirst ? ['http-01', 'tls-alpn-01'] : ['tls-alpn-01', 'http-01']
}

module.exports = { servesPlainHttp, challengeAnswer, challengeTypes }
