'use strict'

// What a reload changes, in words, for the log: process-wide settings and the options
// of the listeners that stay. Pure. (Listeners added and removed, and backends, are
// described by balancer/balancer.js and upstream.js as they apply them; cli/reload-log.js logs it all.)

const { LISTENER_OPTIONS } = require('./options')
const { formatDuration, formatSticky, describeMirror } = require('../format')
const { specAddress } = require('../address')

// Options that identify a listener (a change replaces it) or are said otherwise.
// --fault is a spell from the start: a reload neither starts nor ends one.
const NOT_HERE = new Set([
  'name', 'port', 'host', 'protocol', 'fault',
  'tls-cert', 'tls-key', 'backend-tls', 'backend-tls-ca', 'backend-tls-insecure',
  'tls', 'tls-names', 'tls-client-ca', 'tls-client-optional'
])

function describeChanges (before, after) {
  const lines = []
  if (before.shutdownTimeout !== after.shutdownTimeout) {
    lines.push(`shutdown-timeout ${formatDuration(before.shutdownTimeout)} -> ${formatDuration(after.shutdownTimeout)}`)
  }
  if (before.logLevel !== after.logLevel) lines.push(`log-level ${before.logLevel} -> ${after.logLevel}`)
  if (before.workers !== after.workers) {
    lines.push(`workers ${before.workers} -> ${after.workers}: takes a restart; the running workers stay`)
  }
  // --otlp is taken at the start
  const otlp = [['otlp', 'otlp'], ['otlpInterval', 'otlp-interval'], ['traceSample', 'trace-sample']]
  for (const [key, name] of otlp) {
    if (before[key] !== undefined && before[key] !== after[key]) lines.push(`${name}: takes a restart`)
  }
  const old = new Map(before.listeners.map(l => [l.name, l]))
  for (const listener of after.listeners) {
    const was = old.get(listener.name)
    if (was === undefined || !sameAddress(was, listener)) continue
    const changes = []
    if (was.mode !== listener.mode) changes.push(`mode ${was.mode} -> ${listener.mode}`)
    for (const o of LISTENER_OPTIONS) {
      if (NOT_HERE.has(o.name) || !(o.key in listener)) continue
      const [a, b] = [show(o, was[o.key]), show(o, listener[o.key])]
      if (a !== b) changes.push(`${o.name} ${a} -> ${b}`)
    }
    if (JSON.stringify(was.backendTls) !== JSON.stringify(listener.backendTls)) {
      changes.push(`backend-tls ${tlsWords(was.backendTls)} -> ${tlsWords(listener.backendTls)}`)
    }
    changes.push(...tlsChanges(was.tls, listener.tls))
    if (changes.length > 0) lines.push(`${listener.name}: ${changes.join(', ')}`)
  }
  return lines
}

// A listener that keeps its protocol, host and port keeps its socket across a reload
// (matched by name); otherwise it is replaced.
function sameAddress (a, b) {
  return a.protocol === b.protocol && a.port === b.port && a.host === b.host
}

function show (option, value) {
  if (value === null) return option.type === 'maintenance' ? 'off' : 'none'
  if (option.type === 'errorPage') {
    return value.length === 0 ? 'none' : value.map(page => `${codesText(page.codes)}=${page.file}`).join(', ')
  }
  if (option.type === 'maintenance') return value.page === null ? 'on' : value.page
  if (option.type === 'canary') return `${value.backends.map(specAddress).join(' ')} ${value.share}%`
  if (option.multiple) {
    return value.length === 0 ? 'none' : value.map(v => v.name ? `${v.name}: ${v.value}` : v).join(', ')
  }
  if (option.type === 'duration') return formatDuration(value)
  if (option.type === 'sticky') return formatSticky(value)
  if (option.type === 'mirror') return describeMirror(value)
  if (option.type === 'check') {
    if (value.type === 'http') return `http:${value.path}`
    return value.type === 'grpc' && value.service !== '' ? `grpc:${value.service}` : value.type
  }
  return String(value)
}

// [500, ..., 599, 404] -> "5xx,404"
function codesText (codes) {
  const words = []
  for (const from of [400, 500]) {
    const whole = codes.filter(code => code >= from && code < from + 100).length === 100
    if (whole) words.push(`${from / 100}xx`)
  }
  for (const code of codes) if (!words.includes(`${Math.floor(code / 100)}xx`)) words.push(String(code))
  return words.join(',')
}

// A listener's own TLS, before and after: its source, names, client certificates.
function tlsChanges (was, now) {
  if (now === null) return was === null ? [] : ['TLS off']
  const source = tls => tls.source === 'files' ? 'certificate files' : `--tls ${tls.source}`
  const out = []
  if (was === null) out.push(`TLS on (${source(now)})`)
  else if (was.source !== now.source) out.push(`TLS ${source(was)} -> ${source(now)}`)
  if (now.source === 'files') {
    const n = now.certificates.length
    out.push(`${n} certificate${n === 1 ? '' : 's'} read again`)
  } else if (was !== null && was.source !== 'files' && was.names.join() !== now.names.join()) {
    out.push(`tls-names ${was.names.join(',')} -> ${now.names.join(',')}`)
  }
  const client = tls => tls === null || tls.clientAuth === null
    ? 'none'
    : `${tls.clientAuth.ca}${tls.clientAuth.optional ? ' (optional)' : ''}`
  if (client(was) !== client(now)) out.push(`tls-client-ca ${client(was)} -> ${client(now)}`)
  else if (now.clientAuth !== null) out.push('tls-client-ca read again')
  return out
}

function tlsWords (backendTls) {
  if (backendTls === null) return 'off'
  if (backendTls.insecure) return 'on (not verified)'
  return backendTls.ca === null ? 'on' : `on (CA ${backendTls.ca})`
}

module.exports = { describeChanges, sameAddress }
