'use strict'

// Options from the environment (LILA_<NAME>, lib/config/environment.js): a flag wins
// over the environment, which wins over the config file; a bad value is named by its
// variable.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { parseCommandLine } = require('../lib/config/argv')
const { readConfigFile } = require('../lib/config/file')
const { variableOf } = require('../lib/config/environment')
const { OPTIONS } = require('../lib/config/options')
const { spawnLila, runLila, tcpBackend, exchange, statusJson } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')

t.test('command line: the environment fills in what no flag says', async t => {
  const env = { LILA_RETRIES: '7', LILA_PROTOCOL: 'http', LILA_FORWARDED: 'yes', LILA_RETRY_BUDGET: 'off', LILA_LOG_LEVEL: 'debug' }
  const { config } = parseCommandLine(['rr', ':9001'], env)
  t.match(config.listeners[0], { retries: 7, protocol: 'http', forwarded: true, retryBudget: null })
  t.equal(config.logLevel, 'debug')
  const flagged = parseCommandLine(['rr', ':9001', '--retries', '3', '--protocol', 'tcp'], { ...env, LILA_FORWARDED: '' }).config.listeners[0]
  t.match(flagged, { retries: 3, protocol: 'tcp' }, 'a flag wins')
  t.equal(parseCommandLine(['rr', ':9001'], { LILA_FORWARDED: '0', LILA_PROTOCOL: 'http' }).config.listeners[0].forwarded, false, '0 is off')
})

t.test('every option but --config, --help and --version has its variable', async t => {
  const names = OPTIONS.filter(o => o.scope !== 'cli').map(variableOf)
  t.ok(names.includes('LILA_LOG_LEVEL') && names.includes('LILA_STATUS_PORT') && names.includes('LILA_EJECT_AFTER'))
  t.notOk(names.includes('LILA_CONFIG'))
})

t.test('config file: the environment wins over the file, for every listener', async t => {
  const dir = tmpDir(t, 'lila-env-')
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({
    'shutdown-timeout': '5s',
    retries: 1,
    listeners: [{ port: 8080, backends: [':9001'], retries: 4 }, { port: 8081, backends: [':9002'] }]
  }))
  const env = { LILA_RETRIES: '6', LILA_SHUTDOWN_TIMEOUT: '9s' }
  const parsed = parseCommandLine(['--config', file], env)
  const config = readConfigFile(parsed.configFile, { environment: parsed.environment })
  t.same(config.listeners.map(l => l.retries), [6, 6])
  t.equal(config.shutdownTimeout, 9000)
  t.same(readConfigFile(file).listeners.map(l => l.retries), [4, 1], 'without it, the file as written')
})

t.test('bad values: exit 2, one line naming the variable', async t => {
  const cases = [
    [{ LILA_RETRIES: 'many' }, ['rr', ':9001'], /^lila: invalid value "many" for LILA_RETRIES: expected a whole number from 0 to 100\n/],
    [{ LILA_BACKEND_TLS: 'maybe' }, ['rr', ':9001'], /^lila: invalid value "maybe" for LILA_BACKEND_TLS: expected 1, true, yes or on/],
    [{ LILA_PORT: '80' }, ['--config', '/nonexistent.json'], /^lila: LILA_PORT cannot be combined with --config: each listener's port is in the file\n/],
    // options that need another: the one set by a variable is named by it, and the
    // other both ways
    [{ LILA_TLS_CERT: '/c.pem' }, ['rr', ':9001'], /^lila: LILA_TLS_CERT needs --tls-key \(or LILA_TLS_KEY\)\n/],
    [{ LILA_FORWARDED: '1' }, ['rr', ':9001'], /^lila: LILA_FORWARDED needs --protocol http \(or LILA_PROTOCOL=http\)\n/],
    [{ LILA_BACKEND_TLS_INSECURE: 'on', LILA_BACKEND_TLS: '1' }, ['rr', ':9001', '--backend-tls-ca', '/etc/hostname'],
      /^lila: LILA_BACKEND_TLS_INSECURE contradicts --backend-tls-ca \(or LILA_BACKEND_TLS_CA\): expected one of them\n/],
    [{ LILA_STATUS_HOST: '127.0.0.1' }, ['rr', ':9001'], /^lila: LILA_STATUS_HOST needs --status-port \(or LILA_STATUS_PORT\)\n/],
    [{}, ['rr', ':9001', '--forwarded'], /^lila: option --forwarded needs --protocol http\n/]
  ]
  for (const [env, args, expected] of cases) {
    const { code, stderr } = await runLila(args, { env: { ...process.env, ...env } })
    t.equal(code, 2)
    t.match(stderr, expected)
  }
})

t.test('the real executable, configured by its environment alone', async t => {
  const backend = await tcpBackend(t, 'from-env')
  const env = { ...process.env, LILA_HOST: '127.0.0.1', LILA_PORT: '0', LILA_CHECK: 'none', LILA_STATUS_PORT: '0', LILA_NAME: 'env-made' }
  const lila = await spawnLila(t, ['rr', backend.address, '--status-port', '0'], { env })
  t.equal((await exchange(lila.port)).data, 'from-env\n')
  const snapshot = await statusJson(lila)
  t.equal(snapshot.listeners[0].name, 'env-made')
})
