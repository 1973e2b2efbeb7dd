'use strict'

// Value parsers: one text (from argv, or a JSON value made text) in, one checked value
// out, or a UsageError with one line that names the bad value and what was expected.
// One per option type (PARSERS): the scalars here; header fields and names in
// header-values.js, networks (CIDR) in network-values.js; the grammars of backends,
// faults and mirrors are in backend-spec.js, routes' in route-spec.js. The config side
// only (argv.js, builder.js): the running balancer takes values already parsed.

const net = require('net')
const os = require('os')
const { UsageError } = require('../errors')
const { formatAddress, isHostName, unixPath } = require('../address')
const { MODES, modeWord } = require('../upstream/balancers')
const { quote, forFlag, parseDuration, parseInteger, socketPathProblem, range } = require('./values')
const { parseFault, parseMirror } = require('./backend-spec')
const { parseRouteOption } = require('./route-spec')
const { parseFleetUrl } = require('./fleet-url')
const { EDGE_PARSERS } = require('./edge-values')
const { HEADER_PARSERS } = require('./header-values')
const { NETWORK_PARSERS } = require('./network-values')
const { OTLP_DEFAULT_ENDPOINT } = require('./options')

const LOG_LEVELS = ['error', 'warn', 'info', 'debug']
const CHECK_PATH = /^\/[\x21-\x7e]*$/ // an absolute path, printable ASCII, no spaces
const GRPC_SERVICE = /^[A-Za-z0-9_.\-/]{1,200}$/ // a gRPC service name, e.g. pkg.Service
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/
// A cookie's name (RFC 6265: an RFC 9110 token), up to 64 characters.
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/
const MAX_WORKERS = 256
const MAX_INSTANCES = 256 // lila run --instances
// What lila run may stop an instance with (--stop-signal); SIGKILL follows anyway.
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGHUP', 'SIGUSR1', 'SIGUSR2', 'SIGWINCH']
const ACCESS_LOG_FORMATS = ['text', 'json', 'combined']
// What --compress offers (proxy/edge/compressor.js).
const ENCODINGS = ['gzip', 'br']
// A media type, or a pattern of them: text/*, application/*+json, image/svg+xml.
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/(?:\*|\*\+[a-z0-9!#$&^_.+-]+|[a-z0-9][a-z0-9!#$&^_.+-]*)$/

const MODE_WORDS = MODES.flatMap(m => [modeWord(m), ...m.aliases])
const MODE_NAMES = MODE_WORDS.join(', ') // for "expected one of"

// One parser per option `type` in options.js: (text, flag, option) -> value.
const SIZE_UNITS = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }

const PARSERS = {
  ...HEADER_PARSERS, // --set-header, --del-header, their response sides, --request-id, a Host
  ...NETWORK_PARSERS, // --allow, --deny
  port: (text, flag) => parseInteger(text, flag, 0, 65535, 'a port number from 0 to 65535'),
  count: (text, flag) => parseInteger(text, flag, 0, 100, 'a whole number from 0 to 100'),
  // Bytes, or KiB, MiB, GiB with k, m, g (as nginx reads sizes): "1048576", "512k", "10m".
  size: (text, flag) => {
    const match = /^([1-9][0-9]{0,14})([kmg]?)$/i.exec(text)
    const bytes = match === null ? NaN : Number(match[1]) * SIZE_UNITS[match[2].toLowerCase()]
    if (!(bytes <= Number.MAX_SAFE_INTEGER)) {
      const expected = 'a size in bytes, or with k, m or g (KiB, MiB, GiB), e.g. 10m'
      throw new UsageError(`invalid value ${quote(text)}${forFlag(flag)}: expected ${expected}`)
    }
    return bytes
  },
  positive: (text, flag) => parseInteger(text, flag, 1, 1e9, 'a whole number of at least 1'),
  threshold: (text, flag) => parseInteger(text, flag, 1, 100, 'a whole number from 1 to 100'),
  duration: (text, flag, option) => parseDuration(text, flag, option.min || 0),
  check: (text, flag) => {
    if (text === 'tcp') return { type: 'tcp' }
    if (text === 'none') return null
    if (text.startsWith('http:') && CHECK_PATH.test(text.slice(5))) return { type: 'http', path: text.slice(5) }
    if (text === 'grpc') return { type: 'grpc', service: '' }
    if (text.startsWith('grpc:') && GRPC_SERVICE.test(text.slice(5))) return { type: 'grpc', service: text.slice(5) }
    throw new UsageError(`invalid check ${quote(text)}${forFlag(flag)}: ` +
      'expected tcp, http:/path, grpc[:service] or none')
  },
  dnsServer: (text, flag) => {
    // 10.0.0.2, 10.0.0.2:5353, ::1 or [::1]:5353
    const match = /^\[([^\]]+)\](?::(\d+))?$/.exec(text) || /^([\d.]+):(\d+)$/.exec(text) || [text, text]
    const [, host, port = '53'] = match
    if (!(text.startsWith('[') ? net.isIPv6(host) : net.isIP(host)) || Number(port) < 1 || Number(port) > 65535) {
      throw new UsageError(`invalid DNS server ${quote(text)}${forFlag(flag)}: ` +
        'expected an IP address and an optional :port, e.g. 10.0.0.2 or 127.0.0.1:5353')
    }
    return formatAddress(host, Number(port))
  },
  factor: (text, flag) => {
    if (!/^\d+(\.\d+)?$/.test(text) || Number(text) < 1 || Number(text) > 100) {
      throw new UsageError(`invalid value ${quote(text)}${forFlag(flag)}: expected a number from 1 to 100, e.g. 1.25`)
    }
    return Number(text)
  },
  host: (text, flag, option = {}) => {
    if (option.unix && unixPath(text) !== null) {
      const problem = socketPathProblem(unixPath(text), 'lila.sock')
      if (problem !== null) throw new UsageError(`invalid address ${quote(text)}${forFlag(flag)}: expected ${problem}`)
      return text
    }
    const host = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
    if (!net.isIP(host) && !isHostName(host)) {
      const unix = option.unix ? ', or unix:/path for a Unix socket' : ''
      throw new UsageError(`invalid address ${quote(text)}${forFlag(flag)}: expected an IP address or host name${unix}`)
    }
    return host
  },
  protocol: (text, flag) => {
    if (text !== 'tcp' && text !== 'http' && text !== 'grpc') {
      throw new UsageError(`invalid protocol ${quote(text)}${forFlag(flag)}: expected tcp, http or grpc`)
    }
    return text
  },
  name: (text, flag) => {
    if (!NAME.test(text)) {
      throw new UsageError(`invalid name ${quote(text)}${forFlag(flag)}: ` +
        'expected up to 64 letters, digits, ".", "_", ":" or "-"')
    }
    return text
  },
  route: (text, flag) => parseRouteOption(text, flag),
  file: (text, flag) => {
    if (text === '' || text.includes('\0')) {
      throw new UsageError(`invalid file name ${quote(text)}${forFlag(flag)}: expected a path`)
    }
    return text
  },
  backendProtocol: (text, flag) => {
    if (text !== 'h1' && text !== 'h2') {
      throw new UsageError(`invalid backend protocol ${quote(text)}${forFlag(flag)}: expected h1 or h2`)
    }
    return text
  },
  proxyProtocol: (text, flag) => {
    if (text !== 'v1' && text !== 'v2') {
      throw new UsageError(`invalid PROXY protocol version ${quote(text)}${forFlag(flag)}: expected v1 or v2`)
    }
    return text
  },
  accessLog: (text, flag) => {
    if (!ACCESS_LOG_FORMATS.includes(text)) {
      throw new UsageError(`invalid access log format ${quote(text)}${forFlag(flag)}: expected text, json or combined`)
    }
    return text
  },
  fleetUrl: (text, flag) => parseFleetUrl(text, flag),
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
  statusList: (text, flag) => parseStatusList(text, flag),
  // --retry-on: statuses, and `reset` (attempt.js: any method resent after a reset)
  retryList: (text, flag) => parseStatusList(text, flag, true),
  fault: (text, flag) => parseFault(text, flag),
  // "cookie" (the option's default name), "cookie=SID" -> { cookie: name }; "none" -> null
  sticky: (text, flag, option) => {
    if (text === 'none') return null
    if (text === 'cookie') return { cookie: option.cookie }
    const name = text.startsWith('cookie=') ? text.slice(7) : null
    if (name === null || !COOKIE_NAME.test(name)) {
      throw new UsageError(`invalid sticky ${quote(text)}${forFlag(flag)}: ` +
        'expected cookie or cookie=NAME, NAME a cookie name (letters, digits, - _ . and the like), or none')
    }
    return { cookie: name }
  },
  mirror: (text, flag) => parseMirror(text, flag),
  // "10/s", "600/m", "10/s,burst=50": a token bucket's rate (per second) and size (by
  // default, a second's worth and at least 1).
  rate: (text, flag) => {
    const match = /^(\d+(?:\.\d+)?)\/(s|m)(?:,burst=(\d+))?$/.exec(text)
    const rate = match ? Number(match[1]) / (match[2] === 'm' ? 60 : 1) : 0
    if (!match || rate <= 0 || rate > 1e6 || (match[3] !== undefined && Number(match[3]) < 1)) {
      throw new UsageError(`invalid rate ${quote(text)}${forFlag(flag)}: ` +
        'expected requests per second or minute, e.g. 10/s, 600/m or 10/s,burst=50')
    }
    const burst = match[3] !== undefined ? Number(match[3]) : Math.max(1, Math.ceil(rate))
    return { rate, burst }
  },
  // --otlp: an http(s) URL (a collector's base, /v1/traces and /v1/metrics under it),
  // or 'env': OTEL_EXPORTER_OTLP_* say where (config/otel-environment.js).
  otlpUrl: (text, flag) => {
    if (text === 'env') return text
    let url = null
    try { url = new URL(text) } catch {}
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
      throw new UsageError(`invalid OTLP endpoint ${quote(text)}${forFlag(flag)}: expected an http:// or https:// URL, ` +
        `e.g. ${OTLP_DEFAULT_ENDPOINT}`)
    }
    return text
  },
  ratio: (text, flag) => {
    const value = /^(0|1|0?\.\d+|1\.0*)$/.test(text) ? Number(text) : NaN
    if (!(value >= 0 && value <= 1)) {
      throw new UsageError(`invalid ratio ${quote(text)}${forFlag(flag)}: expected a number from 0 to 1, e.g. 0.1`)
    }
    return value
  },
  percent: (text, flag) => {
    if (text === 'off') return null
    const match = /^(\d+(?:\.\d+)?)%?$/.exec(text)
    if (!match || Number(match[1]) > 100) {
      throw new UsageError(`invalid percentage ${quote(text)}${forFlag(flag)}: expected 0 to 100, e.g. 20%, or off`)
    }
    return Number(match[1])
  },
  tlsSource: (text, flag) => {
    if (text !== 'local' && text !== 'acme') {
      throw new UsageError(`invalid TLS source ${quote(text)}${forFlag(flag)}: expected local or acme ` +
        '(--tls-cert and --tls-key for certificate files)')
    }
    return text
  },
  // "example.com,www.example.com,10.0.0.1" -> the names, lower case, each once.
  tlsNames: (text, flag) => {
    const names = text.split(',').map(n => n.trim().toLowerCase())
    for (const name of names) {
      const bare = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name
      const host = bare.startsWith('*.') ? bare.slice(2) : bare
      if (!(net.isIP(bare) || (isHostName(host) && host.length <= 253 && !host.endsWith('.')))) {
        throw new UsageError(`invalid name ${quote(name)}${forFlag(flag)}: expected host names or IP addresses, ` +
          'comma-separated, e.g. example.com,www.example.com')
      }
    }
    return Object.freeze([...new Set(names.map(n => n.replace(/^\[(.*)\]$/, '$1')))])
  },
  email: (text, flag) => {
    if (!/^[^\s@,<>"]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$/.test(text)) {
      throw new UsageError(`invalid email address ${quote(text)}${forFlag(flag)}: ` +
        'expected one address, e.g. ops@example.com')
    }
    return text
  },
  httpsUrl: (text, flag) => {
    let url = null
    try { url = new URL(text) } catch {}
    if (url === null || url.protocol !== 'https:' || url.username !== '' || url.password !== '') {
      throw new UsageError(`invalid URL ${quote(text)}${forFlag(flag)}: expected an https:// URL, ` +
        'e.g. https://acme-v02.api.letsencrypt.org/directory')
    }
    return url.href
  },
  // --basic-auth-realm: a quoted-string's content that any browser shows as it is
  realm: (text, flag) => {
    if (!/^[\x20-\x7e]{1,64}$/.test(text) || /["\\]/.test(text)) {
      throw new UsageError(`invalid realm ${quote(text)}${forFlag(flag)}: ` +
        'expected 1 to 64 printable ASCII characters without " or \\')
    }
    return text
  },
  // --compress: "gzip,br" -> ['gzip', 'br'], in the order given (it breaks ties)
  compress: (text, flag) => {
    const list = String(text).split(',').map(word => word.trim().toLowerCase())
    if (list.some(word => !ENCODINGS.includes(word)) || new Set(list).size !== list.length) {
      throw new UsageError(`invalid compression ${quote(text)}${forFlag(flag)}: ` +
        'expected gzip, br or both separated by a comma, e.g. gzip,br')
    }
    return Object.freeze(list)
  },
  // --compress-types: "text/*,application/json" -> ['text/*', 'application/json']
  mediaTypes: (text, flag) => {
    const list = String(text).split(',').map(word => word.trim().toLowerCase())
    const bad = list.find(type => !MEDIA_TYPE.test(type))
    if (bad !== undefined) {
      throw new UsageError(`invalid media type ${quote(bad)}${forFlag(flag)}: ` +
        'expected types such as text/*, application/json or application/*+xml, separated by commas')
    }
    return Object.freeze(list)
  },
  // --- lila run (app/) ---
  instances: (text, flag) => {
    if (text === 'auto') return os.availableParallelism()
    const expected = `a whole number from 1 to ${MAX_INSTANCES}, or auto (one per core)`
    return parseInteger(text, flag, 1, MAX_INSTANCES, expected)
  },
  // "3001-3020": the ports instances are given.
  portRange: (text, flag) => {
    const match = /^(\d{1,5})-(\d{1,5})$/.exec(text)
    const range = match === null ? null : { first: Number(match[1]), last: Number(match[2]) }
    if (range === null || range.first < 1 || range.last > 65535 || range.first > range.last) {
      const expected = 'FIRST-LAST, ports from 1 to 65535, low to high, e.g. 3001-3020'
      throw new UsageError(`invalid port range ${quote(text)}${forFlag(flag)}: expected ${expected}`)
    }
    return Object.freeze(range)
  },
  // "NODE_ENV=production": a variable of the app's environment.
  appEnv: (text, flag) => {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(text)
    if (match === null || match[2].includes('\0')) {
      const expected = 'NAME=VALUE, e.g. NODE_ENV=production'
      throw new UsageError(`invalid variable ${quote(text)}${forFlag(flag)}: expected ${expected}`)
    }
    return Object.freeze([match[1], match[2]])
  },
  signal: (text, flag) => {
    const name = /^SIG/.test(text) ? text : `SIG${text}`
    if (!STOP_SIGNALS.includes(name)) {
      throw new UsageError(`invalid signal ${quote(text)}${forFlag(flag)}: expected one of ${STOP_SIGNALS.join(', ')}`)
    }
    return name
  },
  appLogFormat: (text, flag) => {
    if (text !== 'text' && text !== 'json') {
      throw new UsageError(`invalid app log format ${quote(text)}${forFlag(flag)}: expected text or json`)
    }
    return text
  },
  flag: value => value === true,
  ...EDGE_PARSERS, // --forward-auth, --error-page, --maintenance, --canary and theirs
  logLevel: (text, flag) => {
    if (!LOG_LEVELS.includes(text)) {
      throw new UsageError(`invalid log level ${quote(text)}${forFlag(flag)}: expected one of ${LOG_LEVELS.join(', ')}`)
    }
    return text
  }
}

// "502,503", "5xx", "gateway" (502,503,504), "none": server-error statuses, sorted, once;
// with `reset` (--retry-on), the word `reset` may be among them, kept after the codes.
const STATUS_WORDS = { '5xx': range(500, 599), gateway: [502, 503, 504], none: [] }
function parseStatusList (text, flag, reset = false) {
  const codes = new Set()
  let resets = false
  for (const word of String(text).split(',')) {
    const known = STATUS_WORDS[word.trim()]
    const code = Number(word.trim())
    if (known !== undefined) for (const c of known) codes.add(c)
    else if (/^5\d\d$/.test(word.trim())) codes.add(code)
    else if (reset && word.trim() === 'reset') resets = true
    else {
      throw new UsageError(`invalid status list ${quote(text)}${forFlag(flag)}: ` +
        `expected server-error codes from 500 to 599, 5xx, gateway${reset ? ', none or reset' : ' or none'}, ` +
        'separated by commas')
    }
  }
  const list = [...codes].sort((a, b) => a - b)
  if (resets) list.push('reset')
  return Object.freeze(list)
}

// Option types whose JSON value may be a number as well as a string.
const NUMERIC = new Set(['port', 'count', 'positive', 'threshold', 'factor', 'workers', 'size', 'instances'])

module.exports = {
  LOG_LEVELS,
  ACCESS_LOG_FORMATS,
  PARSERS,
  NUMERIC,
  MODE_NAMES,
  MODE_WORDS
}
