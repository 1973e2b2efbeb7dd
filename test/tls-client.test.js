'use strict'

// --tls-client-ca (mutual TLS), through the spawned lila with real clients: openssl
// s_client without a certificate, with one the CA signed and with one it did not;
// refused handshakes counted and said (at most once a second); the backend told who
// the client is in X-Client-Cert-* headers lila sets and never takes from the client,
// over HTTP/1.1 and HTTP/2 from the client, to HTTP/1.1 and HTTP/2 backends;
// --tls-client-optional lets the others in, marked; tcp mode verifies and pipes.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawn, execFileSync } = require('child_process')
const {
  spawnLila, httpBackend, tcpBackend, curl, within, statusJson, startLila, captureLog
} = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { tool } = require('./fixtures/tools')

const OPENSSL = tool('openssl')
if (OPENSSL.skip) {
  t.skip(OPENSSL.skip)
  process.exit(0)
}

// A client CA, a client certificate it signed (alice), one it did not (mallory), and
// the server's certificate.
function material (t) {
  const dir = certDir(t)
  const file = name => path.join(dir, name)
  const run = args => execFileSync(OPENSSL.path, args, { stdio: 'ignore' })
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  run(['req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.pem'), '-days', '2', '-subj', '/CN=client CA'])
  run(['req', ...ec, '-keyout', file('alice.key'), '-out', file('alice.csr'), '-subj', '/O=Example, Inc/CN=alice'])
  fs.writeFileSync(file('ext'), 'extendedKeyUsage=clientAuth\n')
  run(['x509', '-req', '-in', file('alice.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial',
    '-out', file('alice.pem'), '-days', '2', '-extfile', file('ext')])
  const mallory = makeCertificate(dir, 'mallory')
  const server = makeCertificate(dir, 'localhost', ['DNS:localhost', 'IP:127.0.0.1'], 'server')
  const serial = execFileSync(OPENSSL.path, ['x509', '-in', file('alice.pem'), '-noout', '-serial'], { encoding: 'utf8' })
    .trim().split('=')[1].toLowerCase()
  const fingerprint = execFileSync(OPENSSL.path, ['x509', '-in', file('alice.pem'), '-noout', '-fingerprint', '-sha256'],
    { encoding: 'utf8' }).trim().split('=')[1].replace(/:/g, '').toLowerCase()
  return {
    ca: file('ca.pem'),
    alice: { cert: file('alice.pem'), key: file('alice.key'), serial, fingerprint },
    mallory,
    server
  }
}

// openssl s_client sending one HTTP/1.1 request: { out, code }.
function sClient (port, m, cert = null) {
  const args = ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost', '-CAfile', m.server.cert,
    '-verify_return_error', '-quiet']
  if (cert !== null) args.push('-cert', cert.cert, '-key', cert.key)
  return within(15000, 'openssl s_client', new Promise(resolve => {
    const child = spawn(OPENSSL.path, args, { stdio: ['pipe', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', chunk => { out += chunk })
    child.stderr.on('data', chunk => { out += chunk })
    child.on('close', code => resolve({ out, code }))
    child.stdin.end('GET /who HTTP/1.1\r\nHost: localhost\r\nX-Client-Cert-Subject: CN=root\r\nConnection: close\r\n\r\n')
  }))
}

const tlsArgs = m => ['--tls-cert', m.server.cert, '--tls-key', m.server.key, '--tls-client-ca', m.ca]

t.test('openssl s_client: refused without a certificate or with one the CA did not sign; served with one it did', async t => {
  const m = material(t)
  const backend = await httpBackend(t, 'mtls')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    ...tlsArgs(m), '--status-port', '0'])
  const none = await sClient(lila.port, m)
  t.notMatch(none.out, /HTTP\/1\.1 200/, 'no certificate: no answer')
  t.match(none.out, /alert certificate required|alert handshake failure/, `refused in the handshake: ${none.out}`)
  await lila.waitForLine(/refused 127\.0\.0\.1:\d+: no client certificate \(--tls-client-ca\)/)
  const wrong = await sClient(lila.port, m, m.mallory)
  t.notMatch(wrong.out, /HTTP\/1\.1 200/, 'a certificate the CA did not sign: no answer')
  const good = await sClient(lila.port, m, m.alice)
  t.match(good.out, /HTTP\/1\.1 200 OK/, 'alice is served')
  t.match(good.out, /\r\n\r\nmtls\n/, 'the backend\'s answer')
  t.equal(backend.requests, 1, 'only alice reached the backend')
  const status = await statusJson(lila)
  t.same(status.listeners[0].refused, { 'client-cert-none': 1, 'client-cert-untrusted': 1 }, 'the two refused handshakes, counted')
  t.match(lila.stderr, /refused 127\.0\.0\.1:\d+ \(DEPTH_ZERO_SELF_SIGNED_CERT\): a client certificate --tls-client-ca did not sign/)
  const [cert] = status.certificates
  t.equal(cert.clientCa, m.ca, 'the status shows the client CA')
})

