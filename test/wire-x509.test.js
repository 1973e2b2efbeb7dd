'use strict'

// lila's own DER (lib/wire/): certificates, CSRs and TLS-ALPN-01 challenge
// certificates as openssl reads and verifies them; the DER reader against what it
// wrote; JOSE signatures as Node verifies them; the ClientHello reader against the
// bytes real clients (openssl s_client, curl) send.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const path = require('path')
const crypto = require('crypto')
const { spawnSync, spawn } = require('child_process')
const der = require('../lib/wire/der')
const x509 = require('../lib/wire/x509')
const jose = require('../lib/wire/jose')
const { readClientHello } = require('../lib/wire/client-hello')
const { within } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')

const OPENSSL = tool('openssl')

function tempDir (t) {
  const dir = tmpDir(t, 'lila-wire-')
  return dir
}

function openssl (args, input) {
  const res = spawnSync(OPENSSL.path, args, { input, encoding: 'utf8' })
  return { code: res.status, out: `${res.stdout}${res.stderr}` }
}

const ecKey = (curve = 'P-256') => crypto.generateKeyPairSync('ec', { namedCurve: curve })

// A CA and a leaf it issued, as local-ca.js makes them.
function makeChain ({ caCurve = 'P-256', names = ['localhost', '127.0.0.1', '::1'] } = {}) {
  const ca = ecKey(caCurve)
  const leaf = ecKey()
  const now = Date.now()
  const caName = [{ CN: 'test CA' }, { O: 'lila tests' }]
  const caDer = x509.certificate({
    subject: caName,
    notBefore: new Date(now - 3600000),
    notAfter: new Date(now + 86400000),
    publicKey: ca.publicKey,
    signingKey: ca.privateKey,
    ca: true,
    pathLength: 0,
    keyUsage: ['digitalSignature', 'keyCertSign', 'cRLSign']
  })
  const leafDer = x509.certificate({
    subject: [{ CN: names[0] }],
    issuer: caName,
    notBefore: new Date(now - 3600000),
    notAfter: new Date(now + 3600000),
    publicKey: leaf.publicKey,
    signingKey: ca.privateKey,
    names,
    keyUsage: ['digitalSignature'],
    extendedKeyUsage: ['serverAuth'],
    authorityKeyId: x509.keyIdentifier(ca.publicKey)
  })
  return { ca, leaf, caDer, leafDer }
}

t.test('DER: integers, OIDs, times, lengths, as X.690 writes them, and read back', async t => {
  t.same(der.integer(0), Buffer.from([2, 1, 0]))
  t.same(der.integer(127), Buffer.from([2, 1, 127]))
  t.same(der.integer(128), Buffer.from([2, 2, 0, 128]), 'a leading zero keeps it positive')
  t.same(der.integer(Buffer.from([0, 0, 5])), Buffer.from([2, 1, 5]), 'leading zero bytes dropped')
  t.same(der.oid('1.2.840.10045.2.1'), Buffer.from('06072a8648ce3d0201', 'hex'))
  t.equal(der.readOid(der.oid('1.3.6.1.5.5.7.1.31').subarray(2)), '1.3.6.1.5.5.7.1.31')
  t.equal(der.readOid(der.oid('2.999.3').subarray(2)), '2.999.3')
  const when = new Date(Date.UTC(2030, 0, 2, 3, 4, 5))
  t.equal(der.time(when).toString('latin1', 2), '300102030405Z', 'UTCTime before 2050')
  t.equal(der.time(new Date(Date.UTC(2050, 0, 1))).toString('latin1', 2), '20500101000000Z', 'GeneralizedTime after')
  t.equal(der.readTime(der.read(der.time(when))).getTime(), when.getTime())
  const long = der.octetString(Buffer.alloc(300))
  t.same(long.subarray(0, 4), Buffer.from([4, 0x82, 1, 44]), 'a long length in its shortest form')
  t.equal(der.read(long).contents.length, 300)
  t.same(der.namedBits([0, 5, 6]), Buffer.from([3, 2, 1, 0x86]), 'key usage bits, trailing zeros dropped')
  t.same(der.set(der.integer(2), der.integer(1)), der.set(der.integer(1), der.integer(2)), 'SET OF sorted')
  const seq = der.read(der.sequence(der.integer(1), der.explicit(0, der.boolean(true))))
  t.equal(seq.children.length, 2)
  t.equal(seq.children[1].contextNumber, 0)
  t.throws(() => der.read(Buffer.from([0x30, 0x80, 0, 0])), /indefinite/, 'indefinite lengths refused')
  t.throws(() => der.read(Buffer.from([4, 0x81, 5, 1, 2, 3, 4, 5])), /shortest/, 'long forms of short lengths refused')
  t.throws(() => der.read(Buffer.from([4, 3, 1])), /truncated/)
  t.throws(() => der.read(Buffer.from([4, 1, 1, 0])), /after the element/)
})

