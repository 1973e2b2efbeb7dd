'use strict'

// Validation and normalisation of everything a user can say, in one place. Two sources:
// the command line (argv.js) and the JSON config file (file.js). Both go through the
// same value parsers (parsers.js, through given-values.js) and the same listener
// builder, buildListener(), with its pool (build-pool.js) and routes (build-routes.js);
// what comes out is a plain, fully checked config in the shape defaults.js gives it:
//   { logLevel, shutdownTimeout, workers, listeners: [{ name, port, protocol, mode, backends, ... }] }
// Every rejection is a UsageError with one line that names the bad value and what was
// expected; a value from the file is named by its JSON path.

const { specAddress, unixPath } = require('../address')
const { BY_NAME, LISTENER_OPTIONS, GLOBAL_OPTIONS, RUN_OPTIONS } = require('./options')
const { quote } = require('./values')
const { listenerFrom, configFrom } = require('./defaults')
const { parseValue, parseValues } = require('./given-values')
const { buildMode, buildBackends } = require('./build-pool')
const { buildRoutes, buildCanary } = require('./build-routes')

// The one place a listener is put together and checked, whichever source it came from.
//   values        Map option name -> { value, at } (what was given; the rest defaults)
//   mode          { value, at } or undefined (the default mode)
//   backends      [{ value, at }]: backend strings
//   routes        [{ at, match, name, mode, backends, values }]: see buildRoutes
//   certificates  [{ cert, key, certAt, keyAt }] from the file (beyond --tls-cert/--tls-key)
//   run           lila run: { command: { value, at }, values: Map of its options, at },
//                 or null; its instances are then the listener's backends
function buildListener ({
  values, mode: modeEntry, backends: backendEntries, routes: routeEntries = [], certificates = [], run: runEntry = null
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
  // tcp has no statuses: there --retry-on says only whether bytes go again after a reset.
  if (kind === 'tcp' && given('retry-on') && settings.retryOn.some(code => code !== 'reset')) {
    const subject = src.about(BY_NAME.get('retry-on'))
    const text = quote(String(values.get('retry-on').value))
    throw src.fail(at('retry-on'), `${subject}${text} names statuses, which need ${src.setting('protocol', 'http')}: ` +
      `expected reset or none with ${src.setting('protocol', 'tcp')}`)
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
  const run = buildRun(runEntry, src)
  const backends = run === null ? buildBackends(backendEntries, src) : [APP_BACKEND]

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
  checkEdgeRound2(settings, backends, routes, given, at, src)
  const canary = buildCanary(settings.canary, settings, mode, null, src, given('canary') ? at('canary') : null)
  for (const pool of [canary, ...routes.map(route => route.canary)]) {
    if (pool !== null) pool.pool.backendTls = backendTls
  }
  const addressGiven = { host: given('host'), port: given('port') }
  return { ...listenerFrom(settings, { mode, backends, tls, backendTls, routes, given: addressGiven, run }), canary }
}

// --- lila run (app/) ---

// The backend a `lila run` listener is given: the app's instances, on loopback, each a
// backend once it is ready (upstream/group.js, app/app.js).
const APP_BACKEND = Object.freeze({
  host: '127.0.0.1', port: null, app: true, weight: 1, maxConn: null, slowStart: 0, backup: false
})

// lila run's settings: the command and its options (RUN_OPTIONS), checked together.
function buildRun (entry, src) {
  if (entry === null) return null
  const { command, values, at } = entry
  if (command === undefined || typeof command.value !== 'string' || command.value.trim() === '') {
    const where = command === undefined ? at : command.at
    const what = command === undefined ? 'no command given' : `invalid command ${JSON.stringify(command.value)}`
    const example = src.json ? '"run": { "command": "node server.js" }' : 'lila run \'node server.js\' --instances 3'
    throw src.fail(where, `${what}: expected the app's command line, e.g. ${example}`)
  }
  const run = { command: command.value.trim() }
  for (const o of RUN_OPTIONS) {
    const given = values.get(o.name)
    run[o.key] = given === undefined ? o.default : parseValues(o, given, src)
  }
  const { appPorts, instances, surge } = run
  if (appPorts !== null && appPorts.last - appPorts.first + 1 < instances + surge) {
    const size = appPorts.last - appPorts.first + 1
    const subject = src.about(BY_NAME.get('app-ports'))
    throw src.fail(values.get('app-ports').at, `${subject}has ${size} port${size === 1 ? '' : 's'} for ` +
      `${instances} instance${instances === 1 ? '' : 's'}: expected at least ${instances + surge} ` +
      '(--instances, and --surge more for a rolling restart; twice --instances for lila upgrade)')
  }
  return run
}

// Forward auth, error pages, maintenance and canaries together: what needs what.
function checkEdgeRound2 (settings, backends, routes, given, at, src) {
  const fail = (name, message) => { throw src.fail(at(name), `${src.about(BY_NAME.get(name))}${message}`) }
  const anyAuth = settings.forwardAuth !== null || routes.some(route => route.forwardAuth !== null)
  for (const name of ['forward-auth-copy', 'forward-auth-timeout', 'forward-auth-cache']) {
    if (given(name) && !anyAuth) fail(name, `needs ${src.setting('forward-auth')} (the listener's or a route's)`)
  }
  if (given('intercept-errors') && settings.errorPage.length === 0) {
    fail('intercept-errors', `needs ${src.setting('error-page')}`)
  }
  const anyCanary = settings.canary !== null || routes.some(route => route.canary !== null)
  for (const name of ['canary-cookie', 'canary-header']) {
    if (given(name) && !anyCanary) fail(name, `needs ${src.setting('canary')} (the listener's or a route's)`)
  }
  if (settings.canary !== null && backends.length === 0) {
    fail('canary', 'needs the listener\'s own backends, beside which it stands (a route\'s canary goes in the route)')
  }
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
  for (const name of ['fleet-name', 'fleet-ca', 'fleet-key']) {
    const entry = values.get(name)
    if (entry !== undefined && globals.fleet === null) {
      throw src.fail(entry.at, `${src.about(BY_NAME.get(name))}needs ${src.setting('fleet')}`)
    }
  }
  // A fleet's member is one process: its limits, changes and certificates are shared
  // from the process that serves (workers would each be a member of their own).
  if (globals.fleet !== null && globals.workers !== 1) {
    throw src.fail(values.get('fleet').at, `${src.about(BY_NAME.get('fleet'))}contradicts ` +
      `${src.setting('workers', globals.workers)}: a lila of a fleet runs as one process for now; expected one of them`)
  }
  if (globals.fleetCa !== null && !globals.fleet.tls) {
    throw src.fail(values.get('fleet-ca').at, `${src.about(BY_NAME.get('fleet-ca'))}needs a rediss:// ` +
      `${src.setting('fleet')} (TLS to Redis)`)
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
  // lila run's instances are processes of lila's own: one process starts, watches and
  // rolls them (docs/run.md says why, and what to do instead).
  if (globals.workers !== 1 && listeners.some(l => l.run !== null)) {
    throw src.fail('workers', `${src.about(BY_NAME.get('workers'))}does not apply to lila run: ` +
      'one lila process starts, watches and rolls the app\'s instances, which several workers could not share; ' +
      'leave it out, and give the app the cores with --instances N (or auto)')
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
  buildListener,
  buildGlobals,
  buildConfig
}
