'use strict'

// TLS material as the proxy serves it: the certificates a listener presents (TLS
// termination), the client certificates it asks for (--tls-client-ca), the trust it
// places in backends (--backend-tls), and the ACME challenges it answers.
//
// Certificate files are read at start and again on every reload, so renewed files are
// picked up by SIGHUP; a file that cannot be read or used is a UsageError naming the
// file and the setting it came from. Certificates lila gets itself (--tls local|acme,
// tls/keeper.js) arrive as PEM through a Certificates board, which hands each one to
// the ListenerTls of its listener: new handshakes take it, connections in flight keep
// the one they began with.

const fs = require('fs')
const { X509Certificate } = require('crypto')
const { UsageError } = require('../errors')

const quote = value => JSON.stringify(String(value))
const FILE_ERRORS = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'it is a folder' }
const DAY_MS = 86400000

function readPem (file, at) {
  try {
    return fs.readFileSync(file)
  } catch (err) {
    const reason = FILE_ERRORS[err.code] || err.code || err.message
    throw new UsageError(`cannot read ${quote(file)} (${at}): ${reason}`)
  }
}

// The names a certificate is for: its DNS and IP subject alternative names, or its
// common name when it has none. Lower case; wildcards ("*.example.com") as written.
function namesOf (x509) {
  const names = (x509.subjectAltName || '').split(', ')
    .filter(n => n.startsWith('DNS:') || n.startsWith('IP Address:'))
    .map(n => n.slice(n.indexOf(':') + 1).toLowerCase())
    .map(n => n.includes(':') ? new URL(`http://[${n}]/`).hostname.slice(1, -1) : n) // IPv6 as written: ::1
  if (names.length > 0) return names
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x509.subject || '')
  return cn ? [cn[1].toLowerCase()] : []
}

function parseCertificate (pem, at, file) {
  try {
    return new X509Certificate(pem)
  } catch (err) {
    throw new UsageError(`cannot use ${quote(file)} (${at}): not a PEM certificate`)
  }
}

// What the status page, /status.json and the metrics show of a certificate.
function factsOf (x509) {
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x509.issuer || '')
  const org = /(?:^|\n)O=([^\n]+)/.exec(x509.issuer || '')
  return {
    names: namesOf(x509),
    issuer: cn ? cn[1] : org ? org[1] : x509.issuer.split('\n').join(', '),
    notBefore: Date.parse(x509.validFrom),
    notAfter: Date.parse(x509.validTo),
    serial: x509.serialNumber
  }
}

// A secure context for a certificate and its key, with the CAs client certificates
// must come from (mutual TLS). `cert` may be a chain. A key that does not match is a
// UsageError naming both files.
function contextOf ({ certPem, keyPem, clientCa, certFile = null, keyFile = null, certAt, keyAt }) {
  try {
    return require('tls').createSecureContext({ cert: certPem, key: keyPem, ca: clientCa || undefined })
  } catch (err) {
    if (certFile === null) throw err
    if (/key values mismatch/.test(err.message)) {
      const key = `key ${quote(keyFile)} (${keyAt})`
      throw new UsageError(`certificate ${quote(certFile)} (${certAt}) and ${key} do not match`)
    }
    const reason = oneLine(err.message)
    throw new UsageError(`cannot use certificate ${quote(certFile)} with key ${quote(keyFile)} (${certAt}): ${reason}`)
  }
}

// A listener's TLS: what the prelude (prelude.js) hands each handshake.
//   context, SNICallback         the certificate(s): the first file's is the default,
//                                the others chosen by the name a client asks for (SNI)
//   requestCert, rejectUnauthorized, clientAuth   mutual TLS (null: none)
//   challenges                   the board's ACME challenges (--tls acme), else null
// For --tls local|acme, `set(material)` takes a new certificate ({ cert, key } PEM, or
// null: none yet, and every handshake fails with a handshake_failure alert).
class ListenerTls {
  constructor (config, { material = null, status = null, challenges = null } = {}) {
    this.source = config.source
    this.names = config.names || [] // --tls local|acme: the names asked for
    this.clientAuth = config.clientAuth
    this.clientCa = config.clientAuth === null ? null : readClientCa(config.clientAuth)
    this.requestCert = config.clientAuth !== null
    this.rejectUnauthorized = config.clientAuth !== null && !config.clientAuth.optional
    this.challenges = config.source === 'acme' ? challenges : null
    this.context = null
    this.SNICallback = undefined
    this.served = [] // facts of each certificate presented
    this.status = status // --tls local|acme: { lastRenewal, lastError, nextRenewal } (the keeper's)
    if (config.source === 'files') this.loadFiles(config.certificates)
    else this.set(material, status)
  }

  loadFiles (certificates) {
    const exact = new Map()
    const wildcard = new Map()
    for (const { cert, key, certAt, keyAt } of certificates) {
      const certPem = readPem(cert, certAt)
      const keyPem = readPem(key, keyAt)
      const x509 = parseCertificate(certPem, certAt, cert)
      const ctx = contextOf({ certPem, keyPem, clientCa: this.clientCa, certFile: cert, keyFile: key, certAt, keyAt })
      if (this.context === null) this.context = ctx
      const facts = factsOf(x509)
      for (const name of facts.names) {
        const map = name.startsWith('*.') ? wildcard : exact
        if (!map.has(name)) map.set(name, ctx)
      }
      this.served.push(facts)
    }
    const fallback = this.context
    this.SNICallback = (servername, done) => {
      const name = String(servername).toLowerCase()
      const dot = name.indexOf('.')
      done(null, exact.get(name) || (dot === -1 ? undefined : wildcard.get(`*${name.slice(dot)}`)) || fallback)
    }
  }

