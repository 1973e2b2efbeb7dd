'use strict'

// TLS: termination in tcp and http mode with curl as the client, certificates chosen by
// SNI, certificates read again on SIGHUP, the PROXY header before the handshake, and
// TLS to backends (verified, refused, or not verified on request; what went wrong said
// in words, with the fix, at start-up and in the 502).

const t = require('tap')
const fs = require('fs')
const net = require('net')
const tls = require('tls')
const path = require('path')
const https = require('https')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { httpBackend, tcpBackend, spawnLila, runLila, listenOn, within, request, curl } = require('./fixtures/helpers')
const { formatProxyHeader } = require('../lib/wire/proxy-protocol')
const { startPrelude } = require('../lib/proxy/prelude')
const { clientAddress } = require('../lib/proxy/origin')
const { silentLogger } = require('../lib/log')
const { backendReason } = require('../lib/upstream/dial')

const base = ['--host', '127.0.0.1', '--port', '0', '--check', 'none']

// curl https://NAME:PORT/PATH, NAME resolved to 127.0.0.1, trusting `ca`.
const curlTo = (name, port, ca, urlPath = '/') => curl(['--cacert', ca, '--resolve', `${name}:${port}:127.0.0.1`, `https://${name}:${port}${urlPath}`])

// The certificate a TLS server presents for `servername`: its common name and
// fingerprint. Resolves once the handshake is done; the socket stays open.
function handshake (port, servername, ca) {
  return within(5000, `a TLS handshake for ${servername}`, new Promise((resolve, reject) => {
    const socket = tls.connect({ port, host: '127.0.0.1', servername, ca, rejectUnauthorized: false }, () => {
      const cert = socket.getPeerCertificate()
      resolve({ socket, cn: cert.subject.CN, fingerprint: cert.fingerprint256 })
    })
    socket.on('error', reject)
  }))
}

t.test('http mode: curl through TLS; the backend is told the request came over https', async t => {
  const dir = certDir(t)
  const a = makeCertificate(dir, 'a.test')
  const backend = await httpBackend(t, 'h', (req, res) => res.end(`proto=${req.headers['x-forwarded-proto']}\n`))
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--protocol', 'http', '--tls-cert', a.cert, '--tls-key', a.key])
  const result = await curlTo('a.test', lila.port, a.cert)
  t.equal(result.stderr, '')
  t.equal(result.stdout, 'proto=https\n')
  const plain = await request(lila.port)
  t.ok(plain.error, 'plain HTTP to a TLS port gets nowhere')
  const wrong = await curl(['--resolve', `a.test:${lila.port}:127.0.0.1`, `https://a.test:${lila.port}/`])
  t.not(wrong.code, 0, 'curl refuses a certificate it was not told to trust')
})

t.test('tcp mode: TLS is taken off, the backend reads plain bytes', async t => {
  const dir = certDir(t)
  const a = makeCertificate(dir, 'a.test')
  const backend = await httpBackend(t, 'h', (req, res) => res.end(`plain, proto=${req.headers['x-forwarded-proto']}\n`))
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--tls-cert', a.cert, '--tls-key', a.key])
  const result = await curlTo('a.test', lila.port, a.cert)
  t.equal(result.stdout, 'plain, proto=undefined\n', 'tcp mode adds nothing')

  // Half-close over TLS: the client ends its side and still reads the whole answer.
  const echo = await tcpBackend(t, 'echo', socket => socket.pipe(socket))
  const lila2 = await spawnLila(t, ['rr', echo.address, ...base, '--tls-cert', a.cert, '--tls-key', a.key])
  const socket = tls.connect({ port: lila2.port, host: '127.0.0.1', servername: 'a.test', ca: a.pem, allowHalfOpen: true })
  const got = []
  socket.on('data', chunk => got.push(chunk))
  socket.end('ping over tls')
  await within(5000, 'the echo', new Promise(resolve => socket.on('close', resolve)))
  t.equal(Buffer.concat(got).toString(), 'ping over tls')
})

