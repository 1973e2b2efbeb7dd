'use strict'

// Validation and normalisation of everything a user can say, in one place. Two sources:
// the command line (argv.js) and the JSON config file (file.js). Both go through the
// same value parsers (parsers.js) and the same listener builder, buildListener(); what
// comes out is a plain, fully checked config in the shape defaults.js gives it:
//   { logLevel, shutdownTimeout, workers, listeners: [{ name, port, protocol, mode, backends, ... }] }
// Every rejection is a UsageError with one line that names the bad value and what was
// expected; a value from the file is named by its JSON path.

const { UsageError } = require('../errors')
const { specAddress, unixPath } = require('../address')
const { BY_NAME, LISTENER_OPTIONS, GLOBAL_OPTIONS } = require('./options')
const { PARSERS, NUMERIC, MODE_NAMES, MODE_WORDS } = require('./parsers')
const { quote } = require('./values')
const { parseBackend } = require('./backend-spec')
const { parseRouteMatch } = require('./route-spec')
const { listenerFrom, configFrom } = require('./defaults')
const { didYouMean } = require('./suggest')
const { DEFAULT_MODE, modeName, modeOf, modeWord, HASH_MODES } = require('../upstream/balancers')

// Where values come from, for the wording of errors. Each value arrives as
// { value, at }: `at` is null on the command line (a value is named by its flag; see
// commandLineSource in argv.js) and the JSON path in the file ("listeners[1].connect-timeout"),
// which leads the message.
function jsonSource (file) {
  return {
    json: true,
    file,
    fail: (at, message) => new UsageError(`${file}: ${at}: ${message}`),
    about: () => '',
    setting: (name, value) => value === undefined ? `"${name}"` : `"${name}": ${JSON.stringify(value)}`
  }
}

// A JSON value in an error: short, on one line.
function shown (value) {
  const text = JSON.stringify(value)
  return text.length > 40 ? `${text.slice(0, 37)}...` : text
}

// One value, through its option's parser. From the file, a value must have the JSON
// type the option implies: true/false for a switch, a number or a string for a number,
// a string for everything else (durations need their unit: "3s", never 3000).
function parseValue (option, { value, at }, src) {
  if (!src.json) return PARSERS[option.type](value, option.flag, option)
  let text = value
  if (option.bare !== undefined && typeof value === 'boolean') { // "request-id": true
    if (!value) return option.default
    text = option.bare
  } else if (option.type === 'flag') {
    if (typeof value !== 'boolean') throw src.fail(at, `expected true or false, got ${shown(value)}`)
  } else if (NUMERIC.has(option.type) && typeof value === 'number') {
    text = String(value)
  } else if (typeof value !== 'string') {
    const expected = option.type === 'duration'
      ? 'a duration with a unit, e.g. "3s"'
      : NUMERIC.has(option.type) ? 'a number' : 'a string'
    throw src.fail(at, `expected ${expected}, got ${shown(value)}`)
  }
  try {
    return PARSERS[option.type](text, null, option)
  } catch (err) {
    if (err instanceof UsageError) throw src.fail(at, err.message)
    throw err
  }
}

// An option given more than once (`multiple`): a list from the command line, an array
// (or one string) from the file, one value from the environment. Each is parsed; the
// list frozen.
function parseValues (option, { value, at }, src) {
  if (!option.multiple) return parseValue(option, { value, at }, src)
  if (src.json && typeof value !== 'string' && !Array.isArray(value)) {
    throw src.fail(at, `expected a string or a list of strings, got ${shown(value)}`)
  }
  const list = Array.isArray(value) ? value : [value]
  const atOf = i => src.json && Array.isArray(value) ? `${at}[${i}]` : at
  return Object.freeze(list.map((item, i) => parseValue(option, { value: item, at: atOf(i) }, src)))
}

const isHashMode = mode => modeOf(mode).hash === true
const HASH_WORDS = HASH_MODES.map(name => modeWord(modeOf(name))).join(', ')