  // A certificate lila got itself, for new handshakes; null: none (yet).
  set (material, status = this.status) {
    this.status = status
    if (material === null) {
      if (this.context === null) this.context = require('tls').createSecureContext({ ca: this.clientCa || undefined })
      return
    }
    const x509 = new X509Certificate(material.cert)
    this.context = contextOf({ certPem: material.cert, keyPem: material.key, clientCa: this.clientCa })
    this.served = [factsOf(x509)]
  }

  // The certificates presented, as the status page shows them (no key, ever).
  snapshot (listener, now = Date.now()) {
    const status = this.status || {}
    const none = { names: this.names, issuer: null, notBefore: null, notAfter: null, serial: null } // none yet
    const rows = this.served.length > 0 ? this.served : [none]
    return rows.map(facts => ({
      listener,
      source: this.source,
      ...facts,
      expiresIn: facts.notAfter === null ? null : Math.round((facts.notAfter - now) / 1000),
      daysLeft: facts.notAfter === null ? null : Math.floor((facts.notAfter - now) / DAY_MS),
      lastRenewal: status.lastRenewal ?? null,
      nextRenewal: status.nextRenewal ?? null,
      lastError: status.lastError ?? null,
      clientCa: this.clientAuth === null ? null : this.clientAuth.ca
    }))
  }
}

function readClientCa ({ ca, caAt }) {
  const pem = readPem(ca, caAt)
  const count = String(pem).split('-----BEGIN CERTIFICATE-----').length - 1
  if (count === 0) throw new UsageError(`cannot use ${quote(ca)} (${caAt}): expected PEM CA certificates`)
  for (const block of String(pem).match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)) {
    parseCertificate(block, caAt, ca)
  }
  return pem
}

// The ACME challenges a process answers while a CA validates: HTTP-01 key
// authorizations by token (the --redirect-http listener), TLS-ALPN-01 certificates by
// the name validated (the prelude, for a ClientHello offering acme-tls/1).
class Challenges {
  constructor () {
    this.http = new Map() // token -> key authorization
    this.alpn = new Map() // name -> secure context
  }

  apply ({ op, type, name, token, keyAuthorization, cert, key }) {
    if (type === 'http-01') {
      if (op === 'add') this.http.set(token, keyAuthorization)
      else this.http.delete(token)
    } else if (type === 'tls-alpn-01') {
      if (op === 'add') this.alpn.set(name, require('tls').createSecureContext({ cert, key }))
      else this.alpn.delete(name)
    }
  }

  // The context to answer a TLS-ALPN-01 validation with, or null: this is a client.
  alpnContext (hello) {
    if (hello === null || !hello.alpn.includes('acme-tls/1') || hello.serverName === null) return null
    return this.alpn.get(hello.serverName) || null
  }
}

// What the certificates a process serves: the latest of each listener that gets its
// own (--tls local|acme), and the challenges; fed by the keeper (tls/keeper.js), in
// this process or, with --workers, the primary's over IPC. Updates:
//   { kind: 'certificate', listener, material: { cert, key } | null, status }
//   { kind: 'challenge', op: 'add' | 'remove', type, name, token, keyAuthorization, cert, key }
class Certificates {
  constructor () {
    this.latest = new Map() // listener name -> { material, status }
    this.live = new Map() // listener name -> its ListenerTls in use
    this.challenges = new Challenges()
  }

  apply (update) {
    if (update.kind === 'challenge') return this.challenges.apply(update)
    // A listener whose new certificate is not there yet (other names, from ACME) keeps
    // serving the one it had.
    const had = this.latest.get(update.listener) || { material: null, status: null }
    const next = { material: update.material || had.material, status: update.status }
    this.latest.set(update.listener, next)
    const live = this.live.get(update.listener)
    if (live !== undefined && live.source !== 'files') live.set(next.material, next.status)
  }

  // The ListenerTls of a listener's config (null: no TLS); a UsageError when a file
  // cannot be used.
  forListener (name, config) {
    if (config === null) return null
    const { material = null, status = null } = this.latest.get(name) || {}
    const listenerTls = new ListenerTls(config, { material, status, challenges: this.challenges })
    return listenerTls
  }

  // The ListenerTls a listener now serves: it gets the certificates to come.
  use (name, listenerTls) {
    if (listenerTls === null) return this.live.delete(name)
    this.live.set(name, listenerTls)
    const latest = this.latest.get(name)
    if (latest !== undefined && listenerTls.source !== 'files') listenerTls.set(latest.material, latest.status)
  }
}

// { ca, caAt, insecure } -> options for tls.connect to a backend.
function loadBackendTls (config) {
  if (!config) return null
  const options = { rejectUnauthorized: !config.insecure }
  if (config.ca) options.ca = readPem(config.ca, config.caAt)
  return options
}

// A listener's TLS material, both kinds: what createBalancer builds listeners with, and
// what the --workers primary reads once to check a new config before the workers get it.
function loadListenerTls (listenerConfig, certificates = new Certificates()) {
  return {
    tls: certificates.forListener(listenerConfig.name, listenerConfig.tls),
    backendTls: loadBackendTls(listenerConfig.backendTls)
  }
}

function oneLine (text) {
  return String(text).split('\n')[0]
}

module.exports = { Certificates, loadListenerTls }
