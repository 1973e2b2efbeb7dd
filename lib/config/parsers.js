'use strict'

// Value parsers: one text (from argv, or a JSON value made text) in, one checked value
// out, or a UsageError with one line that names the bad value and what was expected.
// The config side only (argv.js, builder.js), and the admin listener's backend bodies:
// the running balancer takes values already parsed.

const net = require('net')
const { UsageError } = require('../errors')
const { formatAddress, isHostName, unixPath, specAddress } = require('../address')
const { MODES, modeWord, isModeWord } = require('../upstream/balancers')
const { TOKEN } = require('../proxy/http1/parse')
const { refusal, PLACEHOLDERS } = require('../proxy/http/header-rules')
const { OPTIONS } = require('./options')

const MAX_TIMER_MS = 2147483647 // setTimeout's ceiling, about 24.8 days
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/
const UNIT_MS = { ms: 1, s: 1000, m: 60000, h: 3600000 }
const LOG_LEVELS = ['error', 'warn', 'info', 'debug']
const BACKEND_SYNTAX = 'host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]'
// An SRV name: _service._proto.name (RFC 2782).
const SRV_NAME = /^_[A-Za-z0-9-]{1,62}\._[A-Za-z0-9-]{1,62}\.[^:]+$/
// The longest path a Unix socket address holds (sun_path, less its ending zero byte).
const MAX_SOCKET_PATH = process.platform === 'linux' ? 107 : 103
// A port range (host:3000-3009) is watched port by port: its size bounds the probing.
const MAX_RANGE_PORTS = 1024
const CHECK_PATH = /^\/[\x21-\x7e]*$/ // an absolute path, printable ASCII, no spaces
const GRPC_SERVICE = /^[A-Za-z0-9_.\-/]{1,200}$/ // a gRPC service name, e.g. pkg.Service
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/
// A cookie's name (RFC 6265: an RFC 9110 token), up to 64 characters.
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/
const MAX_WORKERS = 256
const ACCESS_LOG_FORMATS = ['text', 'json', 'combined']
// A fault with no for=DUR ends by itself after this long: one forgotten on a shared
// machine does not outlive a coffee break (for=0s: until cleared).
const FAULT_FOR_MS = 60000
const FAULT_SETTINGS = 'delay=DUR, error=CODE, reset=1, rate=R or for=DUR'
const FAULT_SYNTAX = 'host:port,SETTING[,SETTING...]'
const MIRROR_SYNTAX = 'host:port[,percent=N] or unix:/path[,percent=N]'
// What --compress offers (proxy/edge/compressor.js).
const ENCODINGS = ['gzip', 'br']
// A media type, or a pattern of them: text/*, application/*+json, image/svg+xml.
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/(?:\*|\*\+[a-z0-9!#$&^_.+-]+|[a-z0-9][a-z0-9!#$&^_.+-]*)$/

// What a route may set for itself on the command line: allow=, deny=, basic-auth=.
const ROUTE_SETTINGS = OPTIONS.filter(o => o.route).map(o => o.name)

const MODE_WORDS = MODES.flatMap(m => [modeWord(m), ...m.aliases])
const MODE_NAMES = MODE_WORDS.join(', ') // for "expected one of"

const quote = value => JSON.stringify(String(value))
// Parsers name the flag a value came from; a value from the JSON file is named by its
// path instead (flag null), which the caller puts in front of the message.
const forFlag = flag => flag ? ` for ${flag}` : ''

function parseDuration (text, flag, min = 0) {
  const match = DURATION.exec(text)
  if (!match) {
    throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: ` +
      'expected a number with a unit, e.g. 500ms, 2s or 1m')
  }
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2]])
  if (ms < min) throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: expected at least ${min}ms`)
  if (ms > MAX_TIMER_MS) throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: expected at most 24d`)
  return ms
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

// A header name a rule may set or remove on `side` ('request' or 'response'), as
// written; `verb` words the refusal.
function headerName (name, text, flag, side, verb) {
  if (name.startsWith(':')) {
    const hint = side === 'request' ? ' (--host-header sets :authority)' : ''
    throw new UsageError(`cannot ${verb} pseudo-header ${quote(name)}${forFlag(flag)}: lila writes those${hint}`)
  }
  if (!TOKEN.test(name)) {
    throw new UsageError(`invalid header name ${quote(text)}${forFlag(flag)}: expected a token such as X-Env`)
  }
  const why = refusal(name.toLowerCase(), side)
  if (why !== null) throw new UsageError(`cannot ${verb} header ${quote(name)}${forFlag(flag)}: ${why}`)
  return name
}

// "Name: value" -> { name, value }: printable ASCII, not empty, and its placeholders
// ({word}) known.
function parseHeaderField (text, flag, side) {
  const colon = text.indexOf(':', 1)
  const example = side === 'request' ? '\'X-Env: prod\'' : '\'Strict-Transport-Security: max-age=31536000\''
  if (colon === -1 && !text.startsWith(':')) {
    throw new UsageError(`invalid header ${quote(text)}${forFlag(flag)}: expected NAME: VALUE, e.g. ${example}`)
  }
  const name = text.startsWith(':') && colon === -1 ? text : text.slice(0, colon)
  headerName(name, text, flag, side, 'set')
  const value = text.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '')
  if (value === '') {
    const del = side === 'request' ? '--del-header' : '--del-response-header'
    throw new UsageError(`invalid header ${quote(text)}${forFlag(flag)}: expected a value after the ":" ` +
      `(${del} ${name} removes it)`)
  }
  if (!/^[\t\x20-\x7e]+$/.test(value)) {
    throw new UsageError(`invalid header value ${quote(value)}${forFlag(flag)}: expected printable ASCII`)
  }
  for (const [, word] of value.matchAll(/\{([a-z_]+)\}/g)) {
    if (PLACEHOLDERS[word] === undefined) {
      const known = Object.keys(PLACEHOLDERS).map(p => `{${p}}`).join(' or ')
      throw new UsageError(`unknown placeholder {${word}} in ${quote(text)}${forFlag(flag)}: expected ${known}`)
    }
  }
  return { name, value }
}

// An address's bytes (IPv4 or IPv6, IPv4 in its last 32 bits written dotted).
function ipBytes (address) {
  if (net.isIPv4(address)) return address.split('.').map(Number)
  let text = address
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted !== null) {
    const [a, b, c, d] = dotted[1].split('.').map(Number)
    text = text.slice(0, dotted.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split('::')
  const groups = head === '' ? [] : head.split(':')
  const rest = tail === undefined ? [] : tail === '' ? [] : tail.split(':')
  const all = tail === undefined ? groups : [...groups, ...Array(8 - groups.length - rest.length).fill('0'), ...rest]
  return all.flatMap(group => [parseInt(group, 16) >> 8, parseInt(group, 16) & 0xff])
}

// 16 bytes -> an IPv6 address as RFC 5952 writes it: the longest run of zero groups as "::".
function formatIpv6 (bytes) {
  const groups = []
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16))
  let best = [-1, 0]
  for (let i = 0; i < 8;) {
    let j = i
    while (j < 8 && groups[j] === '0') j++
    if (j - i > best[1] && j - i > 1) best = [i, j - i]
    i = j === i ? i + 1 : j
  }
  if (best[0] === -1) return groups.join(':')
  return `${groups.slice(0, best[0]).join(':')}::${groups.slice(best[0] + best[1]).join(':')}`
}

// "10.0.0.0/8", "::1" (a whole address: /32 or /128) -> "10.0.0.0/8", "::1/128". The
// network's address must have its host bits zero: 10.1.2.3/8 is a slip, named.
function parseCidr (text, whole, flag) {
  const within = whole === text ? '' : ` in ${quote(whole)}`
  const invalid = expected => new UsageError(`invalid network ${quote(text)}${within}${forFlag(flag)}: ` +
    `expected ${expected}`)
  const [address, length, ...rest] = text.split('/')
  const family = net.isIP(address)
  if (family === 0 || rest.length > 0) {
    throw invalid('an IP address or a network such as 10.0.0.0/8 or 2001:db8::/32')
  }
  const max = family === 4 ? 32 : 128
  if (length !== undefined && (!/^\d{1,3}$/.test(length) || Number(length) > max)) {
    throw invalid(`a prefix length from 0 to ${max} after the "/"`)
  }
  const prefix = length === undefined ? max : Number(length)
  const bytes = ipBytes(address)
  for (let bit = prefix; bit < max; bit++) {
    if (bytes[bit >> 3] & (0x80 >> (bit & 7))) {
      const network = bytes.map((byte, i) => {
        const keep = Math.min(8, Math.max(0, prefix - i * 8)) // the bits of this byte in the prefix
        return byte & (0xff << (8 - keep)) & 0xff
      })
      const shown = family === 4 ? network.join('.') : formatIpv6(network)
      throw invalid(`the network's own address, its host bits zero: ${shown}/${prefix}`)
    }
  }
  return `${address.toLowerCase()}/${prefix}`
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
    if (text === 'grpc') return { type: 'grpc', service: '' }
    if (text.startsWith('grpc:') && GRPC_SERVICE.test(text.slice(5))) return { type: 'grpc', service: text.slice(5) }
    throw new UsageError(`invalid check ${quote(text)}${forFlag(flag)}: ` +
      'expected tcp, http:/path, grpc[:service] or none')
  },
  hostHeader: (text, flag) => {
    if (!isHostHeader(text)) {
      throw new UsageError(`invalid host ${quote(text)}${forFlag(flag)}: ` +
        'expected a host name or address, with an optional :port')
    }
    return text
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
  // --set-header, --set-response-header: "Name: value" -> { name, value }
  headerField: (text, flag, option) => parseHeaderField(text, flag, option.side),
  // --del-header, --del-response-header
  headerName: (text, flag, option) => headerName(text, text, flag, option.side, 'remove'),
  // --request-id NAME: a header on the request and its response both
  requestId: (text, flag) => {
    headerName(text, text, flag, 'request', 'use')
    return headerName(text, text, flag, 'response', 'use')
  },
  // --host-header: backend (the backend's own, backend.js hostHeader) or a fixed Host
  hostRule: (text, flag) => {
    if (text === 'backend' || isHostHeader(text)) return text
    throw new UsageError(`invalid host ${quote(text)}${forFlag(flag)}: ` +
      'expected backend, or a host name or address with an optional :port')
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
  // --allow, --deny: "10.0.0.0/8,::1" -> ['10.0.0.0/8', '::1/128']
  cidrList: (text, flag) => {
    const parts = String(text).split(',').map(part => part.trim())
    if (parts.some(part => part === '')) {
      throw new UsageError(`invalid network list ${quote(text)}${forFlag(flag)}: ` +
        'expected networks separated by commas, e.g. 10.0.0.0/8,192.168.1.7')
    }
    return Object.freeze(parts.map(part => parseCidr(part, text, flag)))
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
  flag: value => value === true,
  logLevel: (text, flag) => {
    if (!LOG_LEVELS.includes(text)) {
      throw new UsageError(`invalid log level ${quote(text)}${forFlag(flag)}: expected one of ${LOG_LEVELS.join(', ')}`)
    }
    return text
  }
}

// "502,503", "5xx", "gateway" (502,503,504), "none": server-error statuses, sorted, once.
const STATUS_WORDS = { '5xx': range(500, 599), gateway: [502, 503, 504], none: [] }
function parseStatusList (text, flag) {
  const codes = new Set()
  for (const word of String(text).split(',')) {
    const known = STATUS_WORDS[word.trim()]
    const code = Number(word.trim())
    if (known !== undefined) for (const c of known) codes.add(c)
    else if (/^5\d\d$/.test(word.trim())) codes.add(code)
    else {
      throw new UsageError(`invalid status list ${quote(text)}${forFlag(flag)}: ` +
        'expected server-error codes from 500 to 599, 5xx, gateway or none, separated by commas')
    }
  }
  return Object.freeze([...codes].sort((a, b) => a - b))
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
// `percent` % of them (proxy/mirror.js); `address` as /status.json shows it.
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

function range (from, to) {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i)
}

// Option types whose JSON value may be a number as well as a string.
const NUMERIC = new Set(['port', 'count', 'positive', 'threshold', 'factor', 'workers'])

// What is wrong with a Unix socket's path, in words after "expected", or null.
function socketPathProblem (path, example) {
  if (!path.startsWith('/')) return `unix: and an absolute path, e.g. unix:/run/${example}`
  if (path.endsWith('/')) return `the path of a socket file after unix:, not a folder, e.g. unix:/run/${example}`
  if (path.includes('\0')) return 'a path without a NUL byte after unix:'
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    return `a path of at most ${MAX_SOCKET_PATH} bytes after unix: (what a Unix socket address holds here)`
  }
  return null
}

const isPort = text => /^\d+$/.test(text) && Number(text) >= 1 && Number(text) <= 65535

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

// A route's MATCH (--route, "routes"): a host (api.example.com), a wildcard host
// (*.example.com: any name under it), a path prefix (/static: /static and what is below
// it) or a host and a path (api.example.com/v1) -> { host, wildcard, path }, null where
// not given. The host is lowercased and has no port: a request's Host is matched
// without its port.
const ROUTE_PATH = /^\/[\x21-\x7e]*$/
function parseRouteMatch (text) {
  const invalid = expected => new UsageError(`invalid route match ${quote(text)}: expected ${expected}`)
  const EXPECTED = 'a host (api.example.com), *.example.com, a path (/static) or both (api.example.com/v1)'
  if (typeof text !== 'string' || text === '') throw invalid(EXPECTED)
  const slash = text.indexOf('/')
  const hostText = slash === -1 ? text : text.slice(0, slash)
  let path = slash === -1 ? null : text.slice(slash)
  let host = null
  let wildcard = false
  if (hostText !== '') {
    wildcard = hostText.startsWith('*.')
    host = (wildcard ? hostText.slice(2) : hostText).toLowerCase()
    if (host.includes(':')) throw invalid('a host name without a port (a request\'s Host is matched without its port)')
    if (!isHostName(host)) throw invalid(EXPECTED)
  }
  if (path !== null) {
    if (!ROUTE_PATH.test(path) || path.includes('?') || path.includes('#')) {
      throw invalid('a path prefix such as /static (printable, no spaces, no ? or #)')
    }
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1) // /static/ is /static
  }
  return { host, wildcard, path }
}

