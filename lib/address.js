'use strict'

const net = require('net')

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i

// "host:port", with IPv6 hosts in brackets as URLs and users write them.
function formatAddress (host, port) {
  return `${net.isIPv6(host) ? `[${host}]` : host}:${port}`
}

// A DNS name (RFC 1123, underscores allowed as in service names) or an IPv4 address.
// Digits and dots only must be a real IPv4 address, not a "name" like 999.1.1.1.
function isHostName (text) {
  if (/^[\d.]+$/.test(text)) return net.isIPv4(text)
  return HOSTNAME.test(text)
}

// IPv4-mapped IPv6 (::ffff:1.2.3.4) folded to plain IPv4, so hashing and logs agree
// whichever stack accepted the connection.
function plainAddress (address) {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address
}

module.exports = { formatAddress, isHostName, plainAddress }
