'use strict'

// --tls local, through the spawned lila with real clients: lila's own CA in the state
// folder, made once and used again; curl trusting only the CA lila printed gets the
// backend's answer; headless Chromium loads a page with the CA's key trusted by its
// SPKI fingerprint, and not without it; --redirect-http's 308 keeps host, path and
// query; the status page, /status.json and /metrics show the certificate, and no key
// appears anywhere; renewal before the end (in process, with a lifetime of seconds);
// `lila demo --tls`; a state folder that cannot be used stops lila with one line.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawn, execFileSync } = require('child_process')
const {
  spawnLila, runLila, httpBackend, curl, restartablePort, outputOf, startLila, captureLog, within, request
} = require('./fixtures/helpers')
const { stateDir, servedCertificate } = require('./fixtures/certs')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')

const openssl = tool('openssl')

// What lila printed about its CA: { file, made, fingerprint, spki }.
async function printedCa (lila) {
  const [, file, made, fingerprint] = await lila.waitForLine(/local CA (\S+)( \(made now\))?, SHA-256 fingerprint ([0-9A-F:]{95})$/)
  const [, spki] = await lila.waitForLine(/trust it: Chromium, Chrome --ignore-certificate-errors-spki-list=(\S+)$/)
  return { file, made: made !== undefined, fingerprint, spki }
}

t.test('curl trusting only the CA lila printed; the CA made once and used again', async t => {
  const backend = await httpBackend(t, 'local')
  const state = stateDir(t)
  const args = ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--tls', 'local',
    '--state-dir', state, '--status-port', '0']
  const lila = await spawnLila(t, args)
  const ca = await printedCa(lila)
  t.ok(ca.made, 'made on the first start')
  t.equal(ca.file, path.join(state, 'local', 'ca.pem'))
  t.match(lila.stderr, `trust it: curl --cacert ${ca.file} https://localhost:PORT/`)
  t.match(lila.stderr, /trust it system-wide: Debian, Ubuntu: sudo cp \S+ \/usr\/local\/share\/ca-certificates\/lila-local-ca\.crt && sudo update-ca-certificates/)
  t.match(lila.stderr, /trust it system-wide: macOS: sudo security add-trusted-cert -d -r trustRoot -k \/Library\/Keychains\/System\.keychain \S+/)
  await lila.waitForLine(/certificate for localhost, 127\.0\.0\.1, ::1 \(local CA\) issued, valid until /)
  if (!openssl.skip) {
    const fp = execFileSync(openssl.path, ['x509', '-in', ca.file, '-noout', '-fingerprint', '-sha256'], { encoding: 'utf8' })
    t.equal(fp.trim().split('=')[1], ca.fingerprint, 'the fingerprint printed is the CA\'s, as openssl says')
  }
  for (const host of ['localhost', '127.0.0.1']) {
    const res = await curl(['--cacert', ca.file, `https://${host}:${lila.port}/`])
    t.equal(res.code, 0, `${host}: ${res.stderr}`)
    t.equal(res.stdout, 'local\n', `https://${host}: the backend's answer`)
  }
  const untrusted = await curl([`https://localhost:${lila.port}/`])
  t.equal(untrusted.code, 60, 'without the CA, curl does not trust it (the test can fail)')
  t.equal(fs.statSync(path.join(state, 'local', 'ca.key')).mode & 0o777, 0o600, 'the CA key is 0600')
  t.equal(fs.statSync(state).mode & 0o777, 0o700, 'the state folder is 0700')

  // What the status listener shows of it, and never a key.
  const json = await request(lila.statusPort, { path: '/status.json' })
  const [cert] = JSON.parse(json.body).certificates
  t.same(cert.names, ['localhost', '127.0.0.1', '::1'])
  t.equal(cert.issuer, 'lila local CA')
  t.equal(cert.source, 'local')
  t.equal(cert.daysLeft, 6, 'a week: 6 whole days and a bit left')
  t.ok(cert.nextRenewal > Date.now() && cert.nextRenewal < cert.notAfter)
  const page = await request(lila.statusPort, { path: '/status' })
  t.match(page.body.toString(), /<h2>Certificates<\/h2>/)
  t.match(page.body.toString(), /localhost, 127\.0\.0\.1, ::1/)
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, /lila_tls_certificate_expiry_seconds\{listener="127\.0\.0\.1:\d+",names="localhost,127\.0\.0\.1,::1",issuer="lila local CA",source="local"\} \d+/)
  t.match(metrics, /lila_tls_certificate_renewal_failing\{[^}]+\} 0/)
  const key = fs.readFileSync(path.join(state, 'local', 'ca.key'), 'utf8').split('\n')[1]
  for (const [what, text] of [['log', lila.stderr], ['status.json', json.body.toString()], ['page', page.body.toString()], ['metrics', metrics]]) {
    t.notMatch(text, /PRIVATE KEY/, `${what}: no PEM key`)
    t.notOk(text.includes(key.slice(0, 40)), `${what}: not a line of the CA key`)
  }
  await lila.stop()

  const again = await spawnLila(t, args)
  const second = await printedCa(again)
  t.notOk(second.made, 'the second start uses the CA it made')
  t.equal(second.fingerprint, ca.fingerprint)
  const res = await curl(['--cacert', ca.file, `https://localhost:${again.port}/`])
  t.equal(res.stdout, 'local\n', 'still trusted after a restart')
})

