'use strict'

// The PROXY protocol (HAProxy's spec, versions 1 and 2): a header a proxy writes at the
// start of a connection to say whom it is really from. Pure functions, no I/O:
//
//   formatProxyHeader('v1' | 'v2', { source, destination }) -> Buffer
//     source, destination: { address, port }, or null for an unknown client (v1
//     "PROXY UNKNOWN", v2 LOCAL)
//   parseProxyHeader(buf) -> null (need more bytes)
//                          | { length, version, local, source, destination }
//     throws a ProxyHeaderError for anything else: the connection must be refused.
//     `local` (v2 LOCAL, v1 UNKNOWN, or a family other than TCP over IPv4/IPv6): the
//     header says nothing usable about the client; source and destination are null.

const net = require('net')
const { ProxyHeaderError } = require('../errors')

const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a])
const V1_PREFIX = Buffer.from('PROXY ')
const V1_MAX = 107 // the longest v1 line, CRLF included
const V2_COMMAND_LOCAL = 0x20
const V2_COMMAND_PROXY = 0x21
const V2_INET_STREAM = 0x11
const V2_INET6_STREAM = 0x21

// --- formatting ---

function formatProxyHeader (version, { source, destination }) {
  let family = 0
  if (source !== null && destination !== null) {
    family = net.isIPv4(source.address) && net.isIPv4(destination.address) ? 4 : 6
    if (family === 6) {
      // One family for both ends: IPv4 written as IPv4-mapped IPv6.
      source = { address: toIPv6(source.address), port: source.port }
      destination = { address: toIPv6(destination.address), port: destination.port }
    }
  }
  return version === 'v1' ? formatV1(family, source, destination) : formatV2(family, source, destination)
}

function toIPv6 (address) {
  return net.isIPv4(address) ? `::ffff:${address}` : address
}

function formatV1 (family, source, destination) {
  if (family === 0) return Buffer.from('PROXY UNKNOWN\r\n')
  const line = `PROXY TCP${family} ${source.address} ${destination.address} ${source.port} ${destination.port}\r\n`
  return Buffer.from(line, 'latin1')
}

function formatV2 (family, source, destination) {
  const size = family === 4 ? 12 : family === 6 ? 36 : 0
  const out = Buffer.alloc(16 + size)
  V2_SIGNATURE.copy(out, 0)
  out[12] = family === 0 ? V2_COMMAND_LOCAL : V2_COMMAND_PROXY
  out[13] = family === 4 ? V2_INET_STREAM : family === 6 ? V2_INET6_STREAM : 0
  out.writeUInt16BE(size, 14)
  if (family === 4) {
    ipv4Bytes(source.address).copy(out, 16)
    ipv4Bytes(destination.address).copy(out, 20)
    out.writeUInt16BE(source.port, 24)
    out.writeUInt16BE(destination.port, 26)
  } else if (family === 6) {
    ipv6Bytes(source.address).copy(out, 16)
    ipv6Bytes(destination.address).copy(out, 32)
    out.writeUInt16BE(source.port, 48)
    out.writeUInt16BE(destination.port, 50)
  }
  return out
}

function ipv4Bytes (address) {
  return Buffer.from(address.split('.').map(Number))
}

// Textual IPv6 (with "::" and an optional dotted IPv4 tail) -> 16 bytes.
function ipv6Bytes (address) {
  // A dotted IPv4 tail (::ffff:10.0.0.1) is two groups: write it so.
  const text = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a, b, c, d) =>
    `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`)
  const [head, rest] = text.includes('::') ? text.split('::') : [text, null]
  const parse = part => part === '' ? [] : part.split(':').map(h => parseInt(h, 16))
  const left = parse(head)
  const right = rest === null ? [] : parse(rest)
  const zeros = rest === null ? 0 : 8 - left.length - right.length
  const groups = [...left, ...new Array(zeros).fill(0), ...right]
  const out = Buffer.alloc(16)
  groups.forEach((g, i) => out.writeUInt16BE(g, i * 2))
  return out
}

