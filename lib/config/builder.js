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
const { PARSERS, NUMERIC, parseBackend, MODE_NAMES, MODE_WORDS, quote } = require('./parsers')
const { listenerFrom, configFrom } = require('./defaults')
const { didYouMean } = require('./suggest')
const { MODES, DEFAULT_MODE, modeName, HASH_MODES } = require('../upstream/balancers')

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
  if (option.type === 'flag') {
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

// The one place a listener is put together and checked, whichever source it came from.
//   values        Map option name -> { value, at } (what was given; the rest defaults)
//   mode          { value, at } or undefined (the default mode)
//   backends      [{ value, at }]: backend strings
//   certificates  [{ cert, key, certAt, keyAt }] from the file (beyond --tls-cert/--tls-key)
function buildListener ({ values, mode: modeEntry, backends: backendEntries, certificates = [] }, src) {
  const settings = {}
  for (const o of LISTENER_OPTIONS) {
    const entry = values.get(o.name)
    settings[o.key] = entry === undefined ? o.default : parseValue(o, entry, src)
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

  let mode = DEFAULT_MODE
  if (modeEntry !== undefined) {
    if (src.json && typeof modeEntry.value !== 'string') {
      throw src.fail(modeEntry.at, `expected a mode name, got ${shown(modeEntry.value)}`)
    }
    mode = modeName(modeEntry.value)
    if (mode === null) {
      const hint = didYouMean(modeEntry.value, MODE_WORDS) || `expected one of ${MODE_NAMES}`
      throw src.fail(modeEntry.at, `unknown mode ${quote(modeEntry.value)}: ${hint}`)
    }
  }
  const needs = MODES.find(m => m.name === mode).protocol
  if (needs && kind !== needs) {
    throw src.fail(modeEntry.at, `mode ${mode} needs ${src.setting('protocol', needs)}`)
  }
  if (settings.hashBalanceFactor !== null && !HASH_MODES.includes(mode)) {
    const subject = src.about(BY_NAME.get('hash-balance-factor'))
    const message = `${subject}does not apply to mode ${quote(mode)}: expected a hash mode (${HASH_MODES.join(', ')})`
    throw src.fail(at('hash-balance-factor'), message)
  }

  const backends = []
  const seen = new Set()
  for (const { value, at } of backendEntries) {
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

  // A Unix socket has no port; lila speaks TLS to TCP backends only.
  if (unixPath(settings.host) !== null && given('port')) {
    const subject = src.about(BY_NAME.get('port'))
    throw src.fail(at('port'), `${subject}does not apply to a Unix socket (${src.setting('host', settings.host)})`)
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
  pair('backend-tls-ca', 'backend-tls', true)
  pair('backend-tls-insecure', 'backend-tls', true)
  if (given('backend-tls-ca') && given('backend-tls-insecure')) {
    const subject = src.about(BY_NAME.get('backend-tls-insecure'))
    const message = `${subject}contradicts ${src.setting('backend-tls-ca')}: expected one of them`
    throw src.fail(at('backend-tls-insecure'), message)
  }

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
  const tls = tlsCertificates.length === 0 ? null : { certificates: tlsCertificates }
  return listenerFrom(settings, { mode, backends, tls, backendTls })
}

// The process-wide settings, from { name -> { value, at } }.
function buildGlobals (values, src) {
  const globals = {}
  for (const o of GLOBAL_OPTIONS) {
    const entry = values.get(o.name)
    globals[o.key] = entry === undefined ? o.default : parseValue(o, entry, src)
  }
  for (const name of ['status-host', 'status-token']) {
    const entry = values.get(name)
    if (entry !== undefined && globals.statusPort === null) {
      throw src.fail(entry.at, `${src.about(BY_NAME.get(name))}needs ${src.setting('status-port')}`)
    }
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
  return configFrom(globals, listeners)
}

function isWildcard (host) {
  return host === null || host === '0.0.0.0' || host === '::'
}

module.exports = {
  buildListener,
  buildGlobals,
  buildConfig,
  jsonSource,
  parseValue
}
