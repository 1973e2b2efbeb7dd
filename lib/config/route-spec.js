'use strict'

// What is written about a route (pure): its MATCH, and the --route option's words.

const { UsageError } = require('../errors')
const { isHostName } = require('../address')
const { isModeWord } = require('../upstream/balancers')
const { TOKEN } = require('../proxy/message/grammar')
const { OPTIONS } = require('./options')
const { quote, forFlag } = require('./values')

// What a route may set for itself on the command line: allow=, deny=, basic-auth=,
// max-body-size= and the others `route` marks in OPTIONS.
const ROUTE_SETTINGS = OPTIONS.filter(o => o.route).map(o => o.name)

// The kinds of a route's condition: a header, a cookie or a query parameter.
const CONDITION = /^(header|cookie|query):/
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/
const QUERY_NAME = /^[^&=#\s]{1,64}$/
const CONDITION_VALUE = /^[\x20-\x7e]{1,256}$/

// A route's MATCH (--route, "routes"): a host (api.example.com), a wildcard host
// (*.example.com: any name under it), a path prefix (/static: /static and what is below
// it) or a host and a path (api.example.com/v1); and, alone or after them and a space,
// a condition on the request: header:NAME[=VALUE], cookie:NAME[=VALUE] or
// query:NAME[=VALUE] (present, or with that value)
//   -> { host, wildcard, path, condition }, null where not given; condition
//      { kind, name, value } (a header's name in lower case; value null: any).
// The host is lowercased and has no port: a request's Host is matched without its port.
const ROUTE_PATH = /^\/[\x21-\x7e]*$/
function parseRouteMatch (text) {
  const invalid = expected => new UsageError(`invalid route match ${quote(text)}: expected ${expected}`)
  const EXPECTED = 'a host (api.example.com), *.example.com, a path (/static), both (api.example.com/v1), ' +
    'or header:NAME[=VALUE], cookie:NAME[=VALUE] or query:NAME[=VALUE], alone or after them'
  if (typeof text !== 'string' || text.trim() === '') throw invalid(EXPECTED)
  const trimmed = text.trim()
  const at = trimmed.search(/(^|\s)(header|cookie|query):/)
  const condition = at === -1 ? null : parseCondition(trimmed.slice(at).trim(), invalid)
  const place = at === -1 ? trimmed : trimmed.slice(0, at).trim()
  if (/\s/.test(place)) {
    throw invalid('a host or path, then a space and header:NAME[=VALUE], cookie:NAME[=VALUE] or query:NAME[=VALUE]')
  }
  const slash = place.indexOf('/')
  const hostText = slash === -1 ? place : place.slice(0, slash)
  let path = slash === -1 ? null : place.slice(slash)
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
  return { host, wildcard, path, condition }
}

// "header:X-Canary=always" -> { kind: 'header', name: 'x-canary', value: 'always' }
function parseCondition (text, invalid) {
  const kind = CONDITION.exec(text)[1]
  const rest = text.slice(kind.length + 1)
  const eq = rest.indexOf('=')
  const name = eq === -1 ? rest : rest.slice(0, eq)
  const value = eq === -1 ? null : rest.slice(eq + 1)
  const good = { header: TOKEN, cookie: COOKIE_NAME, query: QUERY_NAME }[kind].test(name)
  if (name === '' || !good) {
    const what = { header: 'a header name', cookie: 'a cookie name', query: 'a query parameter\'s name' }[kind]
    throw invalid(`${kind}: and ${what}, e.g. ${kind}:${kind === 'header' ? 'X-Canary' : 'canary'}[=VALUE]`)
  }
  if (value !== null && !CONDITION_VALUE.test(value)) {
    throw invalid(`a value after ${kind}:${name}= of 1 to 256 printable characters`)
  }
  return { kind, name: kind === 'header' ? name.toLowerCase() : name, value }
}

// Where a --route's MATCH ends: at its "=", or for a condition with a value
// (header:NAME=VALUE=...), at the "=" after the value. The first word after a
// condition's "=" is its value when it has a "=" of its own and is no route setting
// (allow=...) nor a backend with settings (:3100,weight=2): values with a comma, or
// named as a setting, are for the config file.
function matchEnd (text) {
  const eq = text.indexOf('=')
  if (eq === -1 || !/(^|\s)(header|cookie|query):/.test(text.slice(0, eq))) return eq
  const next = /^\S{0,}/.exec(text.slice(eq + 1))[0]
  const second = next.indexOf('=')
  if (second <= 0) return eq
  const value = next.slice(0, second)
  return value.includes(',') || ROUTE_SETTINGS.includes(value) ? eq : eq + 1 + second
}

// --route 'MATCH=[strip] [SETTING=VALUE...] [MODE] BACKEND [BACKEND...]' -> { match,
// strip, settings, mode, backends }: texts, checked by the builder (mode null: the
// listener's default mode). `strip` takes the matched path prefix off (proxy/edge);
// `settings`: [[name, value]] of options a route may set for itself (`route` in
// OPTIONS: allow=, deny=, basic-auth=, max-body-size=, ...), which no backend or mode
// looks like.
function parseRouteOption (text, flag) {
  const eq = matchEnd(text)
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
  return { match: text.slice(0, eq).trim(), strip, settings, mode, backends: words }
}

module.exports = { parseRouteMatch, parseRouteOption }
