'use strict'

// Defaults, validation and normalisation of everything a user can say, in one place.
// The command line (and later the JSON file) comes in as raw strings; a plain, fully
// checked config object goes out. Every rejection is a UsageError with one line that
// names the bad value and what was expected.

const net = require('net')
const { parseArgs } = require('util')
const { UsageError } = require('./errors')
const { formatAddress, isHostName } = require('./address')
const { OPTIONS, BY_NAME, parseArgsOptions } = require('./options')
const { MODES, DEFAULT_MODE, modeName, HASH_MODES } = require('./balancers')

const MAX_TIMER_MS = 2147483647 // setTimeout's ceiling, about 24.8 days
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/
const UNIT_MS = { ms: 1, s: 1000, m: 60000, h: 3600000 }
const LOG_LEVELS = ['error', 'warn', 'info', 'debug']
const BACKEND_SYNTAX = 'host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]'
const CHECK_PATH = /^\/[\x21-\x7e]*$/ // an absolute path, printable ASCII, no spaces
const ACCESS_LOG_FORMATS = ['text', 'json']

const quote = value => JSON.stringify(String(value))

function parseDuration (text, flag, min = 0) {
  const match = DURATION.exec(text)
  if (!match) {
    throw new UsageError(`invalid duration ${quote(text)} for ${flag}: expected a number with a unit, e.g. 500ms, 2s or 1m`)
  }
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2]])
  if (ms < min) throw new UsageError(`invalid duration ${quote(text)} for ${flag}: expected at least ${min}ms`)
  if (ms > MAX_TIMER_MS) throw new UsageError(`invalid duration ${quote(text)} for ${flag}: expected at most 24d`)
  return ms
}

function parseInteger (text, flag, min, max, expected) {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new UsageError(`invalid value ${quote(text)} for ${flag}: expected ${expected}`)
  }
  return Number(text)
}

