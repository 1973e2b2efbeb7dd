'use strict'

// --allow and --deny: which client addresses may come in, on Node's net.BlockList
// (IPv4, IPv6, and IPv4-mapped IPv6 addresses matched by the IPv4 networks alike).
// Pure.
//
//   const gate = new AddressGate(allow, deny)   lists of "10.0.0.0/8", "::1/128" (as
//                                               config/parsers.js cidrList checks them)
//   gate.judge(address)  -> null (may come in), 'deny' (on the deny list, which wins),
//                           or 'allow' (an allow list was given and it is not on it)
//
// An address that is no IP address (a Unix socket's client, "unix:") is on no list.

const net = require('net')

class AddressGate {
  constructor (allow, deny) {
    this.allow = allow.length === 0 ? null : blockList(allow)
    this.deny = deny.length === 0 ? null : blockList(deny)
  }

  judge (address) {
    const family = net.isIP(address)
    const type = family === 4 ? 'ipv4' : 'ipv6'
    if (this.deny !== null && family !== 0 && this.deny.check(address, type)) return 'deny'
    if (this.allow !== null && (family === 0 || !this.allow.check(address, type))) return 'allow'
    return null
  }
}

function blockList (networks) {
  const list = new net.BlockList()
  for (const text of networks) {
    const slash = text.indexOf('/')
    const address = text.slice(0, slash)
    list.addSubnet(address, Number(text.slice(slash + 1)), net.isIPv4(address) ? 'ipv4' : 'ipv6')
  }
  return list
}

module.exports = { AddressGate }