t.test('headless Chromium loads the page with the CA\'s SPKI fingerprint trusted, and not without', async t => {
  const chromium = tool('chromium')
  if (chromium.skip) return t.skip(chromium.skip)
  const backend = await httpBackend(t, 'page', (req, res) => {
    res.setHeader('content-type', 'text/html')
    res.end('<!doctype html><title>local</title><p id=p>served over lila\'s local CA</p>')
  })
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--tls', '--state-dir', stateDir(t)])
  const { spki } = await printedCa(lila)
  const browse = async (extra) => {
    const dir = tmpDir(t, 'lila-chromium-')
    const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${dir}`]
    return outputOf(chromium.path, [...flags, ...extra, '--dump-dom', `https://localhost:${lila.port}/`])
  }
  const trusted = await browse([`--ignore-certificate-errors-spki-list=${spki}`])
  t.match(trusted, '<p id="p">served over lila\'s local CA</p>', 'the backend\'s page, through lila')
  const refused = await browse([])
  t.notMatch(refused, 'served over lila', 'without the fingerprint the browser refuses the certificate')
})

t.test('--redirect-http: a 308 to https keeping host, path and query; challenges only for tokens', async t => {
  const backend = await httpBackend(t, 'redirected')
  const state = stateDir(t)
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--tls', 'local', '--state-dir', state, '--redirect-http', '0'])
  const [, redirectPort] = await lila.waitForLine(/redirect-http on 127\.0\.0\.1:(\d+): ACME HTTP-01, and a 308 to https on port (\d+)/)
  const head = async (target, extra = []) => {
    const res = await curl(['-o', '/dev/null', '-w', '%{http_code} %{redirect_url}', ...extra, target])
    t.equal(res.code, 0, res.stderr)
    return res.stdout
  }
  const base = `http://127.0.0.1:${redirectPort}`
  t.equal(await head(`${base}/a/b?c=d%20e&f=1`, ['-H', 'Host: localhost']),
    `308 https://localhost:${lila.port}/a/b?c=d%20e&f=1`, 'host, path and query kept; the TLS port')
  t.equal(await head(`${base}/x`, ['-H', 'Host: App.Example:8080']), `308 https://app.example:${lila.port}/x`,
    'the client\'s port is not the https one')
  t.equal(await head(`${base}/`, ['-H', 'Host: [::1]:80']), `308 https://[::1]:${lila.port}/`)
  t.equal(await head(`${base}/`, ['-H', 'Host: bad host']), '400 ', 'a Host that is not one: 400')
  t.equal(await head(`${base}/.well-known/acme-challenge/nothing`), '404 ', 'no such challenge: 404, never a redirect')
  const followed = await curl(['-L', '--cacert', path.join(state, 'local', 'ca.pem'), `http://localhost:${redirectPort}/p?q=1`])
  t.equal(followed.stdout, 'redirected\n', 'curl -L lands on the backend over https')
  t.equal(backend.last.url, '/p?q=1')
})

t.test('renewed before the end: new handshakes get the new certificate (in process, seconds-long lifetime)', async t => {
  const backend = await httpBackend(t, 'renewed')
  const capture = captureLog('info')
  const { port } = await startLila(t, ['rr', backend.address, '--protocol', 'http', '--tls', 'local',
    '--state-dir', stateDir(t)], { log: capture.log, keeperOptions: { localLifetime: 3000 } })
  const first = await servedCertificate(port, 'localhost')
  await capture.waitFor(/issued, valid until/)
  const from = capture.lines.length
  await capture.waitFor(/certificate for localhost, 127\.0\.0\.1, ::1 \(local CA\) issued, valid until/, { from, timeout: 10000 })
  const second = await servedCertificate(port, 'localhost')
  t.not(second.serialNumber, first.serialNumber, 'a new certificate')
  t.ok(Date.parse(second.validTo) > Date.parse(first.validTo))
  t.equal(second.issuer, first.issuer)
})

t.test('lila demo --tls: the line to paste trusts the local CA and goes over https', async t => {
  const lila = await spawnLila(t, ['demo', '--tls', '--port', '0', '--state-dir', stateDir(t)])
  const [, command] = await lila.waitForLine(/^lila: try: (for i in 1 2 3 4 5 6; do curl -s --cacert \S+ https:\/\/localhost:\d+\/; done)$/)
  const out = await within(20000, 'the pasted command', new Promise(resolve => {
    const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'ignore'] })
    let text = ''
    child.stdout.on('data', chunk => { text += chunk })
    child.on('close', () => resolve(text))
  }))
  const names = new Set(out.trim().split('\n').map(line => /^Hello from backend (\d) /.exec(line)[1]))
  t.same([...names].sort(), ['1', '2', '3'], 'the three backends, over https')
})

t.test('a state folder that cannot be used: one line, exit 2', async t => {
  const dir = tmpDir(t, 'lila-local-')
  fs.writeFileSync(path.join(dir, 'file'), '')
  const port = await restartablePort()
  const res = await runLila(['rr', ':9', '--protocol', 'http', '--port', String(port), '--host', '127.0.0.1',
    '--tls', 'local', '--state-dir', path.join(dir, 'file', 'state')])
  t.equal(res.code, 2)
  t.equal(res.stderr, `lila: cannot use the state folder "${path.join(dir, 'file', 'state')}" (--state-dir): ` +
    'a part of the path is not a folder\nTry \'lila --help\'.\n')
})

t.test('a state folder others may read is said, once', async t => {
  const state = stateDir(t)
  fs.mkdirSync(state, { mode: 0o755 })
  fs.chmodSync(state, 0o755)
  const lila = await spawnLila(t, ['rr', ':9', '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    '--tls', '--state-dir', state])
  const [line] = await lila.waitForLine(/the state folder .* is open to other users \(mode 755\): lila keeps private keys there; chmod 700 .*/)
  t.ok(line)
  t.equal(fs.statSync(path.join(state, 'local')).mode & 0o777, 0o700, 'what lila makes in it is its user\'s alone')
})
