'use strict'

// --tls acme against Pebble (Let's Encrypt's test server), through the spawned lila
// with real clients: a certificate by HTTP-01 (on --redirect-http) and by TLS-ALPN-01
// alone (on the TLS listener), each trusted by curl through Pebble's root only; a
// restart that serves the kept certificate with Pebble gone; no certificate yet: a
// clean handshake failure and a line saying why and when lila tries again; --workers:
// one order, by the primary, every worker serving its result. Keys never reach the log.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnLila, httpBackend, curl, restartablePort } = require('./fixtures/helpers')
const { startPebble, PEBBLE, PEBBLE_MISSING } = require('./fixtures/pebble')
const { stateDir, servedCertificate } = require('./fixtures/certs')

const servedSerial = async (port, name, ca) => (await servedCertificate(port, name, ca)).serialNumber

if (PEBBLE === null) {
  t.skip(PEBBLE_MISSING)
  process.exit(0)
}

// curl as a browser would go to https://NAME:PORT/, NAME resolving to 127.0.0.1,
// trusting Pebble's root and nothing else.
const curlAs = (name, port, root, extra = []) =>
  curl(['--cacert', root, '--resolve', `${name}:${port}:127.0.0.1`, ...extra, `https://${name}:${port}/`])

const acmeArgs = (pebble, names, state) => ['--tls', 'acme', '--tls-names', names, '--acme-directory', pebble.directory,
  '--acme-ca', pebble.serverCa, '--state-dir', state, '--acme-email', 'ops@lila.test']

function noKeysIn (t, text, what) {
  t.notMatch(text, /PRIVATE KEY/, `${what}: no private key`)
  t.notMatch(text, /"d":"/, `${what}: no JWK private member`)
}

t.test('HTTP-01 on --redirect-http: curl trusting Pebble\'s root only; a restart asks Pebble nothing', async t => {
  const httpPort = await restartablePort()
  const pebble = await startPebble(t, { httpPort, tlsPort: await restartablePort(), names: ['a.lila.test'] })
  const backend = await httpBackend(t, 'app')
  const state = stateDir(t)
  const args = ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--redirect-http', String(httpPort), ...acmeArgs(pebble, 'a.lila.test', state)]
  const lila = await spawnLila(t, args)
  await lila.waitForLine(/certificate for a\.lila\.test \(ACME\): getting one from https:\/\/127\.0\.0\.1:\d+\/dir \(http-01\)/)
  await lila.waitForLine(/ACME: answered an HTTP-01 validation from 127\.0\.0\.1/, { timeout: 30000 })
  const [issued] = await lila.waitForLine(/certificate for a\.lila\.test \(ACME\) issued by Pebble Intermediate CA \S+, valid until \S+; renewal from \S+/, { timeout: 30000 })
  t.ok(issued)
  const res = await curlAs('a.lila.test', lila.port, pebble.root)
  t.equal(res.code, 0, `curl: ${res.stderr}`)
  t.equal(res.stdout, 'app\n', 'the backend\'s answer, over a certificate Pebble issued')
  t.match(backend.last.headers['x-forwarded-proto'], 'https')
  const serial = await servedSerial(lila.port, 'a.lila.test', pebble.root)
  await pebble.waitForLine(/Issued certificate serial/)
  const orders = pebble.lines.filter(l => /Issued certificate serial/.test(l)).length
  t.equal(orders, 1, 'one certificate issued')
  // What lila kept: the key readable by its user only, in folders of its own.
  const kept = path.dirname(fs.readdirSync(state, { recursive: true }).map(f => path.join(state, f)).find(f => f.endsWith('cert.pem')))
  t.equal(fs.statSync(path.join(kept, 'key.pem')).mode & 0o777, 0o600, 'the key is 0600')
  t.equal(fs.statSync(state).mode & 0o777, 0o700, 'the state folder is 0700')
  await lila.stop()
  t.equal((await lila.exited).code, 0)

  // Pebble gone: the restart serves what it kept.
  await pebble.stop()
  const again = await spawnLila(t, args)
  await again.waitForLine(/certificate for a\.lila\.test \(ACME\): using the one kept in .*, valid until /)
  const after = await curlAs('a.lila.test', again.port, pebble.root)
  t.equal(after.code, 0, `curl after the restart: ${after.stderr}`)
  t.equal(after.stdout, 'app\n')
  t.equal(await servedSerial(again.port, 'a.lila.test', pebble.root), serial, 'the same certificate')
  t.notMatch(again.stderr, /getting one|renewing|could not/, 'no order, nothing asked')
  noKeysIn(t, lila.stderr + again.stderr, 'lila\'s log')
})

t.test('TLS-ALPN-01 alone, on the TLS listener; no certificate yet: a handshake failure, and why', async t => {
  const tlsPort = await restartablePort()
  const pebble = await startPebble(t, { httpPort: await restartablePort(), tlsPort, names: ['b.lila.test'] })
  const backend = await httpBackend(t, 'alpn')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1',
    '--port', String(tlsPort), ...acmeArgs(pebble, 'b.lila.test', stateDir(t))])
  await lila.waitForLine(/getting one from \S+ \(tls-alpn-01\)/)
  await lila.waitForLine(/ACME: answered a TLS-ALPN-01 validation from 127\.0\.0\.1:\d+/, { timeout: 30000 })
  await lila.waitForLine(/certificate for b\.lila\.test \(ACME\) issued by Pebble/, { timeout: 30000 })
  t.notMatch(lila.stderr, /HTTP-01/, 'no HTTP-01: there is no plain HTTP port')
  const res = await curlAs('b.lila.test', tlsPort, pebble.root)
  t.equal(res.code, 0, `curl: ${res.stderr}`)
  t.equal(res.stdout, 'alpn\n')
  noKeysIn(t, lila.stderr, 'lila\'s log')

  // An ACME server that cannot be reached: lila serves (clients are refused cleanly)
  // and says why and when it tries again.
  await pebble.stop()
  const stranded = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1',
    '--port', '0', ...acmeArgs(pebble, 'c.lila.test', stateDir(t))])
  const [line] = await stranded.waitForLine(/could not get the certificate for c\.lila\.test \(ACME\): .+/, { timeout: 30000 })
  t.match(line, /cannot reach the ACME server at https:\/\/127\.0\.0\.1:\d+: connection refused; trying again in 1m \(until then TLS clients get a handshake failure\)/)
  const refused = await curlAs('c.lila.test', stranded.port, pebble.root, ['--max-time', '5'])
  t.equal(refused.code, 35, `a TLS handshake failure (curl exit 35), not a hang: ${refused.stderr}`)
  t.match(refused.stderr, /alert handshake failure/)
})