t.test('certificates: a CA and a leaf openssl reads, and verifies one with the other', async t => {
  if (OPENSSL.skip) return t.skip(OPENSSL.skip)
  const dir = tempDir(t)
  for (const caCurve of ['P-256', 'P-384']) {
    const { caDer, leafDer, ca } = makeChain({ caCurve })
    fs.writeFileSync(path.join(dir, 'ca.pem'), x509.toPem(caDer))
    fs.writeFileSync(path.join(dir, 'leaf.pem'), x509.toPem(leafDer))
    const caText = openssl(['x509', '-in', path.join(dir, 'ca.pem'), '-noout', '-text'])
    t.equal(caText.code, 0, `${caCurve}: openssl reads the CA`)
    t.match(caText.out, /Version: 3 \(0x2\)/)
    t.match(caText.out, /Basic Constraints: critical\s+CA:TRUE, pathlen:0/)
    t.match(caText.out, /Key Usage: critical\s+Digital Signature, Certificate Sign, CRL Sign/)
    t.match(caText.out, /Subject: CN = test CA, O = lila tests/)
    t.match(caText.out, caCurve === 'P-256' ? /ecdsa-with-SHA256/ : /ecdsa-with-SHA384/)
    const leafText = openssl(['x509', '-in', path.join(dir, 'leaf.pem'), '-noout', '-text'])
    t.match(leafText.out, /Subject Alternative Name: \s+DNS:localhost, IP Address:127\.0\.0\.1, IP Address:0:0:0:0:0:0:0:1/)
    t.match(leafText.out, /Extended Key Usage: \s+TLS Web Server Authentication/)
    t.match(leafText.out, /Basic Constraints: critical\s+CA:FALSE/)
    const keyId = x509.keyIdentifier(ca.publicKey).toString('hex').toUpperCase().match(/../g).join(':')
    t.match(leafText.out, new RegExp(`Authority Key Identifier: \\s+(keyid:)?${keyId}`), 'AKI is the CA\'s SKI')
    t.match(caText.out, new RegExp(`Subject Key Identifier: \\s+${keyId}`))
    const verified = openssl(['verify', '-CAfile', path.join(dir, 'ca.pem'), path.join(dir, 'leaf.pem')])
    t.equal(verified.code, 0, `${caCurve}: openssl verify: ${verified.out.trim()}`)
    t.equal(openssl(['asn1parse', '-in', path.join(dir, 'leaf.pem'), '-strictpem']).code, 0, 'strict ASN.1')
    // Node agrees.
    const leaf = new crypto.X509Certificate(leafDer)
    t.ok(leaf.checkIssued(new crypto.X509Certificate(caDer)), 'Node: the CA issued it')
    t.ok(leaf.verify(ca.publicKey), 'Node: the CA\'s signature')
    t.ok(leaf.checkHost('localhost') && leaf.checkIP('::1'), 'Node: it is for its names')
  }
  // A leaf that is wrong is refused by openssl: the test can fail.
  const { leafDer } = makeChain()
  fs.writeFileSync(path.join(dir, 'other.pem'), x509.toPem(leafDer))
  t.not(openssl(['verify', '-CAfile', path.join(dir, 'ca.pem'), path.join(dir, 'other.pem')]).code, 0,
    'a leaf another CA issued does not verify')
})

