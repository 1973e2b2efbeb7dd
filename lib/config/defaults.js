'use strict'

// Defaults, once. The OPTIONS table (options.js) is the only place a default is written;
// this module puts it in the normalised shape the rest of lila runs on, the same shape
// buildListener() and buildConfig() return:
//   listenerFrom(settings, parts)   settings (option key -> value) -> a listener
//   configFrom(globals, listeners)  globals (option key -> value) -> the whole config
//   listenerConfig(overrides)       a complete listener: the defaults, then `overrides`
//                                   (normalised keys: mode, backends, checkInterval...)
//   configWith(overrides)           a complete config: the defaults, no listeners
//                                   unless `overrides` has them
// No parsing here: what is given is taken as already checked.

const { LISTENER_OPTIONS, GLOBAL_OPTIONS, BY_NAME } = require('./options')
const { DEFAULT_MODE } = require('../upstream/balancers')
const { defaultName } = require('../listener-names')
const { unixPath } = require('../address')

const NOT_GIVEN = Object.freeze({ host: false, port: false })

const defaultsOf = options => Object.fromEntries(options.map(o => [o.key, o.default]))

// `settings` has every listener option; `parts` what no single option says: the mode,
// the backends (as parseBackend returns them), and TLS as the builder put it together
// (tls: null, or { source: 'files', certificates, clientAuth } or { source: 'local' |
// 'acme', names, clientAuth }, clientAuth { ca, caAt, optional } or null; backendTls:
// { ca, caAt, insecure } or null).
// `given`: whether the host and the port were given rather than defaults (a socket
// handed to lila, by systemd, must then match them: cli/inherited.js).
function listenerFrom (settings, { mode, backends, tls, backendTls, routes = [], given = NOT_GIVEN }) {
  return {
    name: settings.name === null ? defaultName(settings.protocol, settings.port, settings.host) : settings.name,
    port: unixPath(settings.host) !== null ? null : settings.port, // null on a Unix socket
    host: settings.host,
    addressGiven: given, // { host, port }: each true when given, false when the default
    protocol: settings.protocol,
    mode,
    backends,
    connectTimeout: settings.connectTimeout,
    idleTimeout: settings.idleTimeout,
    retries: settings.retries,
    retryOn: settings.retryOn,
    retryBudget: settings.retryBudget,
    maxConn: settings.maxConn,
    rateLimit: settings.rateLimit,
    maxConnPerClient: settings.maxConnPerClient,
    timeout: settings.timeout,
    headerTimeout: settings.headerTimeout,
    drainGrace: settings.drainGrace, // a graceful close waits this long for an idle connection's next request
    bodyTimeout: settings.bodyTimeout,
    forwarded: settings.forwarded,
    backendProtocol: settings.backendProtocol, // 'h1' or 'h2'
    sticky: settings.sticky, // --sticky: { cookie: name } or null
    // The header options (header-rules.js compiles them): the request ID's header name
    // or null; [{ name, value }] to set and [name] to remove, on requests and responses;
    // the Host backends get: null (the client's), 'backend' or a fixed value.
    requestId: settings.requestId,
    setHeader: settings.setHeader,
    delHeader: settings.delHeader,
    setResponseHeader: settings.setResponseHeader,
    delResponseHeader: settings.delResponseHeader,
    hostHeader: settings.hostHeader,
    // Rules at the edge (proxy/edge/rules.js compiles them): networks ("10.0.0.0/8")
    // let in and kept out, each list flat; an htpasswd file's path or null, its realm,
    // whether backends get the Authorization; the codings offered in order (null: no
    // --compress) and the types compressed; W3C trace context on or off.
    allow: settings.allow.flat(),
    deny: settings.deny.flat(),
    basicAuth: settings.basicAuth,
    basicAuthRealm: settings.basicAuthRealm,
    basicAuthPass: settings.basicAuthPass,
    compress: settings.compress,
    compressTypes: settings.compressTypes,
    trace: settings.trace,
    check: settings.check,
    checkHost: settings.checkHost,
    checkInterval: settings.checkInterval,
    // A probe gives up after this long: never longer than the interval (so probes
    // cannot pile up) nor than a real connection would wait.
    checkTimeout: Math.min(settings.checkInterval, settings.connectTimeout),
    rise: settings.rise,
    fall: settings.fall,
    ejectAfter: settings.ejectAfter,
    ejectOn: settings.ejectOn,
    queueTimeout: settings.queueTimeout,
    resolveInterval: settings.resolveInterval,
    dnsServer: settings.dnsServer,
    hashBalanceFactor: settings.hashBalanceFactor,
    // TLS termination: the first certificate is the default, the others are chosen by
    // the name the client asks for (SNI). Paths; tls.js reads them.
    tls,
    // --redirect-http: a plain HTTP port for ACME's HTTP-01 and a 308 to https, or null
    redirectHttp: settings.redirectHttp,
    backendTls,
    proxyProtocol: settings.proxyProtocol,
    acceptProxy: settings.acceptProxy,
    // --mirror: { address, host, port, path, percent } or null; --compare its answers
    mirror: settings.mirror,
    compare: settings.compare,
    fault: settings.fault, // [{ address, delay, status, reset, rate, duration }]: at start only
    // --route: [{ name, match: { host, wildcard, path }, pool, strip, allow, deny,
    // basicAuth }], each pool a listener's settings (this shape) for its own Upstream,
    // and the route's own rules at the edge (strip: its path prefix taken off); requests
    // matching none go to `backends`
    routes
  }
}

function configFrom (globals, listeners) {
  return {
    logLevel: globals.logLevel,
    shutdownTimeout: globals.shutdownTimeout,
    workers: globals.workers,
    accessLog: globals.accessLog, // null (off), 'text' or 'json'
    pidFile: globals.pidFile, // --pid-file: a path, or null
    status: globals.statusPort === null
      ? null
      : {
          host: globals.statusHost,
          port: globals.statusPort,
          token: globals.statusToken,
          basicAuth: globals.statusBasicAuth // an htpasswd file's path, or null
        },
    dashboard: globals.dashboard,
    // --tls local|acme: where lila keeps what it makes (null: the default folder, which
    // tls/state.js finds from the environment), and the ACME server to ask
    stateDir: globals.stateDir,
    acme: {
      directory: globals.acmeStaging ? BY_NAME.get('acme-staging').directory : globals.acmeDirectory,
      email: globals.acmeEmail,
      ca: globals.acmeCa
    },
    listeners
  }
}

// Derived values (the name, checkTimeout) follow the overrides unless given themselves.
function listenerConfig (overrides = {}) {
  const settings = { ...defaultsOf(LISTENER_OPTIONS), ...overrides }
  const given = { host: 'host' in overrides, port: 'port' in overrides }
  const parts = { mode: DEFAULT_MODE, backends: [], tls: null, backendTls: null, given }
  return { ...listenerFrom(settings, parts), ...overrides }
}

function configWith (overrides = {}) {
  return { ...configFrom(defaultsOf(GLOBAL_OPTIONS), []), ...overrides }
}

module.exports = { listenerFrom, configFrom, listenerConfig, configWith }