// 16 bytes -> IPv6 as RFC 5952 writes it (the longest run of zero groups as "::");
// IPv4-mapped addresses as ::ffff:a.b.c.d.
function ipv6Text (bytes) {
  if (bytes.subarray(0, 10).every(b => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return `::ffff:${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`
  }
  const groups = []
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i))
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = gs => gs.map(g => g.toString(16)).join(':')
  if (bestStart === -1) return hex(groups)
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`
}

// --- parsing ---

function parseProxyHeader (buf) {
  if (startsLike(buf, V2_SIGNATURE)) return buf.length < 16 ? null : parseV2(buf)
  if (startsLike(buf, V1_PREFIX)) return buf.length < V1_PREFIX.length ? null : parseV1(buf)
  throw new ProxyHeaderError('no PROXY protocol header')
}

// Does buf start with `prefix`, as far as buf goes?
function startsLike (buf, prefix) {
  const n = Math.min(buf.length, prefix.length)
  for (let i = 0; i < n; i++) if (buf[i] !== prefix[i]) return false
  return true
}

function parseV1 (buf) {
  const end = buf.indexOf('\r\n')
  if (end === -1 || end + 2 > V1_MAX) {
    if (buf.length >= V1_MAX) throw new ProxyHeaderError(`PROXY v1 header longer than ${V1_MAX} bytes`)
    if (buf.indexOf(10) !== -1) throw new ProxyHeaderError('PROXY v1 header ends without CRLF')
    return null
  }
  const line = buf.toString('latin1', 0, end)
  const length = end + 2
  const fields = line.split(' ')
  if (fields[1] === 'UNKNOWN') return { length, version: 1, local: true, source: null, destination: null }
  if (fields.length !== 6 || (fields[1] !== 'TCP4' && fields[1] !== 'TCP6')) {
    const expected = 'PROXY TCP4|TCP6 source destination sport dport'
    throw new ProxyHeaderError(`malformed PROXY v1 header ${JSON.stringify(line)}: expected ${expected}`)
  }
  const family = fields[1] === 'TCP4' ? 4 : 6
  const [source, destination] = [fields[2], fields[3]]
  const isFamily = family === 4 ? net.isIPv4 : net.isIPv6
  if (!isFamily(source) || !isFamily(destination)) {
    throw new ProxyHeaderError(`malformed PROXY v1 header ${JSON.stringify(line)}: expected ${fields[1]} addresses`)
  }
  const [sport, dport] = [port(fields[4], line), port(fields[5], line)]
  return {
    length,
    version: 1,
    local: false,
    source: { address: source, port: sport },
    destination: { address: destination, port: dport }
  }
}

function port (text, line) {
  if (!/^(0|[1-9]\d{0,4})$/.test(text) || Number(text) > 65535) {
    throw new ProxyHeaderError(`malformed PROXY v1 header ${JSON.stringify(line)}: expected ports from 0 to 65535`)
  }
  return Number(text)
}

function parseV2 (buf) {
  const versionCommand = buf[12]
  if (versionCommand >> 4 !== 2) {
    throw new ProxyHeaderError(`PROXY v2 header with version ${versionCommand >> 4}: expected 2`)
  }
  const command = versionCommand & 0x0f
  if (command > 1) {
    throw new ProxyHeaderError(`PROXY v2 header with command ${command}: expected LOCAL (0) or PROXY (1)`)
  }
  const family = buf[13]
  const size = buf.readUInt16BE(14)
  const length = 16 + size
  if (buf.length < length) return null
  const none = { length, version: 2, local: true, source: null, destination: null }
  // LOCAL (the proxy's own connection, e.g. a health check), and families other than
  // TCP over IPv4/IPv6 (UNSPEC, UDP, unix sockets): the connection's own address stands.
  if (command === 0) return none
  if (family === V2_INET_STREAM) {
    if (size < 12) throw new ProxyHeaderError(`PROXY v2 header too short for IPv4 addresses: ${size} bytes`)
    const ip = at => `${buf[at]}.${buf[at + 1]}.${buf[at + 2]}.${buf[at + 3]}`
    return {
      length,
      version: 2,
      local: false,
      source: { address: ip(16), port: buf.readUInt16BE(24) },
      destination: { address: ip(20), port: buf.readUInt16BE(26) }
    }
  }
  if (family === V2_INET6_STREAM) {
    if (size < 36) throw new ProxyHeaderError(`PROXY v2 header too short for IPv6 addresses: ${size} bytes`)
    return {
      length,
      version: 2,
      local: false,
      source: { address: ipv6Text(buf.subarray(16, 32)), port: buf.readUInt16BE(48) },
      destination: { address: ipv6Text(buf.subarray(32, 48)), port: buf.readUInt16BE(50) }
    }
  }
  return none
}

module.exports = { formatProxyHeader, parseProxyHeader, V2_SIGNATURE }
