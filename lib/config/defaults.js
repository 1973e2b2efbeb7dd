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

// The options the builder gathers into one value (`tls`, `backendTls` in `parts`), and
// those configFrom gathers into `status` and `acme`: every other option is a key of the
// config as it is, its value as the option's parser returns it (options.js says what).
const GATHERED = new Set(['tlsCert', 'tlsKey', 'tlsNames', 'tlsClientCa', 'tlsClientOptional',
  'backendTlsCa', 'backendTlsInsecure',
  'statusPort', 'statusHost', 'statusToken', 'statusBasicAuth',
  'acmeEmail', 'acmeDirectory', 'acmeStaging', 'acmeCa',
  'fleet', 'fleetName', 'fleetCa', 'fleetKey'])
const asGiven = (options, values) =>
  Object.fromEntries(options.filter(o => !GATHERED.has(o.key)).map(o => [o.key, values[o.key]]))

// `settings` has every listener option; `parts` what no single option says: the mode,
// the backends (as parseBackend returns them), and TLS as the builder put it together
// (tls: null, or { source: 'files', certificates, clientAuth } or { source: 'local' |
// 'acme', names, clientAuth }, clientAuth { ca, caAt, optional } or null; backendTls:
// { ca, caAt, insecure } or null).
// `given`: whether the host and the port were given rather than defaults (a socket
// handed to lila, by systemd, must then match them: cli/inherited.js).
function listenerFrom (settings, { mode, backends, tls, backendTls, routes = [], given = NOT_GIVEN, run = null }) {
  return {
    ...asGiven(LISTENER_OPTIONS, settings),
    name: settings.name === null ? defaultName(settings.protocol, settings.port, settings.host) : settings.name,
    port: unixPath(settings.host) !== null ? null : settings.port, // null on a Unix socket
    addressGiven: given, // { host, port }: each true when given, false when the default
    mode,
    backends,
    // --allow, --deny: networks ("10.0.0.0/8") let in and kept out, each list flat
    allow: settings.allow.flat(),
    deny: settings.deny.flat(),
    maintenanceAllow: settings.maintenanceAllow.flat(), // --maintenance-allow, flat as --allow
    // A probe gives up after this long: never longer than the interval (so probes
    // cannot pile up) nor than a real connection would wait.
    checkTimeout: Math.min(settings.checkInterval, settings.connectTimeout),
    // TLS termination: the first certificate is the default, the others are chosen by
    // the name the client asks for (SNI). Paths; tls.js reads them.
    tls,
    backendTls,
    // --route: [{ name, match: { host, wildcard, path }, pool, strip, allow, deny,
    // basicAuth }], each pool a listener's settings (this shape) for its own Upstream,
    // and the route's own rules at the edge (strip: its path prefix taken off); requests
    // matching none go to `backends`
    routes,
    // lila run: { command, instances, appPorts, ... } (app/app.js), or null
    run
  }
}

function configFrom (globals, listeners) {
  return {
    ...asGiven(GLOBAL_OPTIONS, globals),
    status: globals.statusPort === null
      ? null
      : {
          host: globals.statusHost,
          port: globals.statusPort,
          token: globals.statusToken,
          basicAuth: globals.statusBasicAuth // an htpasswd file's path, or null
        },
    acme: {
      directory: globals.acmeStaging ? BY_NAME.get('acme-staging').directory : globals.acmeDirectory,
      email: globals.acmeEmail,
      ca: globals.acmeCa
    },
    // --fleet: { target (config/fleet-url.js), name, ca: a PEM file's path or null, key:
    // --fleet-key's path or null }, or null
    fleet: globals.fleet === null
      ? null
      : { target: globals.fleet, name: globals.fleetName, ca: globals.fleetCa, key: globals.fleetKey },
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
