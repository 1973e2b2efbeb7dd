'use strict'

// Networks as the options write them (pure): --allow and --deny's lists of IP
// addresses and CIDR networks, each checked (its host bits zero) and written one way.
// Spread into parsers.js's PARSERS; proxy/edge/addresses.js takes what they give.

const net = require('net')
const { UsageError } = require('../errors')
const { quote, forFlag } = require('./values')

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

// One parser per option `type` in options.js, as PARSERS: (text, flag, option) -> value.
const NETWORK_PARSERS = {
  // --allow, --deny: "10.0.0.0/8,::1" -> ['10.0.0.0/8', '::1/128']
  cidrList: (text, flag) => {
    const parts = String(text).split(',').map(part => part.trim())
    if (parts.some(part => part === '')) {
      throw new UsageError(`invalid network list ${quote(text)}${forFlag(flag)}: ` +
        'expected networks separated by commas, e.g. 10.0.0.0/8,192.168.1.7')
    }
    return Object.freeze(parts.map(part => parseCidr(part, text, flag)))
  }
}

module.exports = { NETWORK_PARSERS }