// The mode, checked against the protocol and hash-balance-factor. `at(name)` is where
// an option was given.
function buildMode (modeEntry, settings, at, src) {
  let mode = DEFAULT_MODE
  if (modeEntry !== undefined) {
    if (src.json && typeof modeEntry.value !== 'string') {
      throw src.fail(modeEntry.at, `expected a mode name, got ${shown(modeEntry.value)}`)
    }
    mode = modeName(modeEntry.value)
    const meant = modeOf(modeEntry.value)
    if (mode === null && meant !== undefined && meant.arg) {
      const message = `invalid mode ${quote(modeEntry.value)}: expected ${modeWord(meant)}, ` +
        `NAME ${meant.argHelp} (letters, digits, - _ . and the like), e.g. ${meant.example}`
      throw src.fail(modeEntry.at, message)
    }
    if (mode === null) {
      const hint = didYouMean(modeEntry.value, MODE_WORDS) || `expected one of ${MODE_NAMES}`
      throw src.fail(modeEntry.at, `unknown mode ${quote(modeEntry.value)}: ${hint}`)
    }
  }
  const needs = modeOf(mode).protocol
  const kind = settings.protocol === 'grpc' ? 'http' : settings.protocol // gRPC is HTTP
  if (needs && kind !== needs) {
    throw src.fail(modeEntry.at, `mode ${mode} needs ${src.setting('protocol', needs)}`)
  }
  if (settings.hashBalanceFactor !== null && !isHashMode(mode)) {
    const subject = src.about(BY_NAME.get('hash-balance-factor'))
    const message = `${subject}does not apply to mode ${quote(mode)}: expected a hash mode (${HASH_WORDS})`
    throw src.fail(at('hash-balance-factor'), message)
  }
  return mode
}

// [{ value, at }] backend strings -> backends as parseBackend returns them, each once.
function buildBackends (entries, src) {
  const backends = []
  const seen = new Set()
  for (const { value, at } of entries) {
    if (typeof value !== 'string') {
      throw src.fail(at, `expected a backend such as "10.0.0.1:80,weight=2", got ${shown(value)}`)
    }
    let backend
    try {
      backend = parseBackend(value)
    } catch (err) {
      throw src.fail(at, err.message)
    }
    const address = specAddress(backend)
    if (seen.has(address)) {
      const message = `duplicate backend ${quote(address)}: expected each backend once (use weight=N to send it more)`
      throw src.fail(at, message)
    }
    seen.add(address)
    backends.push(backend)
  }
  return backends
}

// Options a route may set for its own pool (in the config file): how its backends are
// chosen, retried and checked. Timeouts and limits stay the listener's.
const POOL_OPTIONS = LISTENER_OPTIONS.filter(o => (o.group === 'balancing' || o.group === 'health') &&
  o.name !== 'connect-timeout')
// Rules at the edge a route may add to its listener's (`route` in OPTIONS): judged
// after the listener's, never inherited from them.
const EDGE_OPTIONS = LISTENER_OPTIONS.filter(o => o.route)
const ROUTE_OPTIONS = [...POOL_OPTIONS, ...EDGE_OPTIONS]

