'use strict'

// ACME HTTP-01 answered on a plain-HTTP listener of lila's own (issue 25): a config with
// a TLS listener that gets its certificate from Pebble (--tls acme) and a plain-HTTP
// listener in front of an app, on the port Pebble validates on. The plain listener
// answers the validation before its rules and routes (here a --basic-auth that would
// refuse Pebble); every other request there, an unknown token's too, goes to the app.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawnLila, httpBackend, curl, restartablePort } = require('./fixtures/helpers')
const { startPebble, PEBBLE, PEBBLE_MISSING } = require('./fixtures/pebble')
const { stateDir, certDir } = require('./fixtures/certs')

if (PEBBLE === null) {
  t.skip(PEBBLE_MISSING)
  process.exit(0)
}

t.test('HTTP-01 on a plain-HTTP listener: before its rules and routes; curl trusts Pebble\'s root only', async t => {
  const httpPort = await restartablePort()
  // TLS-ALPN-01 cannot succeed (nothing listens on Pebble's TLS port): HTTP-01 it is.
  const pebble = await startPebble(t, { httpPort, tlsPort: await restartablePort(), names: ['p.lila.test'] })
  const backend = await httpBackend(t, 'app')
  const dir = certDir(t)
  const users = path.join(dir, 'users')
  fs.writeFileSync(users, 'alice:{SHA}' + require('crypto').createHash('sha1').update('wonderland').digest('base64') + '\n')
  const config = path.join(dir, 'lila.jsonc')
  fs.writeFileSync(config, JSON.stringify({
    'state-dir': stateDir(t),
    'acme-directory': pebble.directory,
    'acme-ca': pebble.serverCa,
    check: 'none',
    listeners: [
      { name: 'https', protocol: 'http', host: '127.0.0.1', port: 0, backends: [backend.address], tls: 'acme', 'tls-names': 'p.lila.test' },
      { name: 'plain', protocol: 'http', host: '127.0.0.1', port: httpPort, backends: [backend.address], 'basic-auth': users }
    ]
  }))
  const lila = await spawnLila(t, ['--config', config])
  await lila.waitForLine(/certificate for p\.lila\.test \(ACME\): getting one from https:\/\/127\.0\.0\.1:\d+\/dir \(http-01\)/)
  await lila.waitForLine(/plain: ACME: answered an HTTP-01 validation from 127\.0\.0\.1/, { timeout: 30000 })
  await lila.waitForLine(/certificate for p\.lila\.test \(ACME\) issued by Pebble Intermediate CA/, { timeout: 30000 })
  const httpsPort = Number((await lila.waitForLine(/https: listening on 127\.0\.0\.1:(\d+)/))[1])
  const res = await curl(['--cacert', pebble.root, '--resolve', `p.lila.test:${httpsPort}:127.0.0.1`, `https://p.lila.test:${httpsPort}/`])
  t.equal(res.code, 0, `curl: ${res.stderr}`)
  t.equal(res.stdout, 'app\n', 'the backend\'s answer, over the certificate Pebble issued by HTTP-01')
  // The plain listener is itself: its rules for everything else, an unknown token too.
  const plain = `http://127.0.0.1:${httpPort}`
  const unknown = await curl(['-o', '/dev/null', '-w', '%{http_code}', `${plain}/.well-known/acme-challenge/nosuchtoken`])
  t.equal(unknown.stdout, '401', 'a token lila does not hold goes on, to the rules')
  const ok = await curl(['-u', 'alice:wonderland', `${plain}/.well-known/acme-challenge/nosuchtoken`])
  t.equal(ok.stdout, 'app\n', 'and then to the app')
  t.notMatch(lila.stderr, /PRIVATE KEY/, 'no key in the log')
})