// --route 'MATCH=[strip] [SETTING=VALUE...] [MODE] BACKEND [BACKEND...]' -> { match,
// strip, settings, mode, backends }: texts, checked by the builder (mode null: the
// listener's default mode). `strip` takes the matched path prefix off (proxy/edge);
// `settings`: [[name, value]] of options a route may set for itself (`route` in
// OPTIONS: allow=, deny=, basic-auth=), which no backend or mode looks like.
function parseRouteOption (text, flag) {
  const eq = text.indexOf('=')
  const words = eq === -1 ? [] : text.slice(eq + 1).trim().split(/\s+/).filter(Boolean)
  let strip = false
  const settings = []
  while (words.length > 0) {
    if (words[0] === 'strip') {
      strip = true
      words.shift()
      continue
    }
    const setting = /^([a-z-]+)=(.*)$/.exec(words[0])
    if (setting === null || !ROUTE_SETTINGS.includes(setting[1])) break
    settings.push([setting[1], setting[2]])
    words.shift()
  }
  if (eq <= 0 || words.length === 0) {
    throw new UsageError(`invalid route ${quote(text)}${forFlag(flag)}: expected MATCH=[MODE] BACKEND..., ` +
      'e.g. "api.localhost=127.0.0.1:8081 127.0.0.1:8082" or "/static=rr 127.0.0.1:9000"')
  }
  const mode = isModeWord(words[0]) ? words.shift() : null
  return { match: text.slice(0, eq), strip, settings, mode, backends: words }
}

module.exports = {
  LOG_LEVELS,
  parseRouteMatch,
  ACCESS_LOG_FORMATS,
  parseDuration,
  parseInteger,
  parseBackend,
  parseFault,
  parseFaultSettings,
  parseMirror,
  looksLikeBackend,
  PARSERS,
  NUMERIC,
  DURATION,
  BACKEND_SYNTAX,
  MAX_RANGE_PORTS,
  MODE_NAMES,
  MODE_WORDS,
  quote
}
