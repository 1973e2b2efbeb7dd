'use strict'

// The ACME client (lib/tls/acme.js) against a stub ACME server over real HTTPS, for
// what Pebble does not do: renewal information (ARI, RFC 9773) with its certificate
// ID, a problem document with Retry-After (a rate limit) in one line, and a badNonce
// tried again with the nonce it came with. Every POST is checked as a server would: a
// JWS whose signature verifies with the account's key.

const t = require('tap')
const fs = require('fs')
const https = require('https')
const crypto = require('crypto')
const { execFileSync } = require('child_process')
const { AcmeClient, certId } = require('../lib/tls/acme')
const { AcmeError } = require('../lib/errors')
const { listenOn } = require('./fixtures/helpers')
const { tool } = require('./fixtures/tools')
const { certDir, makeCertificate } = require('./fixtures/certs')

const openssl = tool('openssl')
if (openssl.path === null) {
  t.skip(openssl.skip)
  process.exit(0)
}

// A stub: `routes[path](req, body, jws)` -> { status, headers, body }.
async function stubServer (t, routes) {
  const { cert, key, pem } = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const seen = []
  let nonce = 0
  const server = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (req, res) => {
    let body = ''
    req.on('data', chunk => { body += chunk })
    req.on('end', () => {
      const path = req.url
      seen.push(`${req.method} ${path}`)
      const route = routes[path] || routes[path.replace(/\/[^/]+$/, '/*')]
      const answer = route ? route(req, body, body ? JSON.parse(body) : null) : { status: 404, body: {} }
      res.writeHead(answer.status, { 'replay-nonce': `n${++nonce}`, 'content-type': 'application/json', ...answer.headers })
      res.end(typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body))
    })
  })
  const port = await listenOn(t, server)
  return { base: `https://127.0.0.1:${port}`, ca: String(pem), seen }
}

