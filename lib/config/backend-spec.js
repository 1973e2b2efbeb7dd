'use strict'

// What is written about a backend (pure): a backend spec (host:port, a port range,
// unix:/path, an SRV name, and its settings), and the specs that start with one:
// --fault's and --mirror's. Text in, a checked value or a one-line UsageError out.

const net = require('net')
const { UsageError } = require('../errors')
const { isHostName, unixPath, specAddress } = require('../address')
const { quote, forFlag, parseDuration, socketPathProblem, isPort, DURATION } = require('./values')

const BACKEND_SYNTAX = 'host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]'
// An SRV name: _service._proto.name (RFC 2782).
const SRV_NAME = /^_[A-Za-z0-9-]{1,62}\._[A-Za-z0-9-]{1,62}\.[^:]+$/
// A port range (host:3000-3009) is watched port by port: its size bounds the probing.
const MAX_RANGE_PORTS = 1024
// A fault with no for=DUR ends by itself after this long: one forgotten on a shared
// machine does not outlive a coffee break (for=0s: until cleared).
const FAULT_FOR_MS = 60000
const FAULT_SETTINGS = 'delay=DUR, error=CODE, reset=1, rate=R or for=DUR'
const FAULT_SYNTAX = 'host:port,SETTING[,SETTING...]'
const MIRROR_SYNTAX = 'host:port[,percent=N] or unix:/path[,percent=N]'

// "3000-3009" -> { first: 3000, last: 3009 }: every port of it, watched (a single port
// is a range of one). `invalid(expected)` makes the error about the whole backend.
function parsePortRange (text, invalid) {
  const [first, last, ...rest] = text.split('-')
  if (rest.length > 0 || !isPort(first) || !isPort(last)) {
    throw invalid('a port range FIRST-LAST of ports from 1 to 65535 after the ":", e.g. :3000-3009')
  }
  const range = { first: Number(first), last: Number(last) }
  if (range.first > range.last) throw invalid(`a port range from low to high, e.g. ${last}-${first}`)
  const size = range.last - range.first + 1
  if (size > MAX_RANGE_PORTS) {
    throw invalid(`a port range of at most ${MAX_RANGE_PORTS} ports (${text} has ${size})`)
  }
  return range
}

// Is this word on the command line meant as a backend rather than a mode?
function looksLikeBackend (word) {
  return word.includes(':') || SRV_NAME.test(word)
}

// "host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]"
//   -> { host, port, weight, maxConn, slowStart, backup }
// "host:3000-3009[,...]"           -> the same with port null and `range` ({ first, last }:
//                                     the ports listening are the backends, port-range.js)
// "unix:/path/app.sock[,...]"      -> the same with host and port null and `path`
// "_service._proto.name[,...]"     -> the same with host and port null and `srv` (the
//                                     name; its records give targets, ports and weights)
function parseBackend (text) {
  const invalid = expected => new UsageError(`invalid backend ${quote(text)}: expected ${expected}`)
  const [address, ...settings] = text.split(',')
  const backend = { host: null, port: null, weight: 1, maxConn: null, slowStart: 0, backup: false }
  if (unixPath(address) !== null) {
    const problem = socketPathProblem(unixPath(address), 'app.sock')
    if (problem !== null) throw invalid(problem)
    backend.path = unixPath(address)
  } else if (SRV_NAME.test(address)) {
    if (!isHostName(address)) throw invalid('an SRV name _service._proto.name, e.g. _http._tcp.example.com')
    backend.srv = address.toLowerCase().replace(/\.$/, '')
  } else if (address.includes(':') && SRV_NAME.test(address.slice(0, address.indexOf(':')))) {
    throw invalid('an SRV name without a port: its records give each target\'s port')
  } else {
    const match = /^\[([^\]]*)\]:([^:]*)$/.exec(address) || /^([^:[\]]*):([^:]*)$/.exec(address)
    if (!match) throw invalid(BACKEND_SYNTAX)
    const host = match[1] === '' ? '127.0.0.1' : match[1]
    const bracketed = address.startsWith('[')
    if (bracketed ? !net.isIPv6(host) : !isHostName(host)) {
      throw invalid(bracketed ? 'an IPv6 address in [brackets]' : 'a host name or IPv4 address before the ":"')
    }
    backend.host = host
    if (match[2].includes('-')) {
      backend.range = parsePortRange(match[2], invalid)
    } else {
      if (!isPort(match[2])) throw invalid('a port number from 1 to 65535 after the ":"')
      backend.port = Number(match[2])
    }
  }
  for (const setting of settings) {
    const [key, value] = setting.split('=')
    if (key === 'weight' && backend.srv !== undefined) {
      throw new UsageError(`invalid backend setting ${quote(setting)} in ${quote(text)}: ` +
        'an SRV backend\'s weights come from its records; expected max-conn=N, slow-start=DUR or backup')
    }
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
      throw new UsageError(`invalid backend setting ${quote(setting)} in ${quote(text)}: ` +
        'expected weight=N, max-conn=N, slow-start=DUR or backup')
    }
  }
  return backend
}