t.test('SNI: several certificates from the config file; reloaded on SIGHUP', async t => {
  const dir = certDir(t)
  const a = makeCertificate(dir, 'a.test', ['DNS:a.test', 'DNS:*.wild.test'])
  const b = makeCertificate(dir, 'b.test')
  const backend = await httpBackend(t, 'h', (req, res) => res.end(`${req.headers.host}\n`))
  const file = path.join(dir, 'lila.json')
  const config = {
    check: 'none',
    listeners: [{ name: 'web', host: '127.0.0.1', port: 0, protocol: 'http', 'tls-cert': 'a.test.pem', 'tls-key': 'a.test.key', certificates: [{ cert: 'b.test.pem', key: 'b.test.key' }], backends: [backend.address] }]
  }
  fs.writeFileSync(file, JSON.stringify(config))
  const lila = await spawnLila(t, ['--config', file])
  t.match(lila.listening, /^lila: web: listening on 127\.0\.0\.1:\d+ \(http, random, 1 backend\)$/)

  t.equal((await curlTo('a.test', lila.port, a.cert)).stdout, `a.test:${lila.port}\n`)
  t.equal((await curlTo('b.test', lila.port, b.cert)).stdout, `b.test:${lila.port}\n`, 'SNI picks b\'s certificate')
  t.equal((await curlTo('x.wild.test', lila.port, a.cert)).stdout, `x.wild.test:${lila.port}\n`, 'a wildcard name')
  const unknown = await handshake(lila.port, 'other.test', a.pem)
  t.equal(unknown.cn, 'a.test', 'an unknown name gets the default (first) certificate')
  unknown.socket.destroy()

  // Renew b's certificate in place; a connection made before goes on.
  const before = await handshake(lila.port, 'b.test', b.pem)
  const renewed = makeCertificate(dir, 'b.test')
  t.not(renewed.pem.toString(), b.pem.toString())
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(1 change\)/)
  t.match(lila.stderr, /reload: web: 2 certificates read again/)
  const after = await handshake(lila.port, 'b.test', renewed.pem)
  t.not(after.fingerprint, before.fingerprint, 'new handshakes get the renewed certificate')
  after.socket.destroy()
  before.socket.write('GET / HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n')
  const answer = await within(5000, 'an answer on the old connection', new Promise(resolve => {
    let text = ''
    before.socket.on('data', chunk => { text += chunk })
    before.socket.on('close', () => resolve(text))
  }))
  t.match(answer, /^HTTP\/1\.1 200 OK[\s\S]*b\.test\n$/, 'the connection from before the reload still works')

  // A certificate that cannot be used is refused; the running ones stay.
  fs.writeFileSync(renewed.cert, 'not a certificate')
  lila.child.kill('SIGHUP')
  const refused = await lila.waitForLine(/reload refused: (.*); keeping the running config$/)
  t.equal(refused[1], `cannot use ${JSON.stringify(renewed.cert)} (${file}: listeners[0].certificates[0].cert): not a PEM certificate`)
  const still = await handshake(lila.port, 'b.test', renewed.pem)
  t.equal(still.fingerprint, after.fingerprint, 'still the certificate from the last good reload')
  still.socket.destroy()
  t.equal((await lila.stop()).code, 0)
})

t.test('--accept-proxy with TLS: the PROXY header comes first, in the clear', async t => {
  const dir = certDir(t)
  const a = makeCertificate(dir, 'a.test')
  const backend = await httpBackend(t, 'h', (req, res) => res.end(`${req.headers['x-forwarded-for']} ${req.headers['x-forwarded-proto']}\n`))
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--protocol', 'http', '--accept-proxy', '--tls-cert', a.cert, '--tls-key', a.key])
  const raw = net.connect({ port: lila.port, host: '127.0.0.1' })
  await within(5000, 'connect', new Promise(resolve => raw.once('connect', resolve)))
  raw.write(formatProxyHeader('v2', { source: { address: '198.51.100.23', port: 4000 }, destination: { address: '198.51.100.1', port: 443 } }))
  const socket = tls.connect({ socket: raw, servername: 'a.test', ca: a.pem })
  socket.end('GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n')
  let text = ''
  socket.on('data', chunk => { text += chunk })
  await within(5000, 'the answer', new Promise(resolve => socket.on('close', resolve)))
  t.match(text, /\r\n\r\n198\.51\.100\.23 https\n$/)
})