t.test('certificate facts: serial and authority key ID as DER has them (ARI\'s certID)', async t => {
  const { leafDer, ca } = makeChain()
  const facts = x509.certificateFacts(leafDer)
  const node = new crypto.X509Certificate(leafDer)
  t.equal(facts.serial.toString('hex').replace(/^0+/, '').toUpperCase(), node.serialNumber.replace(/^0+/, ''), 'the serial (without leading zeros, as Node prints it)')
  t.same(facts.authorityKeyId, x509.keyIdentifier(ca.publicKey))
  t.equal(facts.notAfter.getTime(), Date.parse(node.validTo))
  t.equal(facts.notBefore.getTime(), Date.parse(node.validFrom))
  // And of a certificate openssl made.
  if (OPENSSL.skip) return
  const dir = tempDir(t)
  const made = spawnSync(OPENSSL.path, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem'), '-days', '2', '-subj', '/CN=x', '-set_serial', '0x80ff'])
  t.equal(made.status, 0)
  const theirs = x509.certificateFacts(x509.fromPem(fs.readFileSync(path.join(dir, 'c.pem')))[0])
  t.same(theirs.serial, Buffer.from('0080ff', 'hex'), 'the serial with its leading zero, as ARI wants it')
  t.ok(theirs.authorityKeyId !== null, 'openssl self-signed certificates name their key')
})

t.test('PKCS#10 requests: openssl verifies the signature and reads the names', async t => {
  if (OPENSSL.skip) return t.skip(OPENSSL.skip)
  const { privateKey } = ecKey()
  const csr = x509.certificateRequest({ names: ['example.com', 'www.example.com', '10.0.0.1', '::1'], key: privateKey })
  const out = openssl(['req', '-noout', '-verify', '-text'], x509.toPem(csr, 'CERTIFICATE REQUEST'))
  t.equal(out.code, 0)
  t.match(out.out, /verify OK/)
  t.match(out.out, /Subject: CN = example\.com/)
  t.match(out.out, /DNS:example\.com, DNS:www\.example\.com, IP Address:10\.0\.0\.1, IP Address:0:0:0:0:0:0:0:1/)
  // An IP address first: no common name, the names critical.
  const ipFirst = x509.certificateRequest({ names: ['127.0.0.1'], key: privateKey })
  const ipOut = openssl(['req', '-noout', '-verify', '-text'], x509.toPem(ipFirst, 'CERTIFICATE REQUEST'))
  t.match(ipOut.out, /verify OK/)
  t.match(ipOut.out, /Subject Alternative Name: critical/)
  // A tampered request does not verify: the test can fail.
  const bad = Buffer.from(csr)
  bad[bad.length - 5] ^= 0xff
  t.notMatch(openssl(['req', '-noout', '-verify'], x509.toPem(bad, 'CERTIFICATE REQUEST')).out, /verify OK/)
})

t.test('TLS-ALPN-01 certificates: the acmeIdentifier extension, critical, holding the digest (RFC 8737)', async t => {
  const { publicKey, privateKey } = ecKey()
  const digest = crypto.createHash('sha256').update('token.thumbprint').digest()
  const certDer = x509.certificate({
    subject: [],
    notBefore: new Date(Date.now() - 1000),
    notAfter: new Date(Date.now() + 86400000),
    publicKey,
    signingKey: privateKey,
    names: ['a.lila.test'],
    acmeAuthorization: digest
  })
  const tbs = der.read(certDer).children[0]
  const exts = tbs.children.find(c => c.contextNumber === 3).children[0].children
  const acme = exts.find(e => der.readOid(e.children[0].contents) === '1.3.6.1.5.5.7.1.31')
  t.ok(acme, 'the extension is there')
  t.same(acme.children[1].contents, Buffer.from([0xff]), 'critical')
  const value = der.read(acme.children[2].contents)
  t.equal(value.tag, der.TAG.OCTET_STRING)
  t.same(value.contents, digest)
  const san = exts.find(e => der.readOid(e.children[0].contents) === '2.5.29.17')
  t.same(san.children[1].contents, Buffer.from([0xff]), 'no subject: subjectAltName critical')
  if (!OPENSSL.skip) {
    const out = openssl(['x509', '-noout', '-text'], x509.toPem(certDer))
    t.match(out.out, /1\.3\.6\.1\.5\.5\.7\.1\.31: critical/)
    t.match(out.out, /DNS:a\.lila\.test/)
  }
})

t.test('JOSE: ES256 JWS Node verifies; the RFC 7638 thumbprint', async t => {
  // RFC 7638 3.1's example is RSA; an EC key's thumbprint is the SHA-256 of its
  // members crv, kty, x, y in that order, without spaces.
  const { publicKey, privateKey } = ecKey()
  const jwk = jose.jwkOf(publicKey)
  t.same(Object.keys(jwk), ['crv', 'kty', 'x', 'y'])
  const expected = crypto.createHash('sha256')
    .update(`{"crv":"P-256","kty":"EC","x":"${jwk.x}","y":"${jwk.y}"}`).digest('base64url')
  t.equal(jose.thumbprint(jwk), expected)
  t.equal(jose.keyAuthorization('tok', jwk), `tok.${expected}`)
  const jws = jose.sign(privateKey, { nonce: 'n1', url: 'https://ca.test/new-order', kid: 'https://ca.test/acct/1' }, { a: 1 })
  const header = JSON.parse(Buffer.from(jws.protected, 'base64url'))
  t.same(header, { alg: 'ES256', nonce: 'n1', url: 'https://ca.test/new-order', kid: 'https://ca.test/acct/1' })
  t.same(JSON.parse(Buffer.from(jws.payload, 'base64url')), { a: 1 })
  const signature = Buffer.from(jws.signature, 'base64url')
  t.equal(signature.length, 64, 'r||s, 32 bytes each')
  t.ok(crypto.verify('sha256', Buffer.from(`${jws.protected}.${jws.payload}`),
    { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature), 'Node verifies it')
  t.equal(jose.sign(privateKey, { nonce: 'n', url: 'u', kid: 'k' }, null).payload, '', 'POST-as-GET: empty payload')
  t.throws(() => jose.jwkOf(crypto.generateKeyPairSync('ed25519').publicKey), /P-256/)
})

// Catch the first bytes a real client sends.
async function captureHello (t, client) {
  const server = net.createServer()
  const got = new Promise(resolve => server.once('connection', socket => {
    let buf = Buffer.alloc(0)
    socket.on('data', chunk => {
      buf = Buffer.concat([buf, chunk])
      if (readClientHello(buf) !== null) {
        resolve(buf)
        socket.destroy()
      }
    })
  }))
  await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const child = client(server.address().port)
  t.teardown(() => child.kill())
  return within(10000, 'a ClientHello', got)
}

t.test('ClientHello: the name and ALPN protocols real clients send', async t => {
  if (OPENSSL.skip) return t.skip(OPENSSL.skip)
  const bytes = await captureHello(t, port => spawn(OPENSSL.path, ['s_client', '-connect', `127.0.0.1:${port}`,
    '-servername', 'A.lila.test', '-alpn', 'acme-tls/1'], { stdio: 'ignore' }))
  t.same(readClientHello(bytes), { serverName: 'a.lila.test', alpn: ['acme-tls/1'] })
  const curlBytes = await captureHello(t, port => spawn('curl', ['-sk', '--max-time', '5', '--resolve',
    `b.lila.test:${port}:127.0.0.1`, `https://b.lila.test:${port}/`], { stdio: 'ignore' }))
  const hello = readClientHello(curlBytes)
  t.equal(hello.serverName, 'b.lila.test')
  t.ok(hello.alpn.includes('http/1.1'), `curl offers ${hello.alpn}`)
  // In pieces: incomplete until the last byte.
  for (let cut = 0; cut < bytes.length; cut += 37) t.equal(readClientHello(bytes.subarray(0, cut)), null)
  // Split over two records, as TLS allows.
  const body = bytes.subarray(5)
  const record = part => Buffer.concat([Buffer.from([22, 3, 1, part.length >> 8, part.length & 0xff]), part])
  const split = Buffer.concat([record(body.subarray(0, 10)), record(body.subarray(10))])
  t.same(readClientHello(split), { serverName: 'a.lila.test', alpn: ['acme-tls/1'] })
  // Not TLS.
  t.throws(() => readClientHello(Buffer.from('GET / HTTP/1.1\r\n')), RangeError)
  // A ClientHello without SNI or ALPN.
  const plain = await captureHello(t, port => spawn(OPENSSL.path, ['s_client', '-connect', `127.0.0.1:${port}`,
    '-noservername'], { stdio: 'ignore' }))
  t.same(readClientHello(plain), { serverName: null, alpn: [] })
})
