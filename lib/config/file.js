'use strict'

// The JSON config file (--config): several listeners, each with its own port,
// protocol, mode, options and backends. Keys are the long option names; an option at
// the top level is every listener's default unless the listener says otherwise;
// process-wide options (log-level, shutdown-timeout, workers) only go at the top.
//
//   parseConfigFile(text, file) -> config, or a one-line UsageError naming the JSON path
//   readConfigFile(file)        -> the same, reading the file first
//
// Values go through builder.js (buildListener, buildGlobals), as the command line's do.
// Relative file names (certificates) are relative to the config file's folder.

const fs = require('fs')
const path = require('path')
const { UsageError } = require('../errors')
const { parseJson, JsonError } = require('./json')
const { OPTIONS, BY_NAME, LISTENER_OPTIONS, RUN_OPTIONS } = require('./options')
const { buildListener, buildGlobals, buildConfig } = require('./builder')
const { jsonSource } = require('./given-values')
const { ROUTE_OPTIONS } = require('./build-routes')
const { didYouMean } = require('./suggest')

// Keys that are not options: the listeners, and what the command line says without a flag.
const LISTENER_KEYS = new Set([
  ...LISTENER_OPTIONS.map(o => o.name), 'mode', 'backends', 'routes', 'certificates', 'run'
])
const RUN_KEYS = new Set([...RUN_OPTIONS.map(o => o.name), 'command'])
const ROUTE_KEYS = new Set([...ROUTE_OPTIONS.map(o => o.name), 'match', 'name', 'mode', 'backends', 'strip'])
const TOP_KEYS = new Set([
  ...OPTIONS.filter(o => o.scope !== 'cli' && o.scope !== 'own' && o.scope !== 'run').map(o => o.name),
  'mode', 'certificates', 'listeners'
])
const INHERITED = new Set([
  ...LISTENER_OPTIONS.filter(o => o.scope === 'listener').map(o => o.name),
  'mode', 'certificates'
])

// A key in a JSON path: `a.b` for plain keys, `a["odd key"]` (quoted, one line) else.
const keyPath = (base, key) => /^[A-Za-z0-9_-]+$/.test(key)
  ? (base === '' ? key : `${base}.${key}`)
  : `${base}[${JSON.stringify(key)}]`
const isObject = value => value !== null && typeof value === 'object' && !Array.isArray(value)
const typeName = value => {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return 'an object'
  if (typeof value === 'string') return 'a string'
  return `${typeof value} ${JSON.stringify(value)}`
}

// environment: Map of option name -> { value, variable } (environment.js): values that
// win over the file's, for the process and every listener.
function readConfigFile (file, { readFile = fs.readFileSync, environment = new Map() } = {}) {
  let text
  try {
    text = readFile(file, 'utf8')
  } catch (err) {
    throw new UsageError(`cannot read config file ${JSON.stringify(file)}: ${readReason(err)}`)
  }
  return parseConfigFile(text, file, environment)
}

function readReason (err) {
  const reasons = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'it is a folder' }
  return reasons[err.code] || err.code || err.message
}

function parseConfigFile (text, file, environment = new Map()) {
  let doc
  try {
    doc = parseJson(text)
  } catch (err) {
    if (err instanceof JsonError) throw new UsageError(`${file}: invalid JSON at ${err.message}`)
    throw err
  }
  const src = jsonSource(file)
  if (!isObject(doc)) throw new UsageError(`${file}: expected a JSON object at the top, got ${typeName(doc)}`)

  const globals = new Map()
  const inherited = new Map()
  for (const key of Object.keys(doc)) {
    checkKey(key, keyPath('', key), TOP_KEYS, src, 'top')
    if (key === 'listeners') continue
    const entry = { value: doc[key], at: key }
    if (INHERITED.has(key)) inherited.set(key, entry)
    else globals.set(key, entry)
  }

  const listenersValue = doc.listeners
  if (!Array.isArray(listenersValue) || listenersValue.length === 0) {
    const got = listenersValue === undefined
      ? 'none'
      : Array.isArray(listenersValue) ? 'an empty list' : typeName(listenersValue)
    const example = '"listeners": [{ "port": 80, "backends": ["10.0.0.1:80"] }]'
    throw new UsageError(`${file}: listeners: expected a list of at least one listener, e.g. ${example}, got ${got}`)
  }
  const fromEnvironment = new Map()
  for (const [name, { value, variable, option }] of environment) {
    const entry = { value, at: variable }
    if (option.scope === 'global') globals.set(name, entry)
    else fromEnvironment.set(name, entry)
  }
  const dir = path.dirname(file)
  const listeners = listenersValue.map((raw, i) =>
    listenerFrom(raw, `listeners[${i}]`, inherited, src, dir, fromEnvironment))
  const config = buildConfig(buildGlobals(globals, src), listeners, src, i => `listeners[${i}]`)
  if (config.stateDir !== null) config.stateDir = path.resolve(dir, config.stateDir)
  if (config.acme.ca !== null) config.acme.ca = path.resolve(dir, config.acme.ca)
  if (config.status !== null && config.status.basicAuth !== null) {
    config.status.basicAuth = path.resolve(dir, config.status.basicAuth)
  }
  return config
}

