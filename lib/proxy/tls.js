'use strict'

// TLS material, read from files: the certificates a listener presents (TLS
// termination) and the trust it places in backends (--backend-tls). Read at start and
// again on every reload, so renewed certificates are picked up by SIGHUP. A file that
// cannot be read or used is a UsageError naming the file and the setting it came from.

const fs = require('fs')
const tls = require('tls')
const { X509Certificate } = require('crypto')
const { UsageError } = require('../errors')

const quote = value => JSON.stringify(String(value))
const FILE_ERRORS = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'it is a folder' }

function readPem (file, at) {
  try {
    return fs.readFileSync(file)
  } catch (err) {
    const reason = FILE_ERRORS[err.code] || err.code || err.message
    throw new UsageError(`cannot read ${quote(file)} (${at}): ${reason}`)
  }
}

// The names a certificate is for: its DNS subject alternative names, or its common
// name when it has none. Lower case; wildcards ("*.example.com") as written.
function certificateNames (pem, at, file) {
  let x509
  try {
    x509 = new X509Certificate(pem)
  } catch (err) {
    throw new UsageError(`cannot use ${quote(file)} (${at}): not a PEM certificate`)
  }
  const names = (x509.subjectAltName || '').split(', ')
    .filter(n => n.startsWith('DNS:'))
    .map(n => n.slice(4).toLowerCase())
  if (names.length > 0) return names
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x509.subject || '')
  return cn ? [cn[1].toLowerCase()] : []
}

// { certificates: [{ cert, key, certAt, keyAt }] } -> { context, SNICallback, names }
// The first certificate is the default (clients that send no name, or an unknown
// one); the others are chosen by the name the client asks for (SNI): an exact name
// first, then a wildcard one level up.
function loadTls (config) {
  if (!config) return null
  const exact = new Map()
  const wildcard = new Map()
  let context = null
  const names = []
  for (const { cert, key, certAt, keyAt } of config.certificates) {
    const certPem = readPem(cert, certAt)
    const keyPem = readPem(key, keyAt)
    const certNames = certificateNames(certPem, certAt, cert)
    let ctx
    try {
      ctx = tls.createSecureContext({ cert: certPem, key: keyPem })
    } catch (err) {
      if (/key values mismatch/.test(err.message)) {
        throw new UsageError(`certificate ${quote(cert)} (${certAt}) and key ${quote(key)} (${keyAt}) do not match`)
      }
      const reason = oneLine(err.message)
      throw new UsageError(`cannot use certificate ${quote(cert)} with key ${quote(key)} (${certAt}): ${reason}`)
    }
    if (context === null) context = ctx
    for (const name of certNames) {
      const map = name.startsWith('*.') ? wildcard : exact
      if (!map.has(name)) map.set(name, ctx)
    }
    names.push(certNames)
  }
  const SNICallback = (servername, done) => {
    const name = String(servername).toLowerCase()
    const dot = name.indexOf('.')
    done(null, exact.get(name) || (dot === -1 ? undefined : wildcard.get(`*${name.slice(dot)}`)) || context)
  }
  return { context, SNICallback, names }
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
function loadListenerTls (listenerConfig) {
  return { tls: loadTls(listenerConfig.tls), backendTls: loadBackendTls(listenerConfig.backendTls) }
}

function oneLine (text) {
  return String(text).split('\n')[0]
}

module.exports = { loadTls, loadBackendTls, loadListenerTls }