// Routes (--route, "routes"): each its own pool, with the listener's settings (and
// mode, unless it has one) but for its own mode, backends and POOL_OPTIONS; and its own
// rules at the edge (EDGE_OPTIONS, strip). `entries`: [{ at, match, name, mode,
// backends, values, strip }], each part { value, at } as for a listener (name, mode and
// strip may be undefined; values a Map of ROUTE_OPTIONS given).
//   -> [{ name, match: { host, wildcard, path }, pool, strip, allow, deny, basicAuth }],
//      `pool` a listener's settings as an Upstream takes them (listenerFrom's shape,
//      named after the route)
function buildRoutes (entries, listenerValues, settings, listenerMode, src) {
  const routes = []
  for (const entry of entries) {
    if (settings.protocol !== 'http' && settings.protocol !== 'grpc') {
      throw src.fail(entry.at, `routes need ${src.setting('protocol', 'http')}: they match a request's Host and path`)
    }
    let match
    try {
      match = parseRouteMatch(entry.match.value)
    } catch (err) {
      throw src.fail(entry.match.at, err.message)
    }
    const name = entry.name === undefined ? entry.match.value : entry.name.value
    if (entry.name !== undefined && (typeof name !== 'string' || !ROUTE_NAME.test(name))) {
      throw src.fail(entry.name.at, `invalid route name ${shown(name)}: expected letters, digits and . _ - (up to 64)`)
    }
    const same = routes.find(r => r.name === name || sameMatch(r.match, match))
    if (same !== undefined) {
      throw src.fail(entry.at, `duplicate route ${quote(name)}: expected each match once`)
    }
    const values = new Map([...listenerValues].filter(([key]) => POOL_OPTIONS.some(o => o.name === key)))
    for (const [key, value] of entry.values) values.set(key, value)
    // A hash-balance-factor of the listener's applies to a route only in a hash mode.
    const routeSettings = { ...settings, hashBalanceFactor: null }
    for (const o of POOL_OPTIONS) {
      if (entry.values.has(o.name)) routeSettings[o.key] = parseValue(o, entry.values.get(o.name), src)
    }
    const edge = {}
    for (const o of EDGE_OPTIONS) {
      edge[o.key] = entry.values.has(o.name) ? parseValues(o, entry.values.get(o.name), src) : o.default
    }
    const strip = buildStrip(entry.strip, match, name, src)
    const at = key => values.get(key).at
    const mode = entry.mode === undefined ? listenerMode : buildMode(entry.mode, routeSettings, at, src)
    if (routeSettings.hashBalanceFactor === null && isHashMode(mode)) {
      routeSettings.hashBalanceFactor = settings.hashBalanceFactor
    }
    if (entry.backends.length === 0) {
      const example = quote(`${entry.match.value}=10.0.0.1:80`)
      throw src.fail(entry.at, `route ${quote(name)} has no backend: expected at least one, e.g. ${example}`)
    }
    const backends = buildBackends(entry.backends, src)
    // --fault names the listener's own backends only.
    const pool = listenerFrom({ ...routeSettings, name, fault: [] }, {
      mode, backends, tls: null, backendTls: null, routes: []
    })
    routes.push({
      name, match, pool, strip, allow: edge.allow.flat(), deny: edge.deny.flat(), basicAuth: edge.basicAuth
    })
  }
  return routes
}

// A route's strip ({ value, at } or undefined): true takes its path prefix off, so it
// needs one.
function buildStrip (entry, match, name, src) {
  if (entry === undefined) return false
  if (typeof entry.value !== 'boolean') throw src.fail(entry.at, `expected true or false, got ${shown(entry.value)}`)
  if (entry.value && (match.path === null || match.path === '/')) {
    const example = match.host === null ? '/api' : `${match.host}/api`
    throw src.fail(entry.at, `route ${quote(name)} has no path prefix to strip: expected a match such as ${example}`)
  }
  return entry.value
}

const ROUTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
const sameMatch = (a, b) => a.host === b.host && a.wildcard === b.wildcard && a.path === b.path

