'use strict'

// Defaults, validation and normalisation of everything a user can say, in one place.
// Two sources: the command line (strings from argv, here) and the JSON config file
// (config-file.js). Both go through the same value parsers and the same listener
// builder, buildListener(); what comes out is a plain, fully checked config:
//   { logLevel, shutdownTimeout, workers, listeners: [{ name, port, protocol, mode, backends, ... }] }
// Every rejection is a UsageError with one line that names the bad value and what was
// expected; a value from the file is named by its JSON path.

const net = require('net')
const { parseArgs } = require('util')
const { UsageError } = require('../errors')
const { formatAddress, isHostName } = require('../address')
const { OPTIONS, BY_NAME, parseArgsOptions } = require('./options')
const { MODES, DEFAULT_MODE, modeName, HASH_MODES } = require('../upstream/balancers')

const MAX_TIMER_MS = 2147483647 // setTimeout's ceiling, about 24.8 days
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/
const UNIT_MS = { ms: 1, s: 1000, m: 60000, h: 3600000 }
const LOG_LEVELS = ['error', 'warn', 'info', 'debug']
const BACKEND_SYNTAX = 'host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]'
const CHECK_PATH = /^\/[\x21-\x7e]*$/ // an absolute path, printable ASCII, no spaces
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/
const MAX_WORKERS = 256
const ACCESS_LOG_FORMATS = ['text', 'json']
const MODE_NAMES = MODES.flatMap(m => [m.name, ...m.aliases]).join(', ') // for "expected one of"

// The options of a listener (everything but the process-wide and command-line ones).
const LISTENER_OPTIONS = OPTIONS.filter(o => o.scope === 'listener' || o.scope === 'own')
const GLOBAL_OPTIONS = OPTIONS.filter(o => o.scope === 'global')

const quote = value => JSON.stringify(String(value))
// Parsers name the flag a value came from; a value from the JSON file is named by its
// path instead (flag null), which the caller puts in front of the message.
const forFlag = flag => flag ? ` for ${flag}` : ''