// One parser per option `type` in options.js.
const PARSERS = {
  port: (text, flag) => parseInteger(text, flag, 0, 65535, 'a port number from 0 to 65535'),
  count: (text, flag) => parseInteger(text, flag, 0, 100, 'a whole number from 0 to 100'),
  positive: (text, flag) => parseInteger(text, flag, 1, 1e9, 'a whole number of at least 1'),
  threshold: (text, flag) => parseInteger(text, flag, 1, 100, 'a whole number from 1 to 100'),
  duration: (text, flag) => parseDuration(text, flag, BY_NAME.get(flag.slice(2)).min || 0),
  check: (text, flag) => {
    if (text === 'tcp') return { type: 'tcp' }
    if (text === 'none') return null
    if (text.startsWith('http:') && CHECK_PATH.test(text.slice(5))) return { type: 'http', path: text.slice(5) }
    throw new UsageError(`invalid check ${quote(text)} for ${flag}: expected tcp, http:/path or none`)
  },
  dnsServer: (text, flag) => {
    // 10.0.0.2, 10.0.0.2:5353, ::1 or [::1]:5353
    const match = /^\[([^\]]+)\](?::(\d+))?$/.exec(text) || /^([\d.]+):(\d+)$/.exec(text) || [text, text]
    const [, host, port = '53'] = match
    if (!(text.startsWith('[') ? net.isIPv6(host) : net.isIP(host)) || Number(port) < 1 || Number(port) > 65535) {
      throw new UsageError(`invalid DNS server ${quote(text)} for ${flag}: expected an IP address and an optional :port, e.g. 10.0.0.2 or 127.0.0.1:5353`)
    }
    return formatAddress(host, Number(port))
  },
  factor: (text, flag) => {
    if (!/^\d+(\.\d+)?$/.test(text) || Number(text) < 1 || Number(text) > 100) {
      throw new UsageError(`invalid value ${quote(text)} for ${flag}: expected a number from 1 to 100, e.g. 1.25`)
    }
    return Number(text)
  },
  host: (text, flag) => {
    const host = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
    if (!net.isIP(host) && !isHostName(host)) {
      throw new UsageError(`invalid address ${quote(text)} for ${flag}: expected an IP address or host name`)
    }
    return host
  },
  protocol: (text, flag) => {
    if (text !== 'tcp' && text !== 'http') throw new UsageError(`invalid protocol ${quote(text)} for ${flag}: expected tcp or http`)
    return text
  },
  flag: value => value === true,
  accessLog: (text, flag) => {
    if (!ACCESS_LOG_FORMATS.includes(text)) throw new UsageError(`invalid access log format ${quote(text)} for ${flag}: expected text or json`)
    return text
  },
  token: (text, flag) => {
    if (!/^[\x21-\x7e]{8,256}$/.test(text)) {
      throw new UsageError(`invalid token for ${flag}: expected 8 to 256 printable ASCII characters without spaces`)
    }
    return text
  },
  logLevel: (text, flag) => {
    if (!LOG_LEVELS.includes(text)) {
      throw new UsageError(`invalid log level ${quote(text)} for ${flag}: expected one of ${LOG_LEVELS.join(', ')}`)
    }
    return text
  }
}

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
    } else if (key === 'max-conn' && /^\d+$/.test(value) && Number(value) >= 1) {
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

function defaults () {
  const values = {}
  for (const o of OPTIONS) if (!o.pending && o.type !== 'boolean') values[o.key] = o.default
  return values
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

// argv (without node and script) -> { command: 'help' | 'version' | 'run' | 'demo', config }
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

  for (const o of OPTIONS) {
    if (o.pending && values[o.name] !== undefined) {
      throw new UsageError(`option ${o.flag} is not supported yet`)
    }
  }

  const settings = defaults()
  for (const o of OPTIONS) {
    if (o.pending || o.type === 'boolean' || values[o.name] === undefined) continue
    settings[o.key] = PARSERS[o.type](values[o.name], o.flag)
  }
  for (const o of OPTIONS) {
    if (o.only && values[o.name] !== undefined && settings.protocol !== o.only) {
      throw new UsageError(`option ${o.flag} needs --protocol ${o.only}`)
    }
  }
  for (const name of ['status-host', 'status-token']) {
    if (values[name] !== undefined && settings.statusPort === null) throw new UsageError(`option --${name} needs --status-port`)
  }

  const words = positionals.slice()
  const command = words[0] === 'demo' ? 'demo' : 'run'
  if (command === 'demo') {
    words.shift()
    // The demo shows per-request balancing unless told otherwise.
    if (values.protocol === undefined) settings.protocol = 'http'
  }

  // The demo shows balancing best in turns, so its default mode is round-robin.
  let mode = command === 'demo' ? 'round-robin' : DEFAULT_MODE
  if (words.length && modeName(words[0])) {
    mode = modeName(words.shift())
  } else if (words.length && !words[0].includes(':')) {
    const names = MODES.flatMap(m => [m.name, ...m.aliases]).join(', ')
    throw new UsageError(`unknown mode ${quote(words[0])}: expected one of ${names}, or a backend host:port`)
  }

  const needs = MODES.find(m => m.name === mode).protocol
  if (needs && settings.protocol !== needs) throw new UsageError(`mode ${mode} needs --protocol ${needs}`)

  if (command === 'demo') {
    if (words.length) throw new UsageError(`unexpected argument ${quote(words[0])}: lila demo starts its own backends`)
    return { command, config: buildConfig(settings, mode, []) }
  }
  if (words.length === 0) throw new UsageError(`no backend given: expected lila [mode] ${BACKEND_SYNTAX}...`)
  return { command, config: buildConfig(settings, mode, words.map(parseBackend)) }
}

function buildConfig (settings, mode, backends) {
  const seen = new Set()
  for (const b of backends) {
    const address = formatAddress(b.host, b.port)
    if (seen.has(address)) throw new UsageError(`duplicate backend ${quote(address)}: expected each backend once (use weight=N to send it more)`)
    seen.add(address)
  }
  if (settings.hashBalanceFactor !== null && !HASH_MODES.includes(mode)) {
    throw new UsageError(`option --hash-balance-factor does not apply to mode ${quote(mode)}: expected a hash mode (${HASH_MODES.join(', ')})`)
  }
  return {
    logLevel: settings.logLevel,
    shutdownTimeout: settings.shutdownTimeout,
    accessLog: settings.accessLog, // null (off), 'text' or 'json'
    status: settings.statusPort === null ? null : { host: settings.statusHost, port: settings.statusPort, token: settings.statusToken },
    dashboard: settings.dashboard,
    listeners: [{
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
      checkInterval: settings.checkInterval,
      // A probe gives up after this long: never longer than the interval (so probes
      // cannot pile up) nor than a real connection would wait.
      checkTimeout: Math.min(settings.checkInterval, settings.connectTimeout),
      rise: settings.rise,
      fall: settings.fall,
      queueTimeout: settings.queueTimeout,
      resolveInterval: settings.resolveInterval,
      dnsServer: settings.dnsServer,
      hashBalanceFactor: settings.hashBalanceFactor
    }]
  }
}

module.exports = {
  parseCommandLine,
  parseBackend,
  parseDuration,
  LOG_LEVELS,
  ACCESS_LOG_FORMATS,
  BACKEND_SYNTAX,
  OPTIONS,
  BY_NAME
}