// The one place a listener is put together and checked, whichever source it came from.
//   values        Map option name -> { value, at } (what was given; the rest defaults)
//   mode          { value, at } or undefined (the default mode)
//   backends      [{ value, at }]: backend strings
//   routes        [{ at, match, name, mode, backends, values }]: see buildRoutes
//   certificates  [{ cert, key, certAt, keyAt }] from the file (beyond --tls-cert/--tls-key)
function buildListener ({
  values, mode: modeEntry, backends: backendEntries, routes: routeEntries = [], certificates = []
}, src) {
  const settings = {}
  for (const o of LISTENER_OPTIONS) {
    const entry = values.get(o.name)
    settings[o.key] = entry === undefined ? o.default : parseValues(o, entry, src)
  }
  const given = name => values.has(name) && values.get(name).value !== false
  const at = name => values.get(name).at

  // gRPC is HTTP (every http option applies) with HTTP/2 backends.
  const kind = settings.protocol === 'grpc' ? 'http' : settings.protocol
  for (const o of LISTENER_OPTIONS) {
    if (o.only && given(o.name) && kind !== o.only) {
      throw src.fail(at(o.name), `${src.about(o)}needs ${src.setting('protocol', o.only)}`)
    }
  }
  if (settings.protocol === 'grpc') {
    if (settings.backendProtocol !== 'h2' && given('backend-protocol')) {
      const subject = src.about(BY_NAME.get('backend-protocol'))
      const message = `${subject}${settings.backendProtocol} contradicts ${src.setting('protocol', 'grpc')}: ` +
        'expected h2 (gRPC backends speak HTTP/2)'
      throw src.fail(at('backend-protocol'), message)
    }
    settings.backendProtocol = 'h2'
  }

  checkHeaderRules(settings, given, at, src)

  const mode = buildMode(modeEntry, settings, at, src)
  const backends = buildBackends(backendEntries, src)

  // --fault names a backend as given, once.
  const seen = new Set(backends.map(specAddress))
  const faulted = new Set()
  settings.fault.forEach((fault, i) => {
    const where = src.json && Array.isArray(values.get('fault').value) ? `${at('fault')}[${i}]` : at('fault')
    const subject = src.about(BY_NAME.get('fault'))
    if (!seen.has(fault.address)) {
      const list = [...seen].join(', ')
      throw src.fail(where, `${subject}names ${quote(fault.address)}, not a backend of this listener: ` +
        `expected one of ${list || 'its backends'}, as given`)
    }
    if (faulted.has(fault.address)) {
      throw src.fail(where, `${subject}names ${quote(fault.address)} twice: expected one fault per backend`)
    }
    faulted.add(fault.address)
  })
  // A Unix socket has no port; lila speaks TLS to TCP backends only.
  if (unixPath(settings.host) !== null && given('port')) {
    const subject = src.about(BY_NAME.get('port'))
    throw src.fail(at('port'), `${subject}does not apply to a Unix socket (${src.setting('host', settings.host)})`)
  }
  // A Unix socket's clients have no address, unless a PROXY header gives one.
  for (const name of ['allow', 'deny']) {
    if (unixPath(settings.host) !== null && given(name) && !settings.acceptProxy) {
      const subject = src.about(BY_NAME.get(name))
      throw src.fail(at(name), `${subject}does not apply to a Unix socket (${src.setting('host', settings.host)}): ` +
        `its clients have no address, expected ${src.setting('accept-proxy', true)} to read theirs`)
    }
  }
  if (settings.backendTls) {
    const unix = backends.find(b => b.path !== undefined)
    if (unix !== undefined) {
      const message = `${src.about(BY_NAME.get('backend-tls'))}does not apply to Unix socket backend ` +
        `${quote(specAddress(unix))}: expected TCP backends only with it`
      throw src.fail(at('backend-tls'), message)
    }
  }

  // Options that only make sense together.
  const pair = (name, other, otherValue) => {
    if (given(name) && !given(other)) {
      throw src.fail(at(name), `${src.about(BY_NAME.get(name))}needs ${src.setting(other, otherValue)}`)
    }
  }
  pair('tls-cert', 'tls-key')
  pair('tls-key', 'tls-cert')
  pair('compare', 'mirror')
  pair('compress-types', 'compress', true)
  pair('basic-auth-realm', 'basic-auth')
  pair('basic-auth-pass', 'basic-auth')
  pair('backend-tls-ca', 'backend-tls', true)
  pair('backend-tls-insecure', 'backend-tls', true)
  if (given('backend-tls-ca') && given('backend-tls-insecure')) {
    const subject = src.about(BY_NAME.get('backend-tls-insecure'))
    const message = `${subject}contradicts ${src.setting('backend-tls-ca')}: expected one of them`
    throw src.fail(at('backend-tls-insecure'), message)
  }

  checkTlsOptions(settings, given, at, src, certificates)

  const tlsCertificates = []
  if (settings.tlsCert !== null) {
    tlsCertificates.push({
      cert: settings.tlsCert,
      key: settings.tlsKey,
      certAt: src.json ? `${src.file}: ${at('tls-cert')}` : '--tls-cert',
      keyAt: src.json ? `${src.file}: ${at('tls-key')}` : '--tls-key'
    })
  }
  tlsCertificates.push(...certificates)

  let backendTls = null
  if (settings.backendTls) {
    const caAt = src.json && settings.backendTlsCa !== null
      ? `${src.file}: ${at('backend-tls-ca')}`
      : '--backend-tls-ca'
    backendTls = { ca: settings.backendTlsCa, caAt, insecure: settings.backendTlsInsecure }
  }
  const clientAuth = settings.tlsClientCa === null
    ? null
    : {
        ca: settings.tlsClientCa,
        caAt: src.json ? `${src.file}: ${at('tls-client-ca')}` : '--tls-client-ca',
        optional: settings.tlsClientOptional
      }
  let tls = null
  if (settings.tls !== null) {
    const names = settings.tlsNames === null ? BY_NAME.get('tls-names').local : settings.tlsNames
    tls = { source: settings.tls, names, clientAuth }
  } else if (tlsCertificates.length > 0) {
    tls = { source: 'files', certificates: tlsCertificates, clientAuth }
  }
  const routes = buildRoutes(routeEntries, values, settings, mode, src)
  for (const route of routes) route.pool.backendTls = backendTls
  const addressGiven = { host: given('host'), port: given('port') }
  return listenerFrom(settings, { mode, backends, tls, backendTls, routes, given: addressGiven })
}

