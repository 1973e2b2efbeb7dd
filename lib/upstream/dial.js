'use strict'

const net = require('net')
const { reasonOf } = require('../errors')

// A connection to a backend: plain TCP, or TLS with --backend-tls (`tlsOptions` from
// tls.js loadBackendTls; null for plain TCP). The certificate is checked against the
// name the backend was given by (and sent as SNI), or its IP address for an IP literal.
// Callers wait for readyEvent(socket): the TCP connect, or for TLS the end of the
// handshake, so that a backend whose certificate is refused fails like one that
// refuses the connect, before any byte of the client's was sent, and is retried.
// `preface` (a PROXY protocol header) goes first, in the clear, before any TLS; then a
// failed connect may be reported twice (by the TCP socket and by TLS over it): callers
// ignore the events of a socket they are done with.
// A Unix socket backend (`backend.path`) is dialled by its path, never with TLS (the
// config refuses it).
// `onread` ({ buffer, callback }, net.Socket's option): a plain socket reads into
// `buffer` and hands what it read to `callback` (`this` is the socket) instead of
// emitting 'data'; ignored with TLS, which reads through its own socket.
function dial (backend, tlsOptions, { allowHalfOpen = false, preface = null, onread = undefined } = {}) {
  if (backend.path !== null && backend.path !== undefined) {
    const socket = net.connect({ path: backend.path, allowHalfOpen, onread })
    if (preface !== null) socket.write(preface)
    return socket
  }
  const plain = tlsOptions === null
  const raw = plain || preface !== null
    ? net.connect({
      host: backend.host, port: backend.port, allowHalfOpen, noDelay: true, onread: plain ? onread : undefined
    })
    : null
  if (preface !== null) raw.write(preface) // sent as soon as the connect completes
  if (tlsOptions === null) return raw
  const socket = require('tls').connect({
    ...(raw === null ? { port: backend.port } : { socket: raw }),
    host: backend.host, // to connect to, or (with a socket) to check the certificate against
    servername: backend.name || undefined, // SNI takes names only
    allowHalfOpen,
    ...tlsOptions
  })
  if (raw === null) socket.setNoDelay(true)
  return socket
}

function readyEvent (socket) {
  return socket.encrypted ? 'secureConnect' : 'connect'
}

// A reset where a reset can be sent: a TLS socket has no TCP handle of its own to reset.
function resetOrDestroy (socket) {
  if (socket.encrypted) socket.destroy()
  else socket.resetAndDestroy()
}

// Words for what went wrong on a backend connection, with the fix when it is a setting:
// the one home for TLS failures, so the start-up table, the probes, the logs and the
// 502s say the same. Anything else is reasonOf's. `tlsOptions` as dial took them.
const NOT_TLS = 'not speaking TLS (is --backend-tls right?)'
const TLS_FAILURES = {
  DEPTH_ZERO_SELF_SIGNED_CERT: untrusted('self-signed'),
  SELF_SIGNED_CERT_IN_CHAIN: untrusted('self-signed'),
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: untrusted('unknown issuer'),
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: untrusted('unknown issuer'),
  UNABLE_TO_GET_ISSUER_CERT: untrusted('unknown issuer'),
  ERR_TLS_CERT_ALTNAME_INVALID: notForThisName,
  CERT_HAS_EXPIRED: () => 'certificate expired',
  CERT_NOT_YET_VALID: () => 'certificate not valid yet (is the clock right?)',
  ERR_SSL_WRONG_VERSION_NUMBER: () => NOT_TLS,
  ERR_SSL_PACKET_LENGTH_TOO_LONG: () => NOT_TLS,
  // The same, found by a write made before the handshake ended (an HTTP probe's).
  EPROTO: err => /wrong version number|packet length too long/.test(err.message) ? NOT_TLS : reasonOf(err),
  // Node's words for a connection closed before the handshake ended: what a plain
  // server does with a ClientHello it cannot read (a TLS one would send an alert).
  ECONNRESET: err => /before secure TLS connection/.test(err.message)
    ? 'closed the connection during the TLS handshake: not speaking TLS? (is --backend-tls right?)'
    : reasonOf(err)
}

function backendReason (err, tlsOptions = null) {
  if (tlsOptions === null || !err || !Object.hasOwn(TLS_FAILURES, err.code)) return reasonOf(err)
  return TLS_FAILURES[err.code](err, tlsOptions)
}

// Given --backend-tls-ca, that file is what lacks the certificate (or its CA):
// --backend-tls-insecure contradicts it.
function untrusted (why) {
  return (_, { ca }) => ca
    ? `certificate not trusted (${why}, not vouched for by --backend-tls-ca)`
    : `certificate not trusted (${why}): use --backend-tls-ca FILE or --backend-tls-insecure`
}

// The name checked is the one the backend was given by, or its IP address (see dial);
// lila has no setting for another, so the fix is a backend name the certificate covers.
function notForThisName (err) {
  const names = certificateNames(err.cert)
  const shown = names.length > 3 ? [...names.slice(0, 3), `${names.length - 3} more`] : names
  const covers = shown.length > 0 ? ` (it is for ${shown.join(', ')})` : ''
  return `certificate not valid for ${err.host}${covers}: ` +
    'give the backend by a name it covers, or use --backend-tls-insecure'
}

function certificateNames (cert) {
  if (!cert) return []
  const names = String(cert.subjectaltname || '').split(', ')
    .filter(n => n.startsWith('DNS:') || n.startsWith('IP Address:'))
    .map(n => n.slice(n.indexOf(':') + 1))
  if (names.length > 0) return names
  return cert.subject && cert.subject.CN ? [String(cert.subject.CN)] : []
}

// A connect timeout fires in the event loop's timers phase, which runs before the poll
// phase delivers the connects that completed meanwhile: on a loop running late (1,200
// connects at once on a busy machine), one the kernel finished long ago would be called
// timed out. So the verdict waits until after that poll (setImmediate runs after it),
// and `fail` runs only if `stillConnecting()` still says so then.
function connectTimedOut (stillConnecting, fail) {
  setImmediate(() => { if (stillConnecting()) fail() })
}

module.exports = { dial, readyEvent, resetOrDestroy, backendReason, connectTimedOut }