t.test('TLS to backends: verified against --backend-tls-ca, refused without, or not verified', async t => {
  const dir = certDir(t)
  const good = makeCertificate(dir, 'backend.test', ['DNS:backend.test', 'IP:127.0.0.1'])
  const server = https.createServer({ cert: good.pem, key: good.keyPem }, (req, res) => {
    if (req.url === '/health') seen.push(req.headers.host)
    res.end(`tls backend ${req.socket.encrypted ? 'encrypted' : 'plain'}\n`)
  })
  const seen = []
  const port = await listenOn(t, server)

  const verified = await spawnLila(t, ['rr', `127.0.0.1:${port}`, ...base, '--protocol', 'http', '--backend-tls', '--backend-tls-ca', good.cert,
    '--check', 'http:/health', '--check-host', 'app.example.com'])
  t.match(verified.stderr, /127\.0\.0\.1:\d+\s+up\s+http \/health 200/, 'the health check speaks TLS too')
  t.equal(seen[0], 'app.example.com', '--check-host is the Host of the probe')
  const ok = await request(verified.port)
  t.equal(ok.status, 200)
  t.equal(ok.body.toString(), 'tls backend encrypted\n')

  const untrusted = await spawnLila(t, ['rr', `127.0.0.1:${port}`, ...base, '--protocol', 'http', '--backend-tls', '--log-level', 'debug'])
  const refused = await request(untrusted.port)
  t.equal(refused.status, 502, 'a certificate nobody vouches for is a failed connect')
  await untrusted.waitForLine(/connect to 127\.0\.0\.1:\d+ failed|self[- ]signed|SELF_SIGNED/)

  const insecure = await spawnLila(t, ['rr', `127.0.0.1:${port}`, ...base, '--protocol', 'http', '--backend-tls', '--backend-tls-insecure'])
  t.equal((await request(insecure.port)).status, 200, '--backend-tls-insecure does not check')

  // tcp mode: the client speaks plain bytes, lila TLS to the backend, after a PROXY
  // header in the clear (read here by lila's own prelude, as a backend lila would).
  const context = tls.createSecureContext({ cert: good.pem, key: good.keyPem })
  const headers = []
  const echo = net.createServer({ pauseOnConnect: true }, raw => {
    startPrelude(raw, { acceptProxy: true, tls: { context }, timeout: 5000, log: silentLogger }, socket => {
      headers.push(clientAddress(socket))
      socket.pipe(socket)
    })
  })
  const echoPort = await listenOn(t, echo)
  const tcp = await spawnLila(t, ['rr', `127.0.0.1:${echoPort}`, ...base, '--backend-tls', '--backend-tls-ca', good.cert, '--proxy-protocol', 'v1'])
  const socket = net.connect({ port: tcp.port, host: '127.0.0.1', allowHalfOpen: true })
  const got = []
  socket.on('data', chunk => got.push(chunk))
  socket.end('echo me')
  await within(5000, 'the echo', new Promise(resolve => socket.on('close', resolve)))
  t.equal(Buffer.concat(got).toString(), 'echo me')
  t.same(headers, ['127.0.0.1'], 'the backend read the PROXY header, then TLS')
})

// The row of the start-up table for the backend on `port`: [state, check].
function row (lila, port) {
  const line = lila.lines.find(l => l.startsWith(`lila: 127.0.0.1:${port} `))
  const match = line && /^lila: \S+\s+(\S+)\s+(.*)$/.exec(line)
  return match ? [match[1], match[2]] : null
}

const SELF_SIGNED = 'certificate not trusted (self-signed): use --backend-tls-ca FILE or --backend-tls-insecure'
const NOT_TLS = 'not speaking TLS (is --backend-tls right?)'