t.test('--workers 2: the primary orders once, every worker serves the certificate and answers HTTP-01', async t => {
  const httpPort = await restartablePort()
  const pebble = await startPebble(t, { httpPort, tlsPort: await restartablePort(), names: ['w.lila.test'] })
  const backend = await httpBackend(t, 'workers')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--workers', '2', '--redirect-http', String(httpPort), ...acmeArgs(pebble, 'w.lila.test', stateDir(t))])
  await lila.waitForLine(/certificate for w\.lila\.test \(ACME\) issued by Pebble/, { timeout: 30000 })
  for (let i = 0; i < 6; i++) {
    const res = await curlAs('w.lila.test', lila.port, pebble.root)
    t.equal(res.code, 0, `curl ${i}: ${res.stderr}`)
    t.equal(res.stdout, 'workers\n')
  }
  t.equal(pebble.lines.filter(l => /Issued certificate serial/.test(l)).length, 1, 'one order, one certificate')
  t.equal(lila.lines.filter(l => /getting one from/.test(l)).length, 1, 'asked for once')
  t.notMatch(lila.stderr, /worker \d+: .*getting one/, 'by the primary, not a worker')
})

t.test('a reload turns --tls local into --tls acme: the local certificate is served until Pebble\'s comes', async t => {
  const tlsPort = await restartablePort()
  const pebble = await startPebble(t, { httpPort: await restartablePort(), tlsPort, names: ['d.lila.test'] })
  const backend = await httpBackend(t, 'reloaded')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-acme-reload-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'lila.json')
  const write = tls => fs.writeFileSync(file, JSON.stringify({
    'state-dir': path.join(dir, 'state'),
    'acme-directory': pebble.directory,
    'acme-ca': pebble.serverCa,
    listeners: [{ host: '127.0.0.1', port: tlsPort, protocol: 'http', backends: [backend.address], 'tls-names': 'd.lila.test', ...tls }]
  }))
  write({ tls: 'local' })
  const lila = await spawnLila(t, ['--config', file])
  const local = path.join(dir, 'state', 'local', 'ca.pem')
  t.equal((await curlAs('d.lila.test', tlsPort, local)).stdout, 'reloaded\n', 'first, the local CA\'s')
  write({ tls: 'acme' })
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded/)
  t.match(lila.stderr, /reload: http:\d+: TLS --tls local -> --tls acme/)
  await lila.waitForLine(/certificate for d\.lila\.test \(ACME\) issued by Pebble/, { timeout: 30000 })
  const res = await curlAs('d.lila.test', tlsPort, pebble.root)
  t.equal(res.code, 0, `then Pebble's: ${res.stderr}`)
  t.equal(res.stdout, 'reloaded\n')
})
