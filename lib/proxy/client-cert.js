'use strict'

// Mutual TLS (--tls-client-ca): what the handshake verified about a client's
// certificate, worked out once per connection by the prelude and kept on the socket,
// and the headers that tell a backend (header-rules.js sets them; a client's own
// fields of these names never pass):
//   X-Client-Cert-Verified     SUCCESS, NONE (no certificate) or FAILED:REASON (only
//                              with --tls-client-optional; else such clients are refused)
//   X-Client-Cert-Subject      the subject, RFC 4514 (CN=alice,O=Example)
//   X-Client-Cert-Issuer       the issuer, the same way
//   X-Client-Cert-Serial       the serial number, hex
//   X-Client-Cert-Fingerprint  SHA-256 of the certificate, hex
// The last four only when there is a certificate (a verified one, or with
// --tls-client-optional any).

const VERDICT = Symbol('lila.clientCert')
const NO_CERT = Object.freeze({ verified: 'NONE', subject: '', issuer: '', serial: '', fingerprint: '' })

const HEADERS = [
  ['X-Client-Cert-Verified', 'verified'],
  ['X-Client-Cert-Subject', 'subject'],
  ['X-Client-Cert-Issuer', 'issuer'],
  ['X-Client-Cert-Serial', 'serial'],
  ['X-Client-Cert-Fingerprint', 'fingerprint']
]

// The TLSSocket after its handshake, asked for a certificate ->
// { verified, subject, issuer, serial, fingerprint, refused }: `refused` null, or why a
// client without --tls-client-optional is refused (edge/stats.js's reasons), with the
// verification's code, for the log.
function verdictOf (socket) {
  const cert = socket.getPeerX509Certificate()
  if (cert === undefined) return { ...NO_CERT, refused: { reason: 'client-cert-none', code: null } }
  // Node's own server reads the verification this way (tls.Server's onServerSocketSecure).
  const error = socket._handle && socket._handle.verifyError ? socket._handle.verifyError() : null
  const code = error ? error.code || 'UNKNOWN' : null
  return {
    verified: code === null ? 'SUCCESS' : `FAILED:${code}`,
    subject: distinguishedName(cert.subject),
    issuer: distinguishedName(cert.issuer),
    serial: cert.serialNumber.toLowerCase(),
    fingerprint: cert.fingerprint256.replace(/:/g, '').toLowerCase(),
    refused: code === null ? null : { reason: 'client-cert-untrusted', code }
  }
}

// Node's "CN=alice\nO=Example\, Inc" (one attribute a line, in the certificate's
// order, specials already escaped) -> RFC 4514's "O=Example\, Inc,CN=alice" (the last
// first), with anything outside printable ASCII escaped as \XX so it fits a header.
function distinguishedName (text) {
  if (!text) return ''
  return text.split('\n').reverse().map(escapeValue).join(',')
}

function escapeValue (text) {
  let out = ''
  for (const byte of Buffer.from(text, 'utf8')) {
    const printable = byte >= 0x20 && byte < 0x7f
    out += printable ? String.fromCharCode(byte) : `\\${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

function setClientCert (socket, verdict) {
  socket[VERDICT] = verdict
}

// What the prelude found, or null (not asked for a certificate).
function clientCertOf (socket) {
  return socket === null || socket === undefined ? null : socket[VERDICT] || null
}

module.exports = { HEADERS, NO_CERT, verdictOf, setClientCert, clientCertOf }