t.test('backend TLS problems are explained at start-up, with the fix, and the 502 says the same', async t => {
  const dir = certDir(t)
  const good = makeCertificate(dir, 'backend.test', ['DNS:backend.test', 'IP:127.0.0.1'])
  const nameOnly = makeCertificate(dir, 'named.test')
  const tlsBackend = pem => https.createServer({ cert: pem.pem, key: pem.keyPem }, (req, res) => res.end('tls backend\n'))
  const port = await listenOn(t, tlsBackend(good))
  const namedPort = await listenOn(t, tlsBackend(nameOnly))
  const plain = await httpBackend(t, 'plain')
  const http = ['--host', '127.0.0.1', '--port', '0', '--protocol', 'http', '--backend-tls']

  // Self-signed, nothing said about it: down at start-up for that reason, not "tcp connect ok".
  const untrusted = await spawnLila(t, ['rr', `127.0.0.1:${port}`, ...http])
  t.same(row(untrusted, port), ['down', `tls handshake: ${SELF_SIGNED}`], 'the start-up check does the handshake')
  const refused = await request(untrusted.port)
  t.equal(refused.status, 502)
  t.equal(refused.body.toString(), `502 Bad Gateway: backend 127.0.0.1:${port} ${SELF_SIGNED}\n`, 'the 502 in the same words')

  // With its CA: up, and the table says the handshake passed.
  const trusted = await spawnLila(t, ['rr', `127.0.0.1:${port}`, ...http, '--backend-tls-ca', good.cert])
  t.same(row(trusted, port), ['up', 'tls handshake ok'])
  t.equal((await request(trusted.port)).body.toString(), 'tls backend\n')

  // A certificate for a name, the backend given by its address: both said.
  const mismatch = await spawnLila(t, ['rr', `127.0.0.1:${namedPort}`, ...http, '--backend-tls-ca', nameOnly.cert])
  const notFor = 'certificate not valid for 127.0.0.1 (it is for named.test): give the backend by a name it covers, or use --backend-tls-insecure'
  t.same(row(mismatch, namedPort), ['down', `tls handshake: ${notFor}`])

  // A plain HTTP backend: not TLS at all, at start-up and in the 502.
  const wrong = await spawnLila(t, ['rr', plain.address, ...http])
  t.same(row(wrong, plain.port), ['down', `tls handshake: ${NOT_TLS}`])
  const notTls = await request(wrong.port)
  t.equal(notTls.body.toString(), `502 Bad Gateway: backend ${plain.address} ${NOT_TLS}\n`)

  // The http check speaks TLS the same way and says the same.
  const checked = await spawnLila(t, ['rr', `127.0.0.1:${port}`, plain.address, ...http, '--check', 'http:/health'])
  t.same(row(checked, port), ['down', `http /health ${SELF_SIGNED}`])
  t.same(row(checked, plain.port), ['down', `http /health ${NOT_TLS}`])
})

t.test('tcp mode with --backend-tls: the check is a handshake, after the PROXY header traffic sends', async t => {
  const dir = certDir(t)
  const good = makeCertificate(dir, 'backend.test', ['DNS:backend.test', 'IP:127.0.0.1'])
  const plain = await tcpBackend(t, 'a plain tcp backend that speaks first')
  const wrong = await spawnLila(t, ['rr', plain.address, '--host', '127.0.0.1', '--port', '0', '--backend-tls'])
  t.same(row(wrong, plain.port), ['down', `tls handshake: ${NOT_TLS}`])

  // A backend that reads a PROXY header, then TLS (lila's own prelude): the probe sends
  // one naming no client, as the spec says a health check does.
  // lila's probe is done at its end of the handshake (TLS 1.3: the server's Finished
  // read), the backend's once it read lila's Finished after it: the start-up table may
  // say up before the backend has seen the probe (on Node 24 and 26, most of the time),
  // so each probe is waited for as the backend sees it.
  const context = tls.createSecureContext({ cert: good.pem, key: good.keyPem })
  const headers = []
  let probed = null
  const server = net.createServer({ pauseOnConnect: true }, raw => {
    startPrelude(raw, { acceptProxy: true, tls: { context }, timeout: 5000, log: silentLogger }, socket => {
      headers.push(clientAddress(socket))
      if (probed !== null) probed()
      socket.pipe(socket)
    })
  })
  const port = await listenOn(t, server)
  for (const version of ['v1', 'v2']) {
    const seen = new Promise(resolve => { probed = resolve })
    const lila = await spawnLila(t, ['rr', `127.0.0.1:${port}`, '--host', '127.0.0.1', '--port', '0', '--backend-tls',
      '--backend-tls-ca', good.cert, '--proxy-protocol', version])
    t.same(row(lila, port), ['up', 'tls handshake ok'], `--proxy-protocol ${version}`)
    await within(5000, `the backend to see --proxy-protocol ${version}'s probe`, seen)
    await lila.stop() // the next probe seen is the next lila's
  }
  t.ok(headers.length >= 2, `${headers.length} probes, one of each lila at least`)
  t.same([...new Set(headers)], ['127.0.0.1'], 'the probes\' headers named no client: the connection\'s own address')
})

