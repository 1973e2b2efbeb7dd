'use strict'

// lila's own certificate authority (--tls local), for HTTPS on a developer's machine:
// made once in the state folder (local/ca.pem, local/ca.key) and used again on every
// start, so that a browser or a system told to trust it once goes on trusting it. It
// issues short-lived leaf certificates for the names a listener serves; lila never
// installs it anywhere: it says where it is and how to trust it (trustLines).

const crypto = require('crypto')
const net = require('net')
const path = require('path')
const x509 = require('../wire/x509')
const { RuntimeError } = require('../errors')

const CA_NAME = [{ CN: 'lila local CA' }, { O: 'lila' }]
const CA_YEARS = 10
const BACKDATE_MS = 60 * 60 * 1000 // a clock a little behind still accepts a new certificate

class LocalCa {
  // The CA in `state` (a StateFolder), made now if there is none.
  static open (state, { now = Date.now } = {}) {
    const dir = state.folder('local')
    const certFile = path.join(dir, 'ca.pem')
    const keyFile = path.join(dir, 'ca.key')
    const certPem = state.read(certFile)
    const keyPem = state.read(keyFile)
    if (certPem !== null && keyPem !== null) {
      let ca
      try {
        ca = new LocalCa(certFile, certPem, crypto.createPrivateKey(keyPem), false)
      } catch {
        throw new RuntimeError(`cannot use the local CA in ${JSON.stringify(dir)}: ca.pem and ca.key are not a ` +
          'certificate and its key; move them away and lila makes a new CA')
      }
      return ca
    }
    const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const t = now()
    const der = x509.certificate({
      subject: CA_NAME,
      notBefore: new Date(t - BACKDATE_MS),
      notAfter: new Date(t + CA_YEARS * 365.25 * 86400000),
      publicKey,
      signingKey: privateKey,
      ca: true,
      pathLength: 0,
      keyUsage: ['digitalSignature', 'keyCertSign', 'cRLSign']
    })
    state.write(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { secret: true })
    state.write(certFile, x509.toPem(der))
    return new LocalCa(certFile, x509.toPem(der), privateKey, true)
  }

  constructor (file, certPem, key, made) {
    this.file = file
    this.certPem = String(certPem)
    this.x509 = new crypto.X509Certificate(certPem)
    if (!this.x509.checkPrivateKey(key)) throw new Error('key mismatch')
    this.key = key
    this.made = made // made by this start
    this.keyId = x509.keyIdentifier(this.x509.publicKey)
    this.fingerprint = this.x509.fingerprint256 // AB:CD:..., as browsers show it
    // What Chromium's --ignore-certificate-errors-spki-list takes: the SHA-256 of the
    // public key, base64.
    const spki = this.x509.publicKey.export({ type: 'spki', format: 'der' })
    this.spkiHash = crypto.createHash('sha256').update(spki).digest('base64')
  }

  // A leaf certificate for `names` (DNS names and IP addresses), valid `lifetime` ms
  // from now: { cert (PEM: the leaf, then the CA), key (PEM) }.
  issue (names, lifetime, now = Date.now()) {
    const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const first = names.find(n => net.isIP(n) === 0 && n.length <= 64)
    const der = x509.certificate({
      subject: first === undefined ? [] : [{ CN: first }],
      issuer: CA_NAME,
      notBefore: new Date(now - Math.min(BACKDATE_MS, lifetime)),
      notAfter: new Date(now + lifetime),
      publicKey,
      signingKey: this.key,
      names,
      keyUsage: ['digitalSignature'],
      extendedKeyUsage: ['serverAuth'],
      authorityKeyId: this.keyId
    })
    return { cert: x509.toPem(der) + this.certPem, key: privateKey.export({ type: 'pkcs8', format: 'pem' }) }
  }

  // What lila says at start: where the CA is, its fingerprint, and how to trust it.
  trustLines () {
    const file = JSON.stringify(this.file).slice(1, -1)
    const quoted = /[\s'"$\\]/.test(this.file) ? `'${this.file.replace(/'/g, "'\\''")}'` : file
    return [
      `local CA ${quoted}${this.made ? ' (made now)' : ''}, SHA-256 fingerprint ${this.fingerprint}`,
      `trust it: curl --cacert ${quoted} https://localhost:PORT/`,
      `trust it: Node.js NODE_EXTRA_CA_CERTS=${quoted}`,
      `trust it: Chromium, Chrome --ignore-certificate-errors-spki-list=${this.spkiHash}`,
      'trust it: Firefox: Settings, Privacy & Security, Certificates, View Certificates, Authorities, Import',
      `trust it system-wide: Debian, Ubuntu: sudo cp ${quoted} /usr/local/share/ca-certificates/lila-local-ca.crt` +
        ' && sudo update-ca-certificates',
      'trust it system-wide: macOS: sudo security add-trusted-cert -d -r trustRoot ' +
        `-k /Library/Keychains/System.keychain ${quoted}`
    ]
  }
}

module.exports = { LocalCa }