// The TLS options together: one source of certificates (files, or --tls local|acme),
// what each source needs, and what needs TLS.
function checkTlsOptions (settings, given, at, src, certificates) {
  const fail = (name, message) => { throw src.fail(at(name), `${src.about(BY_NAME.get(name))}${message}`) }
  if (given('tls') && given('tls-cert')) {
    fail('tls', `contradicts ${src.setting('tls-cert')}: expected one source of certificates`)
  }
  if (given('tls') && certificates.length > 0) {
    fail('tls', 'contradicts "certificates": expected one source of certificates')
  }
  if (given('tls-names') && !given('tls')) fail('tls-names', `needs ${src.setting('tls', 'local')} or acme`)
  if (settings.tls === 'acme' && settings.tlsNames === null) {
    fail('tls', `needs ${src.setting('tls-names')}: the names to get a certificate for, ` +
      'e.g. example.com,www.example.com')
  }
  if (settings.tls === 'acme') {
    const wildcard = settings.tlsNames.find(n => n.startsWith('*.'))
    if (wildcard !== undefined) {
      fail('tls-names', `has ${JSON.stringify(wildcard)}, a wildcard: it needs a DNS-01 challenge, which lila ` +
        'cannot answer; expected each name written out')
    }
  }
  const secured = given('tls') || given('tls-cert') || certificates.length > 0
  if (given('tls-client-optional') && !given('tls-client-ca')) {
    fail('tls-client-optional', `needs ${src.setting('tls-client-ca')}`)
  }
  for (const name of ['tls-client-ca', 'redirect-http']) {
    if (given(name) && !secured) fail(name, `needs TLS: ${src.setting('tls-cert')} or ${src.setting('tls', 'local')}`)
  }
  if (given('redirect-http') && settings.redirectHttp !== 0 && settings.redirectHttp === settings.port) {
    fail('redirect-http', `is the listener's own port ${settings.port}: expected another port (80, say)`)
  }
  if (given('redirect-http') && unixPath(settings.host) !== null) {
    fail('redirect-http', `does not apply to a Unix socket (${src.setting('host', settings.host)})`)
  }
}