t.test('backendReason: TLS failures in words, with the fix; anything else as before', async t => {
  const tlsOn = { rejectUnauthorized: true }
  const withCa = { rejectUnauthorized: true, ca: Buffer.from('pem') }
  const error = (code, message = code, extra = {}) => Object.assign(new Error(message), { code }, extra)
  t.equal(backendReason(error('DEPTH_ZERO_SELF_SIGNED_CERT'), tlsOn), SELF_SIGNED)
  t.equal(backendReason(error('SELF_SIGNED_CERT_IN_CHAIN'), tlsOn), SELF_SIGNED)
  t.equal(backendReason(error('DEPTH_ZERO_SELF_SIGNED_CERT'), withCa), 'certificate not trusted (self-signed, not vouched for by --backend-tls-ca)')
  for (const code of ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY']) {
    t.equal(backendReason(error(code), tlsOn), 'certificate not trusted (unknown issuer): use --backend-tls-ca FILE or --backend-tls-insecure', code)
  }
  t.equal(backendReason(error('CERT_HAS_EXPIRED'), tlsOn), 'certificate expired')
  t.equal(backendReason(error('CERT_NOT_YET_VALID'), tlsOn), 'certificate not valid yet (is the clock right?)')
  const cert = { subjectaltname: 'DNS:a.test, DNS:b.test, IP Address:10.0.0.1, DNS:c.test, URI:spiffe://x', subject: { CN: 'a.test' } }
  t.equal(backendReason(error('ERR_TLS_CERT_ALTNAME_INVALID', 'x', { host: 'web.test', cert }), tlsOn),
    'certificate not valid for web.test (it is for a.test, b.test, 10.0.0.1, 1 more): give the backend by a name it covers, or use --backend-tls-insecure')
  t.equal(backendReason(error('ERR_TLS_CERT_ALTNAME_INVALID', 'x', { host: 'web.test', cert: { subject: { CN: 'cn.test' } } }), tlsOn),
    'certificate not valid for web.test (it is for cn.test): give the backend by a name it covers, or use --backend-tls-insecure')
  t.equal(backendReason(error('ERR_SSL_WRONG_VERSION_NUMBER'), tlsOn), NOT_TLS)
  t.equal(backendReason(error('ERR_SSL_PACKET_LENGTH_TOO_LONG'), tlsOn), NOT_TLS)
  t.equal(backendReason(error('EPROTO', 'write EPROTO 80:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:x'), tlsOn), NOT_TLS)
  t.equal(backendReason(error('ECONNRESET', 'Client network socket disconnected before secure TLS connection was established'), tlsOn),
    'closed the connection during the TLS handshake: not speaking TLS? (is --backend-tls right?)')
  t.equal(backendReason(error('ECONNRESET', 'read ECONNRESET'), tlsOn), 'connection reset', 'a reset after the handshake is a reset')
  t.equal(backendReason(error('ECONNREFUSED'), tlsOn), 'connection refused')
  t.equal(backendReason(error('ERR_SSL_SOMETHING_NEW'), tlsOn), 'ERR_SSL_SOMETHING_NEW', 'an unknown code as before')
  t.equal(backendReason(error('ECONNRESET', 'Client network socket disconnected before secure TLS connection was established'), null),
    'connection reset', 'without --backend-tls, nothing about TLS')
})

t.test('certificates that cannot be used stop lila at start with one line, exit 2', async t => {
  const dir = certDir(t)
  const a = makeCertificate(dir, 'a.test')
  const b = makeCertificate(dir, 'b.test')
  const mismatch = await runLila([':9', ...base, '--tls-cert', a.cert, '--tls-key', b.key])
  t.equal(mismatch.code, 2)
  t.equal(mismatch.stderr, `lila: certificate ${JSON.stringify(a.cert)} (--tls-cert) and key ${JSON.stringify(b.key)} (--tls-key) do not match\nTry 'lila --help'.\n`)
  const notPem = await runLila([':9', ...base, '--tls-cert', a.key, '--tls-key', a.key])
  t.equal(notPem.stderr, `lila: cannot use ${JSON.stringify(a.key)} (--tls-cert): not a PEM certificate\nTry 'lila --help'.\n`)
})
