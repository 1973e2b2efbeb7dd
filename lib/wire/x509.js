'use strict'

// X.509 v3 certificates (RFC 5280) and PKCS#10 certificate requests (RFC 2986), made
// with der.js and signed with crypto.sign: what Node cannot make itself. ECDSA keys
// (P-256 with SHA-256, P-384 with SHA-384) sign; any key Node can export as SPKI is
// certified. Pure but for the signature's randomness.
//
//   certificate({ subject, issuer, serial, notBefore, notAfter, publicKey, signingKey,
//                 ca, names, keyUsage, extendedKeyUsage, authorityKeyId, acmeAuthorization })
//     -> DER
//   certificateRequest({ names, key }) -> DER: a CSR for `names` (the first as its CN)
//   certificateFacts(der) -> { serial, authorityKeyId, notBefore, notAfter }: what
//     Node's X509Certificate does not say (the ACME renewal information's certID)
//   keyIdentifier(publicKey) -> the SHA-1 of the key's bits (RFC 5280 4.2.1.2 (1))
//   toPem(der, label), fromPem(text) -> [DER]

const crypto = require('crypto')
const net = require('net')
const der = require('./der')

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  acmeIdentifier: '1.3.6.1.5.5.7.1.31', // RFC 8737: TLS-ALPN-01's challenge certificate
  extensionRequest: '1.2.840.113549.1.9.14',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  ecdsaWithSha384: '1.2.840.10045.4.3.3'
}

// keyUsage bits (RFC 5280 4.2.1.3).
const KEY_USAGE = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5, cRLSign: 6 }

// The signature algorithm and hash for an ECDSA signing key.
function signatureOf (signingKey) {
  const curve = signingKey.asymmetricKeyDetails && signingKey.asymmetricKeyDetails.namedCurve
  if (signingKey.asymmetricKeyType !== 'ec' || (curve !== 'prime256v1' && curve !== 'secp384r1')) {
    throw new TypeError('certificates are signed with ECDSA P-256 or P-384 keys only')
  }
  return curve === 'prime256v1'
    ? { algorithm: der.sequence(der.oid(OID.ecdsaWithSha256)), hash: 'sha256' }
    : { algorithm: der.sequence(der.oid(OID.ecdsaWithSha384)), hash: 'sha384' }
}

// [{ CN: 'lila local CA' }, { O: 'lila' }] -> a Name: one attribute per RDN, in order.
function name (parts) {
  const rdns = parts.map(part => {
    const [key, value] = Object.entries(part)[0]
    const type = key === 'CN' ? OID.commonName : key === 'O' ? OID.organization : null
    if (type === null) throw new TypeError(`unknown name attribute ${key}`)
    return der.set(der.sequence(der.oid(type), der.utf8String(value)))
  })
  return der.sequence(...rdns)
}

// GeneralNames for subjectAltName: a dNSName [2] per name, an iPAddress [7] per address.
function generalNames (names) {
  return der.sequence(...names.map(n => {
    if (net.isIPv4(n)) return der.contextPrimitive(7, Buffer.from(n.split('.').map(Number)))
    if (net.isIPv6(n)) return der.contextPrimitive(7, ipv6Bytes(n))
    return der.contextPrimitive(2, Buffer.from(n, 'latin1'))
  }))
}

// An IPv6 address's 32 hex digits (for its ip6.arpa name).
const ipv6Hex = address => ipv6Bytes(address).toString('hex')

function ipv6Bytes (address) {
  const [head, tail] = address.split('::')
  const groups = part => part ? part.split(':') : []
  let all = groups(head)
  if (tail !== undefined) all = [...all, ...Array(8 - all.length - groups(tail).length).fill('0'), ...groups(tail)]
  const out = Buffer.alloc(16)
  all.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2))
  return out
}

function extension (id, critical, value) {
  return der.sequence(der.oid(id), critical ? der.boolean(true) : null, der.octetString(value))
}

// The BIT STRING of a SubjectPublicKeyInfo, without its unused-bits byte.
function keyBits (spki) {
  return der.read(spki).children[1].contents.subarray(1)
}

const spkiOf = publicKey => publicKey.export({ type: 'spki', format: 'der' })

function keyIdentifier (publicKey) {
  return crypto.createHash('sha1').update(keyBits(spkiOf(publicKey))).digest()
}