// The header options together (header-rules.js): {request_id} needs --request-id, and
// a rule may not also set or remove the request ID's own header.
function checkHeaderRules (settings, given, at, src) {
  const id = settings.requestId === null ? null : settings.requestId.toLowerCase()
  for (const name of ['set-header', 'set-response-header', 'del-header', 'del-response-header']) {
    if (!given(name)) continue
    const option = BY_NAME.get(name)
    for (const rule of settings[option.key]) {
      const header = rule.name === undefined ? rule : rule.name
      if (id !== null && header.toLowerCase() === id) {
        throw src.fail(at(name), `${src.about(option)}contradicts ${src.setting('request-id', settings.requestId)}: ` +
          `expected ${quote(header)} left to --request-id`)
      }
      if (id === null && rule.value !== undefined && rule.value.includes('{request_id}')) {
        const needs = src.setting('request-id', true)
        throw src.fail(at(name), `${src.about(option)}uses {request_id}, which needs ${needs}`)
      }
    }
  }
}

// The process-wide settings, from { name -> { value, at } }.
function buildGlobals (values, src) {
  const globals = {}
  for (const o of GLOBAL_OPTIONS) {
    const entry = values.get(o.name)
    globals[o.key] = entry === undefined ? o.default : parseValue(o, entry, src)
  }
  if (values.has('acme-staging') && values.get('acme-staging').value !== false && values.has('acme-directory')) {
    const subject = src.about(BY_NAME.get('acme-staging'))
    const message = `${subject}contradicts ${src.setting('acme-directory')}: expected one of them`
    throw src.fail(values.get('acme-staging').at, message)
  }
  for (const name of ['status-host', 'status-token', 'status-basic-auth']) {
    const entry = values.get(name)
    if (entry !== undefined && globals.statusPort === null) {
      throw src.fail(entry.at, `${src.about(BY_NAME.get(name))}needs ${src.setting('status-port')}`)
    }
  }
  // Both would be sent in the one Authorization header.
  if (globals.statusToken !== null && globals.statusBasicAuth !== null) {
    const subject = src.about(BY_NAME.get('status-basic-auth'))
    throw src.fail(values.get('status-basic-auth').at, `${subject}contradicts ${src.setting('status-token')}: ` +
      'expected one of them (both ride in the Authorization header; the file\'s users may make changes)')
  }
  return globals
}

// The whole config; listeners must differ in name and address. `listenerAt(i)` names
// listener i in errors.
function buildConfig (globals, listeners, src, listenerAt = () => null) {
  for (let i = 0; i < listeners.length; i++) {
    for (let j = 0; j < i; j++) {
      const [a, b] = [listeners[j], listeners[i]]
      if (unixPath(a.host) !== null || unixPath(b.host) !== null) {
        if (a.host === b.host) {
          throw src.fail(listenerAt(i),
            `socket ${b.host} is taken by listener ${quote(a.name)}: expected each listener on its own`)
        }
      } else if (a.port !== 0 && a.port === b.port && (a.host === b.host || isWildcard(a.host) || isWildcard(b.host))) {
        throw src.fail(listenerAt(i),
          `port ${b.port} is taken by listener ${quote(a.name)}: expected each listener on its own port`)
      }
      if (a.name === b.name) {
        throw src.fail(listenerAt(i),
          `duplicate listener name ${quote(b.name)}: expected each listener to have its own (set "name")`)
      }
    }
  }
  // A --redirect-http port is a listener too.
  const taken = listeners.map(l => ({ name: l.name, host: l.host, port: l.port }))
  listeners.forEach((l, i) => {
    if (l.redirectHttp === null || l.redirectHttp === 0) return
    const other = taken.find(t => t.port === l.redirectHttp &&
      (t.host === l.host || isWildcard(t.host) || isWildcard(l.host)))
    if (other !== undefined) {
      throw src.fail(listenerAt(i), `redirect-http port ${l.redirectHttp} is taken by listener ${quote(other.name)}: ` +
        'expected a port of its own')
    }
    taken.push({ name: `${l.name} (redirect-http)`, host: l.host, port: l.redirectHttp })
  })
  return configFrom(globals, listeners)
}

function isWildcard (host) {
  return host === null || host === '0.0.0.0' || host === '::'
}

module.exports = {
  ROUTE_OPTIONS,
  buildListener,
  buildGlobals,
  buildConfig,
  jsonSource
}
