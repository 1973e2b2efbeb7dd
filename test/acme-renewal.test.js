'use strict'

// ACME renewal against Pebble, whose certificates here last seconds: renewed at two
// thirds of their lifetime while a long download on the old certificate goes on to
// its end (new handshakes get the new one); and with Pebble stopped, lila goes on
// serving the certificate it has and says why, and when it tries again, in one line,
// which the status page shows too.

const t = require('tap')
const fs = require('fs')
const https = require('https')
const { spawnLila, httpBackend, curl, restartablePort, within, statusJson } = require('./fixtures/helpers')
const { startPebble, PEBBLE, PEBBLE_MISSING } = require('./fixtures/pebble')
const { stateDir, servedCertificate } = require('./fixtures/certs')

const servedSerial = async (port, name, ca) => (await servedCertificate(port, name, ca)).serialNumber

if (PEBBLE === null) {
  t.skip(PEBBLE_MISSING)
  process.exit(0)
}

async function startAcmeLila (t, { name, validity, backend }) {
  const httpPort = await restartablePort()
  const pebble = await startPebble(t, { httpPort, tlsPort: await restartablePort(), names: [name], validity })
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--redirect-http', String(httpPort), '--tls', 'acme', '--tls-names', name, '--acme-directory', pebble.directory,
    '--acme-ca', pebble.serverCa, '--state-dir', stateDir(t), '--status-port', '0'])
  await lila.waitForLine(new RegExp(`certificate for ${name.replace(/\./g, '\\.')} \\(ACME\\) issued by`), { timeout: 30000 })
  return { pebble, lila }
}

t.test('renewed at two thirds of its lifetime while a download on the old certificate finishes', async t => {
  const CHUNK = Buffer.alloc(64 * 1024, 'x')
  let release = null
  const released = new Promise(resolve => { release = resolve })
  const backend = await httpBackend(t, 'long', async (req, res) => {
    if (req.url !== '/long') return res.end('short\n')
    res.writeHead(200, { 'content-length': CHUNK.length * 20 })
    for (let i = 0; i < 10; i++) res.write(CHUNK)
    await released
    for (let i = 0; i < 10; i++) res.write(CHUNK)
    res.end()
  })
  const { pebble, lila } = await startAcmeLila(t, { name: 'r.lila.test', validity: 12, backend })
  const first = await servedSerial(lila.port, 'r.lila.test', pebble.root)

  // The download starts on the first certificate.
  const ca = fs.readFileSync(pebble.root)
  let received = 0
  let downloadSerial = null
  const download = new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port: lila.port, servername: 'r.lila.test', path: '/long', ca, agent: false }, res => {
      downloadSerial = res.socket.getPeerCertificate().serialNumber
      res.on('data', chunk => { received += chunk.length })
      res.on('end', () => resolve(res.statusCode))
      res.on('error', reject)
    })
    req.on('error', reject)
  })
  await within(10000, 'the first half of the download', new Promise(resolve => {
    const check = setInterval(() => { if (received >= CHUNK.length * 10) { clearInterval(check); resolve() } }, 20)
  }))
  t.equal(downloadSerial, first, 'the download began on the first certificate')

  const [renewed] = await lila.waitForLine(/certificate for r\.lila\.test \(ACME\) renewed by Pebble/, { timeout: 30000 })
  t.ok(renewed, 'renewed')
  const second = await servedSerial(lila.port, 'r.lila.test', pebble.root)
  t.not(second, first, 'new handshakes get the new certificate')
  const res = await curl(['--cacert', pebble.root, '--resolve', `r.lila.test:${lila.port}:127.0.0.1`, `https://r.lila.test:${lila.port}/`])
  t.equal(res.stdout, 'short\n', `curl on the new certificate: ${res.stderr}`)

  release()
  t.equal(await within(10000, 'the download to end', download), 200)
  t.equal(received, CHUNK.length * 20, 'the download on the old certificate finished, every byte')
  const status = await statusJson(lila)
  const cert = status.certificates.find(c => c.listener === status.listeners[0].name)
  t.equal(cert.serial, second, '/status.json shows the certificate in use')
  t.ok(cert.lastRenewal > 0)
})

t.test('Pebble stopped while renewing: lila goes on serving and says why', async t => {
  const backend = await httpBackend(t, 'still')
  const { pebble, lila } = await startAcmeLila(t, { name: 's.lila.test', validity: 24, backend })
  const serial = await servedSerial(lila.port, 's.lila.test', pebble.root)
  await pebble.stop()
  const [line] = await lila.waitForLine(/could not renew the certificate for s\.lila\.test \(ACME\): .+/, { timeout: 40000 })
  t.match(line, /: cannot reach the ACME server at https:\/\/127\.0\.0\.1:\d+: connection refused; trying again in 1m \(the one in use is valid until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$/)
  const res = await curl(['--cacert', pebble.root, '--resolve', `s.lila.test:${lila.port}:127.0.0.1`, `https://s.lila.test:${lila.port}/`])
  t.equal(res.code, 0, `still serving: ${res.stderr}`)
  t.equal(res.stdout, 'still\n')
  t.equal(await servedSerial(lila.port, 's.lila.test', pebble.root), serial, 'on the certificate it has')
  const status = await statusJson(lila)
  const [cert] = status.certificates
  t.match(cert.lastError, /cannot reach the ACME server/, '/status.json says why')
  t.ok(cert.nextRenewal > Date.now(), 'and when it tries again')
  t.notMatch(JSON.stringify(status), /PRIVATE KEY/, 'no key in /status.json')
})