// The extensions a certificate (or a request) carries.
function extensions ({
  ca = false, pathLength = null, names = [], sanCritical = false, keyUsage = null,
  extendedKeyUsage = [], subjectKeyId = null, authorityKeyId = null, acmeAuthorization = null
}) {
  const out = []
  if (ca || keyUsage !== null) {
    const constraints = ca
      ? der.sequence(der.boolean(true), pathLength === null ? null : der.integer(pathLength))
      : der.sequence()
    out.push(extension(OID.basicConstraints, true, constraints))
  }
  if (keyUsage !== null) out.push(extension(OID.keyUsage, true, der.namedBits(keyUsage.map(k => KEY_USAGE[k]))))
  if (extendedKeyUsage.length > 0) {
    out.push(extension(OID.extKeyUsage, false, der.sequence(...extendedKeyUsage.map(k => der.oid(OID[k])))))
  }
  if (subjectKeyId !== null) out.push(extension(OID.subjectKeyIdentifier, false, der.octetString(subjectKeyId)))
  if (authorityKeyId !== null) {
    out.push(extension(OID.authorityKeyIdentifier, false, der.sequence(der.contextPrimitive(0, authorityKeyId))))
  }
  // A certificate with no subject names its holder in subjectAltName only, critical then.
  if (names.length > 0) out.push(extension(OID.subjectAltName, sanCritical, generalNames(names)))
  if (acmeAuthorization !== null) {
    out.push(extension(OID.acmeIdentifier, true, der.octetString(acmeAuthorization)))
  }
  return out
}

// A random positive serial number of 16 bytes (RFC 5280: at most 20; CAs use 64 bits
// of randomness or more).
function randomSerial () {
  const bytes = crypto.randomBytes(16)
  bytes[0] &= 0x7f
  if (bytes[0] === 0) bytes[0] = 1
  return bytes
}

function certificate ({
  subject = [], issuer = subject, serial = randomSerial(), notBefore, notAfter, publicKey, signingKey,
  ca = false, pathLength = null, names = [], keyUsage = null, extendedKeyUsage = [], authorityKeyId = null,
  acmeAuthorization = null
}) {
  const { algorithm, hash } = signatureOf(signingKey)
  const spki = spkiOf(publicKey)
  const subjectKeyId = ca || keyUsage !== null ? keyIdentifier(publicKey) : null
  const exts = extensions({
    ca,
    pathLength,
    names,
    sanCritical: subject.length === 0,
    keyUsage,
    extendedKeyUsage,
    subjectKeyId,
    authorityKeyId,
    acmeAuthorization
  })
  const tbs = der.sequence(
    der.explicit(0, der.integer(2)), // v3
    der.integer(serial),
    algorithm,
    name(issuer),
    der.sequence(der.time(notBefore), der.time(notAfter)),
    name(subject),
    spki,
    der.explicit(3, der.sequence(...exts))
  )
  const signature = crypto.sign(hash, tbs, signingKey)
  return der.sequence(tbs, algorithm, der.bitString(signature))
}

// A PKCS#10 request for `names` with `key` (its private key signs it): the first name
// as the common name, all of them in a subjectAltName extension request.
function certificateRequest ({ names, key }) {
  const { algorithm, hash } = signatureOf(key)
  const publicKey = crypto.createPublicKey(key)
  const first = names[0]
  const subject = first.length <= 64 && !net.isIP(first) ? [{ CN: first }] : []
  const requested = der.sequence(...extensions({ names, sanCritical: subject.length === 0 }))
  const info = der.sequence(
    der.integer(0),
    name(subject),
    spkiOf(publicKey),
    der.implicit(0, der.set(der.sequence(der.oid(OID.extensionRequest), der.set(requested))))
  )
  return der.sequence(info, algorithm, der.bitString(crypto.sign(hash, info, key)))
}

function certificateFacts (certDer) {
  const tbs = der.read(certDer).children[0]
  const fields = tbs.children
  const hasVersion = fields[0].contextNumber === 0
  const at = hasVersion ? 1 : 0
  const validity = fields[at + 3].children
  let authorityKeyId = null
  const extensionsField = fields.find(f => f.contextNumber === 3)
  if (extensionsField !== undefined) {
    for (const ext of extensionsField.children[0].children) {
      if (der.readOid(ext.children[0].contents) !== OID.authorityKeyIdentifier) continue
      const value = der.read(ext.children[ext.children.length - 1].contents)
      const id = value.children.find(c => c.contextNumber === 0)
      if (id !== undefined) authorityKeyId = Buffer.from(id.contents)
    }
  }
  return {
    serial: Buffer.from(fields[at].contents), // as DER has it: a leading zero kept
    authorityKeyId,
    notBefore: der.readTime(validity[0]),
    notAfter: der.readTime(validity[1])
  }
}

function toPem (bytes, label = 'CERTIFICATE') {
  const lines = bytes.toString('base64').match(/.{1,64}/g)
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`
}

// The DER of each PEM block of `label` in `text`, in order.
function fromPem (text, label = 'CERTIFICATE') {
  const re = new RegExp(`-----BEGIN ${label}-----([A-Za-z0-9+/=\\s]+?)-----END ${label}-----`, 'g')
  return [...String(text).matchAll(re)].map(m => Buffer.from(m[1].replace(/\s/g, ''), 'base64'))
}

module.exports = {
  certificate,
  certificateRequest,
  certificateFacts,
  keyIdentifier,
  ipv6Hex,
  toPem,
  fromPem
}