// What a server checks of a JWS: the signature, with the key the header names.
function verifyJws (jws, jwk) {
  const header = JSON.parse(Buffer.from(jws.protected, 'base64url'))
  const key = crypto.createPublicKey({ key: jwk || header.jwk, format: 'jwk' })
  const ok = crypto.verify('sha256', Buffer.from(`${jws.protected}.${jws.payload}`),
    { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(jws.signature, 'base64url'))
  return { ok, header, payload: jws.payload === '' ? null : JSON.parse(Buffer.from(jws.payload, 'base64url')) }
}

const accountKey = () => crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey

t.test('ARI: the renewal window of a certificate, asked for by its certID', async t => {
  const dir = certDir(t)
  const { cert } = makeCertificate(dir, 'ari.test')
  const pem = fs.readFileSync(cert)
  // The certID by openssl's reading: base64url(AKI keyid) "." base64url(serial DER bytes).
  const text = execFileSync('openssl', ['x509', '-in', cert, '-noout', '-serial', '-ext', 'authorityKeyIdentifier'], { encoding: 'utf8' })
  const serialHex = /serial=([0-9A-F]+)/.exec(text)[1]
  const aki = /([0-9A-F]{2}(?::[0-9A-F]{2}){19})/.exec(text)[1].replace(/:/g, '')
  const serialBytes = Buffer.from(serialHex.length % 2 ? `0${serialHex}` : serialHex, 'hex')
  const der = serialBytes[0] & 0x80 ? Buffer.concat([Buffer.from([0]), serialBytes]) : serialBytes
  const expected = `${Buffer.from(aki, 'hex').toString('base64url')}.${der.toString('base64url')}`
  const der64 = new crypto.X509Certificate(pem).raw
  t.equal(certId(der64), expected, 'certID as RFC 9773 4.1 makes it')

  const start = new Date(Date.now() + 3600000).toISOString()
  const end = new Date(Date.now() + 7200000).toISOString()
  const stub = await stubServer(t, {
    '/dir': () => ({ status: 200, body: { newNonce: `${stub.base}/nonce`, newAccount: `${stub.base}/acct`, newOrder: `${stub.base}/order`, renewalInfo: `${stub.base}/ari/` } }),
    '/ari/*': () => ({ status: 200, headers: { 'retry-after': '21600' }, body: { suggestedWindow: { start, end } } })
  })
  const client = new AcmeClient({ directoryUrl: `${stub.base}/dir`, ca: stub.ca, accountKey: accountKey() })
  t.teardown(() => client.close())
  const info = await client.renewalInfo(der64)
  t.same(info, { start: Date.parse(start), end: Date.parse(end), retryAfter: 21600000 })
  t.ok(stub.seen.includes(`GET /ari/${expected}`), 'asked at renewalInfo/certID')

  const none = await stubServer(t, {
    '/dir': () => ({ status: 200, body: { newNonce: 'x', newAccount: 'x', newOrder: 'x' } })
  })
  const plain = new AcmeClient({ directoryUrl: `${none.base}/dir`, ca: none.ca, accountKey: accountKey() })
  t.teardown(() => plain.close())
  t.equal(await plain.renewalInfo(der64), null, 'no renewalInfo in the directory: none')
})

t.test('a problem document is one line saying what the server answered; badNonce is tried again', async t => {
  const key = accountKey()
  let badNonces = 0
  const stub = await stubServer(t, {
    '/dir': () => ({ status: 200, body: { newNonce: `${stub.base}/nonce`, newAccount: `${stub.base}/acct`, newOrder: `${stub.base}/order` } }),
    '/nonce': () => ({ status: 200, body: '' }),
    '/acct': (req, body, jws) => {
      const { ok, header, payload } = verifyJws(jws)
      if (!ok) return { status: 400, body: { type: 'urn:ietf:params:acme:error:malformed', detail: 'bad signature' } }
      if (header.nonce === 'n1' && badNonces++ === 0) {
        return { status: 400, body: { type: 'urn:ietf:params:acme:error:badNonce', detail: 'stale' } }
      }
      t.same(payload, { termsOfServiceAgreed: true, contact: ['mailto:ops@lila.test'] })
      return { status: 201, headers: { location: `${stub.base}/acct/7` }, body: { status: 'valid' } }
    },
    '/order': (req, body, jws) => {
      const { ok, header } = verifyJws(jws, key.export({ format: 'jwk' }))
      t.ok(ok, 'the order is signed by the account key')
      t.equal(header.kid, `${stub.base}/acct/7`, 'and names the account')
      return {
        status: 429,
        headers: { 'retry-after': '3600' },
        body: { type: 'urn:ietf:params:acme:error:rateLimited', detail: 'too many certificates\n(5) already issued for "a.test"' }
      }
    }
  })
  const client = new AcmeClient({ directoryUrl: `${stub.base}/dir`, ca: stub.ca, accountKey: key, email: 'ops@lila.test' })
  t.teardown(() => client.close())
  t.equal(await client.account(), `${stub.base}/acct/7`, 'the account, after one badNonce tried again')
  t.equal(badNonces, 1, 'one badNonce')
  t.equal(stub.seen.filter(r => r === 'POST /acct').length, 2, 'then the request again, with the nonce it brought')
  const err = await client.post(`${stub.base}/order`, { identifiers: [] }).catch(e => e)
  t.ok(err instanceof AcmeError)
  t.equal(err.message, 'the ACME server answered 429 rateLimited: too many certificates (5) already issued for "a.test"')
  t.equal(err.retryAfter, 3600000, 'Retry-After kept, in ms')
  t.equal(err.type, 'urn:ietf:params:acme:error:rateLimited')

  const unreachable = new AcmeClient({ directoryUrl: 'https://127.0.0.1:1/dir', accountKey: key })
  t.teardown(() => unreachable.close())
  const down = await unreachable.directory().catch(e => e)
  t.equal(down.message, 'cannot reach the ACME server at https://127.0.0.1:1: connection refused')
})
