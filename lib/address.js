'use strict'

const net = require('net')

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i

// A Unix socket is written "unix:/path/app.sock", as a backend and as a listen address.
const UNIX_PREFIX = 'unix:'

// "host:port", with IPv6 hosts in brackets as URLs and users write them. (A host
// without a colon is no IPv6 address: net.isIPv6's first call compiles a regular
// expression that took 4 ms of lila's start.)
function formatAddress (host, port) {
  return `${host.includes(':') && net.isIPv6(host) ? `[${host}]` : host}:${port}`
}

// A backend as it was written, without its settings (config/backend-spec.js parseBackend):
// "10.0.0.1:80", "[::1]:80", "name:80", "unix:/run/app.sock", an SRV name
// ("_http._tcp.example.com"), a port range ("127.0.0.1:3000-3009") or the instances
// of `lila run` ("app"). What a reload
// and the control API match backends by.
function specAddress (spec) {
  if (spec.app === true) return 'app'
  if (spec.path != null) return UNIX_PREFIX + spec.path
  if (spec.srv != null) return spec.srv
  if (spec.range != null) return formatAddress(spec.host, `${spec.range.first}-${spec.range.last}`)
  return formatAddress(spec.host, spec.port)
}

// "unix:/path" -> "/path"; anything else -> null.
function unixPath (text) {
  return typeof text === 'string' && text.startsWith(UNIX_PREFIX) ? text.slice(UNIX_PREFIX.length) : null
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

module.exports = { formatAddress, specAddress, unixPath, isHostName, plainAddress }