function parseDuration (text, flag, min = 0) {
  const match = DURATION.exec(text)
  if (!match) {
    throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: expected a number with a unit, e.g. 500ms, 2s or 1m`)
  }
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2]])
  if (ms < min) throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: expected at least ${min}ms`)
  if (ms > MAX_TIMER_MS) throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: expected at most 24d`)
  return ms
}

// The other way: 30000 -> "30s", 1500 -> "1500ms" (for --help and the reload log).
function formatDuration (ms) {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

function parseInteger (text, flag, min, max, expected) {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new UsageError(`invalid value ${quote(text)}${forFlag(flag)}: expected ${expected}`)
  }
  return Number(text)
}

// host, IPv4 or [IPv6], with an optional :port: what a Host header may say.
function isHostHeader (text) {
  const match = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(text) || /^([^:[\]]+)(?::(\d{1,5}))?$/.exec(text)
  if (!match || (match[2] !== undefined && Number(match[2]) > 65535)) return false
  return text.startsWith('[') ? net.isIPv6(match[1]) : isHostName(match[1])
}

// One parser per option `type` in options.js: (text, flag, option) -> value.
const PARSERS = {
  port: (text, flag) => parseInteger(text, flag, 0, 65535, 'a port number from 0 to 65535'),
  count: (text, flag) => parseInteger(text, flag, 0, 100, 'a whole number from 0 to 100'),
  positive: (text, flag) => parseInteger(text, flag, 1, 1e9, 'a whole number of at least 1'),
  threshold: (text, flag) => parseInteger(text, flag, 1, 100, 'a whole number from 1 to 100'),
  duration: (text, flag, option) => parseDuration(text, flag, option.min || 0),
  check: (text, flag) => {
    if (text === 'tcp') return { type: 'tcp' }
    if (text === 'none') return null
    if (text.startsWith('http:') && CHECK_PATH.test(text.slice(5))) return { type: 'http', path: text.slice(5) }
    throw new UsageError(`invalid check ${quote(text)}${forFlag(flag)}: expected tcp, http:/path or none`)
  },
  hostHeader: (text, flag) => {
    if (!isHostHeader(text)) throw new UsageError(`invalid host ${quote(text)}${forFlag(flag)}: expected a host name or address, with an optional :port`)
    return text
  },
  dnsServer: (text, flag) => {
    // 10.0.0.2, 10.0.0.2:5353, ::1 or [::1]:5353
    const match = /^\[([^\]]+)\](?::(\d+))?$/.exec(text) || /^([\d.]+):(\d+)$/.exec(text) || [text, text]
    const [, host, port = '53'] = match
    if (!(text.startsWith('[') ? net.isIPv6(host) : net.isIP(host)) || Number(port) < 1 || Number(port) > 65535) {
      throw new UsageError(`invalid DNS server ${quote(text)}${forFlag(flag)}: expected an IP address and an optional :port, e.g. 10.0.0.2 or 127.0.0.1:5353`)
    }
    return formatAddress(host, Number(port))
  },
  factor: (text, flag) => {
    if (!/^\d+(\.\d+)?$/.test(text) || Number(text) < 1 || Number(text) > 100) {
      throw new UsageError(`invalid value ${quote(text)}${forFlag(flag)}: expected a number from 1 to 100, e.g. 1.25`)
    }
    return Number(text)
  },
  host: (text, flag) => {
    const host = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
    if (!net.isIP(host) && !isHostName(host)) {
      throw new UsageError(`invalid address ${quote(text)}${forFlag(flag)}: expected an IP address or host name`)
    }
    return host
  },
  protocol: (text, flag) => {
    if (text !== 'tcp' && text !== 'http') throw new UsageError(`invalid protocol ${quote(text)}${forFlag(flag)}: expected tcp or http`)
    return text
  },
  name: (text, flag) => {
    if (!NAME.test(text)) throw new UsageError(`invalid name ${quote(text)}${forFlag(flag)}: expected up to 64 letters, digits, ".", "_", ":" or "-"`)
    return text
  },
  file: (text, flag) => {
    if (text === '' || text.includes('\0')) throw new UsageError(`invalid file name ${quote(text)}${forFlag(flag)}: expected a path`)
    return text
  },
  proxyProtocol: (text, flag) => {
    if (text !== 'v1' && text !== 'v2') throw new UsageError(`invalid PROXY protocol version ${quote(text)}${forFlag(flag)}: expected v1 or v2`)
    return text
  },
  accessLog: (text, flag) => {
    if (!ACCESS_LOG_FORMATS.includes(text)) throw new UsageError(`invalid access log format ${quote(text)}${forFlag(flag)}: expected text or json`)
    return text
  },
  token: (text, flag) => {
    if (!/^[\x21-\x7e]{8,256}$/.test(text)) {
      throw new UsageError(`invalid token${forFlag(flag)}: expected 8 to 256 printable ASCII characters without spaces`)
    }
    return text
  },
  workers: (text, flag) => {
    if (text === 'auto') return 'auto'
    return parseInteger(text, flag, 1, MAX_WORKERS, `a whole number from 1 to ${MAX_WORKERS}, or auto`)
  },
  flag: value => value === true,
  logLevel: (text, flag) => {
    if (!LOG_LEVELS.includes(text)) {
      throw new UsageError(`invalid log level ${quote(text)}${forFlag(flag)}: expected one of ${LOG_LEVELS.join(', ')}`)
    }
    return text
  }
}

// Option types whose JSON value may be a number as well as a string.
const NUMERIC = new Set(['port', 'count', 'positive', 'threshold', 'factor', 'workers'])

// "host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]"
//   -> { host, port, weight, maxConn, slowStart, backup }
function parseBackend (text) {
  const invalid = expected => new UsageError(`invalid backend ${quote(text)}: expected ${expected}`)
  const [address, ...settings] = text.split(',')
  const match = /^\[([^\]]*)\]:([^:]*)$/.exec(address) || /^([^:[\]]*):([^:]*)$/.exec(address)
  if (!match) throw invalid(BACKEND_SYNTAX)
  const host = match[1] === '' ? '127.0.0.1' : match[1]
  const bracketed = address.startsWith('[')
  if (bracketed ? !net.isIPv6(host) : !isHostName(host)) {
    throw invalid(bracketed ? 'an IPv6 address in [brackets]' : 'a host name or IPv4 address before the ":"')
  }
  if (!/^\d+$/.test(match[2]) || Number(match[2]) < 1 || Number(match[2]) > 65535) {
    throw invalid('a port number from 1 to 65535 after the ":"')
  }
  const backend = { host, port: Number(match[2]), weight: 1, maxConn: null, slowStart: 0, backup: false }
  for (const setting of settings) {
    const [key, value] = setting.split('=')
    if (key === 'backup' && value === undefined) {
      backend.backup = true
    } else if (key === 'weight' && /^\d+$/.test(value) && Number(value) <= 1000) {
      backend.weight = Number(value)
    } else if (key === 'max-conn' && /^\d+$/.test(value) && Number(value) >= 1 && Number(value) <= 1e9) {
      backend.maxConn = Number(value)
    } else if (key === 'slow-start' && value !== undefined && DURATION.test(value)) {
      backend.slowStart = parseDuration(value, 'slow-start')
    } else if (key === 'weight' || key === 'max-conn' || key === 'slow-start') {
      throw invalid({
        weight: 'weight=N with N from 0 to 1000',
        'max-conn': 'max-conn=N with N of at least 1',
        'slow-start': 'slow-start=DUR with a unit, e.g. 30s'
      }[key])
    } else {
      throw new UsageError(`invalid backend setting ${quote(setting)} in ${quote(text)}: expected weight=N, max-conn=N, slow-start=DUR or backup`)
    }
  }
  return backend
}

// Where values come from, for the wording of errors. Each value arrives as
// { value, at }: `at` is null on the command line (a value is named by its flag) and the
// JSON path in the file ("listeners[1].connect-timeout"), which leads the message.
const ARGV = {
  json: false,
  fail: (at, message) => new UsageError(message),
  about: option => `option ${option.flag} `, // the subject of a message about an option
  setting: (name, value) => value === undefined || value === true ? `--${name}` : `--${name} ${value}`
}

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
    const expected = option.type === 'duration' ? 'a duration with a unit, e.g. "3s"' : NUMERIC.has(option.type) ? 'a number' : 'a string'
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

  for (const o of LISTENER_OPTIONS) {
    if (o.only && given(o.name) && settings.protocol !== o.only) {
      throw src.fail(at(o.name), `${src.about(o)}needs ${src.setting('protocol', o.only)}`)
    }
  }

  let mode = DEFAULT_MODE
  if (modeEntry !== undefined) {
    if (src.json && typeof modeEntry.value !== 'string') throw src.fail(modeEntry.at, `expected a mode name, got ${shown(modeEntry.value)}`)
    mode = modeName(modeEntry.value)
    if (mode === null) {
      throw src.fail(modeEntry.at, `unknown mode ${quote(modeEntry.value)}: expected one of ${MODE_NAMES}`)
    }
  }
  const needs = MODES.find(m => m.name === mode).protocol
  if (needs && settings.protocol !== needs) {
    throw src.fail(modeEntry.at, `mode ${mode} needs ${src.setting('protocol', needs)}`)
  }
  if (settings.hashBalanceFactor !== null && !HASH_MODES.includes(mode)) {
    throw src.fail(at('hash-balance-factor'), `${src.about(BY_NAME.get('hash-balance-factor'))}does not apply to mode ${quote(mode)}: expected a hash mode (${HASH_MODES.join(', ')})`)
  }

  const backends = []
  const seen = new Set()
  for (const { value, at } of backendEntries) {
    if (typeof value !== 'string') throw src.fail(at, `expected a backend such as "10.0.0.1:80,weight=2", got ${shown(value)}`)
    let backend
    try {
      backend = parseBackend(value)
    } catch (err) {
      throw src.fail(at, err.message)
    }
    const address = formatAddress(backend.host, backend.port)
    if (seen.has(address)) throw src.fail(at, `duplicate backend ${quote(address)}: expected each backend once (use weight=N to send it more)`)
    seen.add(address)
    backends.push(backend)
  }

  // Options that only make sense together.
  const pair = (name, other, otherValue) => {
    if (given(name) && !given(other)) throw src.fail(at(name), `${src.about(BY_NAME.get(name))}needs ${src.setting(other, otherValue)}`)
  }
  pair('tls-cert', 'tls-key')
  pair('tls-key', 'tls-cert')
  pair('backend-tls-ca', 'backend-tls', true)
  pair('backend-tls-insecure', 'backend-tls', true)
  if (given('backend-tls-ca') && given('backend-tls-insecure')) {
    throw src.fail(at('backend-tls-insecure'), `${src.about(BY_NAME.get('backend-tls-insecure'))}contradicts ${src.setting('backend-tls-ca')}: expected one of them`)
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

  return {
    name: settings.name === null ? defaultName(settings.protocol, settings.port) : settings.name,
    port: settings.port,
    host: settings.host,
    protocol: settings.protocol,
    mode,
    backends,
    connectTimeout: settings.connectTimeout,
    idleTimeout: settings.idleTimeout,
    retries: settings.retries,
    maxConn: settings.maxConn,
    timeout: settings.timeout,
    headerTimeout: settings.headerTimeout,
    forwarded: settings.forwarded,
    check: settings.check,
    checkHost: settings.checkHost,
    checkInterval: settings.checkInterval,
    // A probe gives up after this long: never longer than the interval (so probes
    // cannot pile up) nor than a real connection would wait.
    checkTimeout: Math.min(settings.checkInterval, settings.connectTimeout),
    rise: settings.rise,
    fall: settings.fall,
    queueTimeout: settings.queueTimeout,
    resolveInterval: settings.resolveInterval,
    dnsServer: settings.dnsServer,
    hashBalanceFactor: settings.hashBalanceFactor,
    // TLS termination: the first certificate is the default, the others are chosen by
    // the name the client asks for (SNI). Paths; tls.js reads them.
    tls: tlsCertificates.length === 0 ? null : { certificates: tlsCertificates },
    backendTls: settings.backendTls
      ? { ca: settings.backendTlsCa, caAt: src.json && settings.backendTlsCa !== null ? `${src.file}: ${at('backend-tls-ca')}` : '--backend-tls-ca', insecure: settings.backendTlsInsecure }
      : null,
    proxyProtocol: settings.proxyProtocol,
    acceptProxy: settings.acceptProxy
  }
}

// A listener's name unless given one: what it is and where, e.g. "http:8080".
function defaultName (protocol, port) {
  return `${protocol}:${port}`
}

// Log lines about a listener carry its name when it was given one, or when there are
// several listeners (`count`) to tell apart.
function logsName (listener, count) {
  return count > 1 || listener.name !== defaultName(listener.protocol, listener.port)
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
    if (entry !== undefined && globals.statusPort === null) throw src.fail(entry.at, `${src.about(BY_NAME.get(name))}needs ${src.setting('status-port')}`)
  }
  return globals
}

// The whole config; listeners must differ in name and address. `listenerAt(i)` names
// listener i in errors.
function buildConfig (globals, listeners, src, listenerAt = () => null) {
  for (let i = 0; i < listeners.length; i++) {
    for (let j = 0; j < i; j++) {
      const [a, b] = [listeners[j], listeners[i]]
      if (a.port !== 0 && a.port === b.port && (a.host === b.host || isWildcard(a.host) || isWildcard(b.host))) {
        throw src.fail(listenerAt(i), `port ${b.port} is taken by listener ${quote(a.name)}: expected each listener on its own port`)
      }
      if (a.name === b.name) {
        throw src.fail(listenerAt(i), `duplicate listener name ${quote(b.name)}: expected each listener to have its own (set "name")`)
      }
    }
  }
  return {
    logLevel: globals.logLevel,
    shutdownTimeout: globals.shutdownTimeout,
    workers: globals.workers,
    accessLog: globals.accessLog, // null (off), 'text' or 'json'
    status: globals.statusPort === null ? null : { host: globals.statusHost, port: globals.statusPort, token: globals.statusToken },
    dashboard: globals.dashboard,
    listeners
  }
}

function isWildcard (host) {
  return host === null || host === '0.0.0.0' || host === '::'
}

// parseArgs' own messages are long and mention its internals; say it our way.
function rethrowParseError (err) {
  const option = /'(-[^' ]+)/.exec(err.message)
  const name = option ? option[1] : 'option'
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      throw new UsageError(`unknown option ${quote(name)}`)
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const flag = (/--[a-z-]+/.exec(err.message) || [name])[0]
      if (/does not take an argument/.test(err.message)) throw new UsageError(`option ${flag} takes no value`)
      if (/ambiguous/.test(err.message)) throw new UsageError(`missing value for ${flag} (a value starting with "-" is written ${flag}=VALUE)`)
      throw new UsageError(`missing value for ${flag}`)
    }
    default:
      throw new UsageError(err.message.split('\n')[0])
  }
}

// `--access-log` takes an optional value, which parseArgs cannot express: a bare
// `--access-log` becomes `--access-log=text`, and `--access-log json` (or any word that
// is neither an option, a mode nor a backend, so that a typo is named as a bad format)
// `--access-log=json`.
function normaliseArgv (argv) {
  const out = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--') {
      out.push(...argv.slice(i))
      break
    }
    if (arg !== '--access-log') {
      out.push(arg)
      continue
    }
    const next = argv[i + 1]
    const isValue = next !== undefined && !next.startsWith('-') && !next.includes(':') && !modeName(next) && next !== 'demo'
    out.push(`--access-log=${isValue ? next : 'text'}`)
    if (isValue) i++
  }
  return out
}

// argv (without node and script) ->
//   { command: 'help' | 'version' }
//   { command: 'run' | 'demo', config }
//   { command: 'run', configFile, logLevel }   (--config: cli.js reads the file; a
//                                               --log-level given beside it wins)
function parseCommandLine (argv) {
  let parsed
  try {
    parsed = parseArgs({ args: normaliseArgv(argv), options: parseArgsOptions(), allowPositionals: true, strict: true })
  } catch (err) {
    rethrowParseError(err)
  }
  const { values, positionals } = parsed
  if (values.help) return { command: 'help' }
  if (values.version) return { command: 'version' }

  if (values.config !== undefined) return configFileCommand(values, positionals)

  const entries = new Map()
  for (const o of OPTIONS) {
    if (o.scope !== 'cli' && values[o.name] !== undefined) entries.set(o.name, { value: values[o.name], at: null })
  }

  const words = positionals.slice()
  const command = words[0] === 'demo' ? 'demo' : 'run'
  if (command === 'demo') {
    words.shift()
    // The demo shows per-request balancing unless told otherwise.
    if (values.protocol === undefined) entries.set('protocol', { value: 'http', at: null })
  }

  // The demo shows balancing best in turns, so its default mode is round-robin.
  let mode = command === 'demo' ? { value: 'round-robin', at: null } : undefined
  if (words.length && modeName(words[0])) {
    mode = { value: words.shift(), at: null }
  } else if (words.length && !words[0].includes(':')) {
    throw new UsageError(`unknown mode ${quote(words[0])}: expected one of ${MODE_NAMES}, or a backend host:port`)
  }

  const globals = buildGlobals(entries, ARGV)
  if (command === 'demo') {
    if (words.length) throw new UsageError(`unexpected argument ${quote(words[0])}: lila demo starts its own backends`)
    if (values.workers !== undefined) throw new UsageError('option --workers does not apply to lila demo: it runs in one process')
    return { command, config: buildConfig(globals, [buildListener({ values: entries, mode, backends: [] }, ARGV)], ARGV) }
  }
  // Options are checked before backends are missed: "--port x" says what is wrong with it.
  const listener = buildListener({ values: entries, mode, backends: words.map(value => ({ value, at: null })) }, ARGV)
  if (words.length === 0) throw new UsageError(`no backend given: expected lila [mode] ${BACKEND_SYNTAX}...`)
  return { command, config: buildConfig(globals, [listener], ARGV) }
}

// --config FILE: everything else is in the file, but for --log-level.
function configFileCommand (values, positionals) {
  const file = PARSERS.file(values.config, '--config')
  if (positionals.length > 0) {
    throw new UsageError(`unexpected argument ${quote(positionals[0])}: with --config, modes and backends are in the config file`)
  }
  for (const o of OPTIONS) {
    if (values[o.name] !== undefined && o.name !== 'config' && o.name !== 'log-level') {
      throw new UsageError(`option ${o.flag} cannot be combined with --config: put it in the config file (only --log-level may be given beside it)`)
    }
  }
  const logLevel = values['log-level'] === undefined ? null : PARSERS.logLevel(values['log-level'], '--log-level')
  return { command: 'run', configFile: file, logLevel }
}

module.exports = {
  parseCommandLine,
  parseBackend,
  formatDuration,
  buildListener,
  buildGlobals,
  buildConfig,
  jsonSource,
  defaultName,
  logsName,
  LISTENER_OPTIONS,
  OPTIONS,
  BY_NAME
}
