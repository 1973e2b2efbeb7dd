'use strict'

const net = require('net')
const { UsageError } = require('../errors')
const { isHostName } = require('../address')
const { quote } = require('./values')

// --fleet URL: where the fleet's Redis is (fleet/redis.js's target).
//   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]        port 6379, database 0
//   rediss://...                                      the same over TLS (--fleet-ca)
//   redis-sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]
//                                                     sentinels (port 26379), the
//                                                     master's name; USER and PASSWORD
//                                                     are the master's
// -> { scheme, hosts: [{ host, port }], username, password, db, master, tls, display }
// `display` is the URL without its password: what lines, pages and metrics may show.
// An error never shows the password either.

const SCHEMES = { 'redis:': 6379, 'rediss:': 6379, 'redis-sentinel:': 26379 }
const EXPECTED = 'expected redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... (TLS) or ' +
  'redis-sentinel://HOST[:PORT],.../MASTER[/DB]'
const MAX_DB = 1_000_000 // Redis's "databases" may be set that high; 16 by default

function parseFleetUrl (text, flag = '--fleet') {
  const display = redact(String(text))
  const fail = why => new UsageError(`invalid ${flag ? `${flag} ` : ''}URL ${quote(display)}: ${why}; ${EXPECTED}`)
  const match = /^([a-z-]+:)\/\/(.*)$/i.exec(String(text))
  if (match === null) throw fail('not a URL')
  const scheme = match[1].toLowerCase()
  if (!(scheme in SCHEMES)) throw fail(`unknown scheme ${quote(scheme.slice(0, -1))}`)
  let rest = match[2]
  let username = null
  let password = null
  const at = rest.lastIndexOf('@')
  if (at !== -1) {
    const info = rest.slice(0, at)
    rest = rest.slice(at + 1)
    const colon = info.indexOf(':')
    try {
      username = decodeURIComponent(colon === -1 ? info : info.slice(0, colon)) || null
      password = colon === -1 ? null : decodeURIComponent(info.slice(colon + 1))
    } catch {
      throw fail('a user or password with a bad %-escape')
    }
    // redis://secret@host is a password, as Redis's own clients read it
    if (colon === -1) [username, password] = [null, username]
    if (password === '') password = null
  }
  const slash = rest.indexOf('/')
  const authority = slash === -1 ? rest : rest.slice(0, slash)
  const path = slash === -1 ? [] : rest.slice(slash + 1).split('/')
  if (authority === '') throw fail('no host')
  const sentinel = scheme === 'redis-sentinel:'
  const hosts = authority.split(',').map(part => hostPort(part, SCHEMES[scheme], fail))
  if (!sentinel && hosts.length > 1) throw fail('several hosts, which only redis-sentinel:// takes')
  let master = null
  if (sentinel) {
    master = path.shift()
    if (master === undefined || master === '') throw fail('a sentinel list without the master\'s name')
    if (!/^[A-Za-z0-9._-]{1,128}$/.test(master)) throw fail(`a master name ${quote(master)}`)
  }
  let db = 0
  if (path.length > 1) throw fail('more path than a database number')
  if (path.length === 1 && path[0] !== '') {
    if (!/^\d{1,7}$/.test(path[0]) || Number(path[0]) > MAX_DB) {
      throw fail(`a database number ${quote(path[0])}, where 0 to ${MAX_DB} goes`)
    }
    db = Number(path[0])
  }
  return Object.freeze({
    scheme: scheme.slice(0, -1),
    hosts: Object.freeze(hosts),
    username,
    password,
    db,
    master,
    tls: scheme === 'rediss:',
    display
  })
}

function hostPort (part, defaultPort, fail) {
  const match = /^\[([^\]]*)\](?::(.*))?$/.exec(part) || /^([^:[\]]*)(?::(.*))?$/.exec(part)
  if (match === null) throw fail(`a host ${quote(part)}`)
  const [, host, port] = match
  if (host === '') throw fail('no host')
  const bracketed = part.startsWith('[')
  if (bracketed ? !net.isIPv6(host) : !(net.isIPv4(host) || isHostName(host))) throw fail(`a host ${quote(host)}`)
  if (port === undefined) return { host, port: defaultPort }
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw fail(`a port ${quote(port)}, where 1 to 65535 goes`)
  }
  return { host, port: Number(port) }
}

// The URL with its password (if any) as "***".
function redact (text) {
  const match = /^([^:/]*:\/\/)(.*)$/.exec(text)
  if (match === null) return text.includes('@') ? '***' : text
  const at = match[2].lastIndexOf('@')
  if (at === -1) return text
  const info = match[2].slice(0, at)
  const colon = info.indexOf(':')
  const user = colon === -1 ? '' : info.slice(0, colon)
  return `${match[1]}${user}:***@${match[2].slice(at + 1)}`
}

module.exports = { parseFleetUrl }