function listenerFrom (raw, where, inherited, src, dir, fromEnvironment) {
  if (!isObject(raw)) {
    const example = '{ "port": 80, "backends": ["10.0.0.1:80"] }'
    throw src.fail(where, `expected a listener object, e.g. ${example}, got ${typeName(raw)}`)
  }
  const values = new Map(inherited)
  for (const key of Object.keys(raw)) {
    checkKey(key, keyPath(where, key), LISTENER_KEYS, src, 'listener')
    values.set(key, { value: raw[key], at: keyPath(where, key) })
  }
  const run = runFrom(values.get('run'), src, fromEnvironment)
  for (const [name, entry] of fromEnvironment) if (BY_NAME.get(name).scope !== 'run') values.set(name, entry)
  const mode = values.get('mode')
  const backends = values.get('backends')
  const certificates = values.get('certificates')
  const routes = values.get('routes')
  values.delete('mode')
  values.delete('backends')
  values.delete('certificates')
  values.delete('routes')
  values.delete('run')
  if (run !== null && backends !== undefined) {
    throw src.fail(backends.at, 'contradicts "run": a listener that runs the app has its instances as backends')
  }
  // With routes, the listener's own backends (for requests no route matches) may be left out.
  if (backends === undefined && routes === undefined && run === null) {
    throw src.fail(where, 'missing "backends": expected a list such as ["10.0.0.1:80", "10.0.0.2:80,weight=2"]')
  }
  if (backends !== undefined && (!Array.isArray(backends.value) || backends.value.length === 0)) {
    const got = Array.isArray(backends.value) ? 'an empty list' : typeName(backends.value)
    throw src.fail(backends.at, `expected a list of at least one backend such as ["10.0.0.1:80"], got ${got}`)
  }
  const listener = buildListener({
    values,
    mode,
    backends: backends === undefined
      ? []
      : backends.value.map((value, i) => ({ value, at: `${backends.at}[${i}]` })),
    routes: routes === undefined ? [] : routesFrom(routes, src),
    certificates: certificates === undefined ? [] : certificatesFrom(certificates, src),
    run
  }, src)
  // The app's folder is relative to the config file.
  if (listener.run !== null) listener.run.appCwd = path.resolve(dir, listener.run.appCwd || '.')
  // File names are relative to the config file.
  if (listener.tls !== null && listener.tls.source === 'files') {
    for (const c of listener.tls.certificates) {
      c.cert = path.resolve(dir, c.cert)
      c.key = path.resolve(dir, c.key)
    }
  }
  if (listener.tls !== null && listener.tls.clientAuth !== null) {
    listener.tls.clientAuth.ca = path.resolve(dir, listener.tls.clientAuth.ca)
  }
  if (listener.backendTls !== null && listener.backendTls.ca !== null) {
    listener.backendTls.ca = path.resolve(dir, listener.backendTls.ca)
  }
  for (const rules of [listener, ...listener.routes]) resolveEdgeFiles(rules, dir)
  return listener
}

// "run": { "command": "node server.js", "instances": 3, ...lila run's options }: the
// listener runs the app (app/app.js), whose instances are its backends. LILA_ variables
// of lila run's options apply to every listener that runs an app.
function runFrom (entry, src, fromEnvironment) {
  if (entry === undefined) return null
  const { value, at } = entry
  if (!isObject(value)) {
    const example = '{ "command": "node server.js", "instances": 3 }'
    throw src.fail(at, `expected an object such as ${example}, got ${typeName(value)}`)
  }
  const values = new Map()
  for (const key of Object.keys(value)) {
    if (!RUN_KEYS.has(key)) {
      const hint = didYouMean(key, RUN_KEYS) || 'expected "command" or an option of lila help run'
      throw src.fail(keyPath(at, key), `unknown key ${JSON.stringify(key)} in "run": ${hint}`)
    }
    values.set(key, { value: value[key], at: keyPath(at, key) })
  }
  for (const [name, given] of fromEnvironment) if (BY_NAME.get(name).scope === 'run') values.set(name, given)
  const command = values.get('command')
  values.delete('command')
  return { command, values, at }
}

// The files of a listener's or a route's rules at the edge, relative to the config file:
// --basic-auth, --error-page, --maintenance's page.
function resolveEdgeFiles (rules, dir) {
  if (rules.basicAuth !== null) rules.basicAuth = path.resolve(dir, rules.basicAuth)
  rules.errorPage = rules.errorPage.map(page => ({ ...page, file: path.resolve(dir, page.file) }))
  if (rules.maintenance !== null && rules.maintenance.page !== null) {
    rules.maintenance = { page: path.resolve(dir, rules.maintenance.page) }
  }
}