// A fault's settings (upstream/fault.js) from [key, value] pairs: the admin API's query
// (?error=503&for=10s) and --fault's (ADDR,error=503,for=10s) alike. `subject` names
// what they came from in errors. -> { delay, status, reset, rate, duration } (ms; rate
// 0 to 1; duration 0: until cleared).
function parseFaultSettings (pairs, subject) {
  const fault = { delay: 0, status: 0, reset: false, rate: 1, duration: FAULT_FOR_MS }
  const seen = new Set()
  const invalid = (setting, expected) =>
    new UsageError(`invalid fault setting ${quote(setting)} in ${subject}: expected ${expected}`)
  for (const [key, value = ''] of pairs) {
    const setting = value === '' ? key : `${key}=${value}`
    if (seen.has(key)) throw new UsageError(`fault setting ${quote(key)} given twice in ${subject}: expected it once`)
    seen.add(key)
    if (key === 'delay') {
      if (!DURATION.test(value)) throw invalid(setting, 'delay=DUR with a unit, e.g. 2s or 500ms')
      fault.delay = parseDuration(value, null)
    } else if (key === 'error') {
      if (!/^[45]\d\d$/.test(value)) throw invalid(setting, 'error=CODE with CODE from 400 to 599, e.g. 503')
      fault.status = Number(value)
    } else if (key === 'reset') {
      if (value !== '' && value !== '1' && value !== 'true') throw invalid(setting, 'reset=1')
      fault.reset = true
    } else if (key === 'rate') {
      const match = /^(\d+(?:\.\d+)?)(%?)$/.exec(value)
      const rate = match === null ? NaN : Number(match[1]) / (match[2] === '%' ? 100 : 1)
      if (!(rate >= 0 && rate <= 1)) throw invalid(setting, 'rate=R from 0 to 1, or a percentage, e.g. 0.5 or 50%')
      fault.rate = rate
    } else if (key === 'for') {
      if (!DURATION.test(value)) throw invalid(setting, 'for=DUR with a unit, e.g. 30s (0s: until cleared)')
      fault.duration = parseDuration(value, null)
    } else {
      throw invalid(setting, FAULT_SETTINGS)
    }
  }
  if (fault.delay === 0 && fault.status === 0 && !fault.reset) {
    throw new UsageError(`no fault in ${subject}: expected delay=DUR, error=CODE or reset=1`)
  }
  if (fault.status !== 0 && fault.reset) {
    throw new UsageError(`error=${fault.status} and reset=1 in ${subject}: expected one of them ` +
      '(a request is answered or reset)')
  }
  return fault
}

// "ADDR,SETTING,..." (--fault, --mirror) -> { spec: parseBackend(ADDR), settings: the
// rest, subject: the text for messages }; an ADDR that is no backend is named as a bad
// `what`, expected `syntax`.
function backendThenSettings (text, flag, what, syntax) {
  const [address, ...settings] = String(text).split(',')
  const subject = `${quote(text)}${forFlag(flag)}`
  try {
    return { spec: parseBackend(address), settings, subject }
  } catch {
    throw new UsageError(`invalid ${what} ${subject}: expected ${syntax}`)
  }
}

// --fault "host:port,error=503,for=30s" -> { address, ...parseFaultSettings }: the
// address as /status.json shows it (":8080" is 127.0.0.1:8080).
function parseFault (text, flag) {
  const expected = `${FAULT_SYNTAX}, the backend's address first`
  const { spec, settings, subject } = backendThenSettings(text, flag, 'fault', expected)
  if (spec.srv !== undefined) {
    throw new UsageError(`invalid fault ${subject}: expected a backend's host:port first, not an SRV name`)
  }
  if (settings.length === 0) {
    throw new UsageError(`no fault in ${subject}: expected ${FAULT_SYNTAX}, e.g. :8081,error=503`)
  }
  const pairs = settings.map(setting => {
    const eq = setting.indexOf('=')
    return eq === -1 ? [setting, undefined] : [setting.slice(0, eq), setting.slice(eq + 1)]
  })
  return { address: specAddress(spec), ...parseFaultSettings(pairs, subject) }
}

// --mirror "127.0.0.1:9000,percent=10" -> { address, host, port, path, percent }: one
// backend (host:port, a name, or unix:/path) sent a copy of every request, or of
// `percent` % of them (proxy/http/mirror.js); `address` as /status.json shows it.
function parseMirror (text, flag) {
  const { spec, settings, subject } = backendThenSettings(text, flag, 'mirror', MIRROR_SYNTAX)
  if (spec.srv !== undefined || spec.range !== undefined) {
    throw new UsageError(`invalid mirror ${subject}: expected one backend, host:port or unix:/path, ` +
      'not an SRV name or a port range')
  }
  let percent = 100
  for (const setting of settings) {
    const match = /^percent=(\d+(?:\.\d+)?)%?$/.exec(setting)
    if (match === null || Number(match[1]) <= 0 || Number(match[1]) > 100) {
      throw new UsageError(`invalid mirror setting ${quote(setting)} in ${subject}: ` +
        'expected percent=N with N above 0 and at most 100, e.g. percent=10')
    }
    percent = Number(match[1])
  }
  return { address: specAddress(spec), host: spec.host, port: spec.port, path: spec.path ?? null, percent }
}

module.exports = {
  parseBackend, looksLikeBackend, parseFault, parseFaultSettings, parseMirror, BACKEND_SYNTAX
}
