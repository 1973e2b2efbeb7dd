'use strict'

// What is written about a route (pure): its MATCH, and the --route option's words.

const { UsageError } = require('../errors')
const { isHostName } = require('../address')
const { isModeWord } = require('../upstream/balancers')
const { OPTIONS } = require('./options')
const { quote, forFlag } = require('./values')

// What a route may set for itself on the command line: allow=, deny=, basic-auth=,
// max-body-size=.
const ROUTE_SETTINGS = OPTIONS.filter(o => o.route).map(o => o.name)

// A route's MATCH (--route, "routes"): a host (api.example.com), a wildcard host
// (*.example.com: any name under it), a path prefix (/static: /static and what is below
// it) or a host and a path (api.example.com/v1) -> { host, wildcard, path }, null where
// not given. The host is lowercased and has no port: a request's Host is matched
// without its port.
const ROUTE_PATH = /^\/[\x21-\x7e]*$/
function parseRouteMatch (text) {
  const invalid = expected => new UsageError(`invalid route match ${quote(text)}: expected ${expected}`)
  const EXPECTED = 'a host (api.example.com), *.example.com, a path (/static) or both (api.example.com/v1)'
  if (typeof text !== 'string' || text === '') throw invalid(EXPECTED)
  const slash = text.indexOf('/')
  const hostText = slash === -1 ? text : text.slice(0, slash)
  let path = slash === -1 ? null : text.slice(slash)
  let host = null
  let wildcard = false
  if (hostText !== '') {
    wildcard = hostText.startsWith('*.')
    host = (wildcard ? hostText.slice(2) : hostText).toLowerCase()
    if (host.includes(':')) throw invalid('a host name without a port (a request\'s Host is matched without its port)')
    if (!isHostName(host)) throw invalid(EXPECTED)
  }
  if (path !== null) {
    if (!ROUTE_PATH.test(path) || path.includes('?') || path.includes('#')) {
      throw invalid('a path prefix such as /static (printable, no spaces, no ? or #)')
    }
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1) // /static/ is /static
  }
  return { host, wildcard, path }
}

// --route 'MATCH=[strip] [SETTING=VALUE...] [MODE] BACKEND [BACKEND...]' -> { match,
// strip, settings, mode, backends }: texts, checked by the builder (mode null: the
// listener's default mode). `strip` takes the matched path prefix off (proxy/edge);
// `settings`: [[name, value]] of options a route may set for itself (`route` in
// OPTIONS: allow=, deny=, basic-auth=, max-body-size=), which no backend or mode looks like.
function parseRouteOption (text, flag) {
  const eq = text.indexOf('=')
  const words = eq === -1 ? [] : text.slice(eq + 1).trim().split(/\s+/).filter(Boolean)
  let strip = false
  const settings = []
  while (words.length > 0) {
    if (words[0] === 'strip') {
      strip = true
      words.shift()
      continue
    }
    const setting = /^([a-z-]+)=(.*)$/.exec(words[0])
    if (setting === null || !ROUTE_SETTINGS.includes(setting[1])) break
    settings.push([setting[1], setting[2]])
    words.shift()
  }
  if (eq <= 0 || words.length === 0) {
    throw new UsageError(`invalid route ${quote(text)}${forFlag(flag)}: expected MATCH=[MODE] BACKEND..., ` +
      'e.g. "api.localhost=127.0.0.1:8081 127.0.0.1:8082" or "/static=rr 127.0.0.1:9000"')
  }
  const mode = isModeWord(words[0]) ? words.shift() : null
  return { match: text.slice(0, eq), strip, settings, mode, backends: words }
}

module.exports = { parseRouteMatch, parseRouteOption }