t.test('refused handshakes are said at most once a second, with how many more', async t => {
  const m = material(t)
  const capture = captureLog('info')
  const { lb } = await startLila(t, ['rr', ':9', '--protocol', 'http', ...tlsArgs(m)], { log: capture.log })
  const [listener] = lb.listeners
  for (let i = 0; i < 5; i++) listener.refusedClient('client-cert-none', `127.0.0.${i + 1}:5000`)
  t.equal(capture.lines.filter(l => /refused/.test(l)).length, 1, 'one line for five in the same second')
  t.same(lb.stats().listeners[0].refused, { 'client-cert-none': 5 }, 'each counted')
})

t.test('the backend is told who the client is, over HTTP/1.1 and HTTP/2, to HTTP/1.1 and HTTP/2 backends', async t => {
  const m = material(t)
  const h1 = await httpBackend(t, 'h1')
  const h2 = await h2Backend(t, 'h2')
  const expected = {
    'x-client-cert-verified': 'SUCCESS',
    'x-client-cert-subject': 'CN=alice,O=Example\\, Inc',
    'x-client-cert-issuer': 'CN=client CA',
    'x-client-cert-serial': m.alice.serial,
    'x-client-cert-fingerprint': m.alice.fingerprint
  }
  for (const [kind, backend, extra] of [['HTTP/1.1 backend', h1, []], ['HTTP/2 backend', h2, ['--backend-protocol', 'h2']]]) {
    const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
      ...tlsArgs(m), ...extra])
    for (const version of ['--http1.1', '--http2']) {
      const res = await curl([version, '--cacert', m.server.cert, '--cert', m.alice.cert, '--key', m.alice.key,
        '-H', 'X-Client-Cert-Subject: CN=root', '-H', 'X-Client-Cert-Verified: SUCCESS, really',
        `https://localhost:${lila.port}/who`])
      t.equal(res.code, 0, `${kind}, curl ${version}: ${res.stderr}`)
      const headers = backend === h1 ? backend.last.headers : backend.last
      for (const [name, value] of Object.entries(expected)) {
        t.equal(headers[name], value, `${kind}, client ${version}: ${name}`)
      }
      if (backend === h1) {
        const subjects = backend.last.rawHeaders.filter((v, i) => i % 2 === 0 && /^x-client-cert-subject$/i.test(v))
        t.equal(subjects.length, 1, 'the client\'s own field did not pass')
      }
    }
    await lila.stop()
  }
})

t.test('--tls-client-optional: the others come in, marked; no subject when there is none', async t => {
  const m = material(t)
  const backend = await httpBackend(t, 'optional')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    ...tlsArgs(m), '--tls-client-optional'])
  const get = cert => curl(['--cacert', m.server.cert, ...(cert ? ['--cert', cert.cert, '--key', cert.key] : []),
    '-H', 'X-Client-Cert-Subject: CN=forged', `https://localhost:${lila.port}/`])
  t.equal((await get(null)).stdout, 'optional\n')
  t.equal(backend.last.headers['x-client-cert-verified'], 'NONE')
  t.equal(backend.last.headers['x-client-cert-subject'], undefined, 'no certificate, no subject (the forged one dropped)')
  t.equal((await get(m.mallory)).stdout, 'optional\n')
  t.equal(backend.last.headers['x-client-cert-verified'], 'FAILED:DEPTH_ZERO_SELF_SIGNED_CERT')
  t.equal(backend.last.headers['x-client-cert-subject'], 'CN=mallory')
  t.equal((await get(m.alice)).stdout, 'optional\n')
  t.equal(backend.last.headers['x-client-cert-verified'], 'SUCCESS')
})

t.test('tcp mode verifies, then pipes the bytes', async t => {
  const m = material(t)
  const backend = await tcpBackend(t, 'tcp-backend')
  const lila = await spawnLila(t, ['rr', backend.address, '--host', '127.0.0.1', '--port', '0', '--check', 'none', ...tlsArgs(m)])
  const good = await sClient(lila.port, m, m.alice)
  t.match(good.out, /tcp-backend\n/, 'the backend\'s greeting, through TLS')
  const none = await sClient(lila.port, m)
  t.notMatch(none.out, /tcp-backend/, 'no certificate: nothing from the backend')
  t.equal(backend.connections, 1, 'only the verified client reached the backend')
})
