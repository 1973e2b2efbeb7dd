'use strict'

// The header grammars of the options (pure): a header a rule may set or remove
// (--set-header, --del-header and their response sides, --request-id), a field's
// value and its placeholders, and a Host (--host-header, a check's Host). Spread into
// parsers.js's PARSERS; what a rule may touch is header-rules.js's to say.

const net = require('net')
const { UsageError } = require('../errors')
const { isHostName } = require('../address')
const { TOKEN } = require('../proxy/message/grammar')
const { refusal, PLACEHOLDERS } = require('../proxy/http/header-rules')
const { quote, forFlag } = require('./values')

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

// One parser per option `type` in options.js, as PARSERS: (text, flag, option) -> value.
const HEADER_PARSERS = {
  hostHeader: (text, flag) => {
    if (!isHostHeader(text)) {
      throw new UsageError(`invalid host ${quote(text)}${forFlag(flag)}: ` +
        'expected a host name or address, with an optional :port')
    }
    return text
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
  }
}

module.exports = { HEADER_PARSERS }