// "routes": [{ "match": "api.example.com", "mode": "lc", "backends": [...], ...options }]:
// see builder.js buildRoutes.
function routesFrom ({ value, at }, src) {
  const example = '[{ "match": "api.example.com", "backends": ["10.0.0.1:80"] }]'
  if (!Array.isArray(value) || value.length === 0) {
    const got = Array.isArray(value) ? 'an empty list' : typeName(value)
    throw src.fail(at, `expected a list of routes such as ${example}, got ${got}`)
  }
  return value.map((raw, i) => {
    const where = `${at}[${i}]`
    if (!isObject(raw)) {
      throw src.fail(where, `expected a route object such as ${example.slice(1, -1)}, got ${typeName(raw)}`)
    }
    const values = new Map()
    for (const key of Object.keys(raw)) {
      if (!ROUTE_KEYS.has(key)) {
        const hint = didYouMean(key, ROUTE_KEYS) ||
          'expected "match", "backends", "name", "mode", "strip", "allow", "deny", "basic-auth" or an option of ' +
          'the balancing and health groups'
        throw src.fail(keyPath(where, key), `unknown key ${JSON.stringify(key)} in a route: ${hint}`)
      }
      values.set(key, { value: raw[key], at: keyPath(where, key) })
    }
    const part = key => {
      const entry = values.get(key)
      values.delete(key)
      return entry
    }
    const match = part('match')
    const name = part('name')
    const mode = part('mode')
    const backends = part('backends')
    const strip = part('strip')
    if (match === undefined) throw src.fail(where, 'missing "match": expected a host, *.host, a /path or host/path')
    if (backends === undefined || !Array.isArray(backends.value) || backends.value.length === 0) {
      const expected = 'expected "backends": a list of at least one backend such as ["10.0.0.1:80"]'
      throw src.fail(backends === undefined ? where : backends.at, expected)
    }
    if (typeof match.value !== 'string') throw src.fail(match.at, `expected a string, got ${typeName(match.value)}`)
    return {
      at: where,
      match,
      name,
      mode,
      backends: backends.value.map((v, j) => ({ value: v, at: `${backends.at}[${j}]` })),
      values,
      strip
    }
  })
}

// "certificates": [{ "cert": "a.pem", "key": "a.key" }, ...]: more certificates for
// TLS termination, chosen by the name a client asks for.
function certificatesFrom ({ value, at }, src) {
  if (!Array.isArray(value)) {
    throw src.fail(at, `expected a list such as [{ "cert": "site.pem", "key": "site.key" }], got ${typeName(value)}`)
  }
  return value.map((entry, i) => {
    const where = `${at}[${i}]`
    if (!isObject(entry)) throw src.fail(where, `expected { "cert": FILE, "key": FILE }, got ${typeName(entry)}`)
    for (const key of Object.keys(entry)) {
      if (key !== 'cert' && key !== 'key') {
        throw src.fail(`${where}`, `unknown key ${JSON.stringify(key)}: expected "cert" and "key"`)
      }
    }
    const file = key => {
      const v = entry[key]
      if (v === undefined) throw src.fail(where, `missing "${key}": expected { "cert": FILE, "key": FILE }`)
      if (typeof v !== 'string' || v === '' || v.includes('\0')) {
        throw src.fail(`${where}.${key}`, `expected a file name, got ${typeName(v)}`)
      }
      return v
    }
    return {
      cert: file('cert'),
      key: file('key'),
      certAt: `${src.file}: ${where}.cert`,
      keyAt: `${src.file}: ${where}.key`
    }
  })
}

// A key must be an option (or listeners, mode, backends, certificates) that may go there.
function checkKey (key, at, allowed, src, level) {
  if (allowed.has(key)) return
  const option = BY_NAME.get(key)
  if (option !== undefined) {
    if (option.scope === 'cli') {
      throw src.fail(at, `${option.flag} is for the command line only: expected it not in the config file`)
    }
    if (option.scope === 'own') {
      throw src.fail(at, 'is set per listener: expected it in each of "listeners", not at the top level')
    }
    if (option.scope === 'global') {
      throw src.fail(at, 'applies to the whole process: expected it at the top level, not in a listener')
    }
    if (option.scope === 'run') {
      throw src.fail(at, 'is lila run\'s: expected it in a listener\'s "run" object, e.g. "run": { "command": ' +
        `"node server.js", ${JSON.stringify(option.name)}: ... }`)
    }
  }
  if (key === 'listeners') throw src.fail(at, 'listeners do not nest: expected it at the top level only')
  if (key === 'backends') {
    throw src.fail(at, 'belongs to a listener: expected it in each of "listeners", not at the top level')
  }
  const place = level === 'top'
    ? 'an option\'s long name (lila --help), "mode", "certificates" or "listeners"'
    : 'an option\'s long name (lila --help), "mode", "backends" or "certificates"'
  const hint = didYouMean(key, allowed) || `expected ${place}`
  throw src.fail(at, `unknown key ${JSON.stringify(key)}: ${hint}`)
}

module.exports = { parseConfigFile, readConfigFile }
