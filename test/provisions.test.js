'use strict'

// What a process serves its listeners with besides the config (lib/balancer/provisions.js),
// the part the Balancer and the --workers primary share: what the keeper does for a
// config (a table), files read or refused in one line, a keeper made when a config
// first wants one and publishing to the board or to `publish`, none in a worker, and
// none left behind by a start that failed.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { Provisions, keeperStep } = require('../lib/balancer/provisions')
const { parseConfigFile } = require('../lib/config/file')
const { UsageError } = require('../lib/errors')
const { stateDir } = require('./fixtures/certs')

const B = ['127.0.0.1:1']
const config = (listeners, top = {}) =>
  parseConfigFile(JSON.stringify({ check: 'none', host: '127.0.0.1', ...top, listeners }), 'test.json')
const plain = { name: 'one', port: 0, backends: B }
const local = { ...plain, protocol: 'http', tls: 'local', 'tls-names': 'a.test' }

t.test('what the keeper does, by role and config', async t => {
  const rows = [
    ['none', [plain], null, 'no TLS lila gets itself: no keeper'],
    ['none', [local], 'start', 'TLS local wanted for the first time: a keeper starts'],
    ['own', [local], 'reload', 'a keeper of its own: it reloads'],
    ['own', [plain], 'reload', 'a keeper of its own reloads when no certificate is wanted any more (it drops them)'],
    ['elsewhere', [local], null, 'a --workers worker: the primary keeps the certificates']
  ]
  for (const [role, listeners, step, what] of rows) t.equal(keeperStep(role, config(listeners)), step, what)
})

t.test('material: the files a listener names, read; one that cannot be used is a UsageError', async t => {
  const provisions = new Provisions()
  const [{ tls, backendTls, edge }] = provisions.materialOf(config([plain]))
  t.same([tls, backendTls, edge.passwords.size], [null, null, 0])
  const missing = path.join(stateDir(t), 'no-such.htpasswd')
  const second = { ...plain, name: 'two', protocol: 'http', 'basic-auth': missing }
  t.throws(() => provisions.materialOf(config([plain, second])),
    new UsageError(`cannot read --basic-auth file ${JSON.stringify(missing)}: no such file`))
  t.equal(provisions.acmeOf(config([{ ...plain, protocol: 'http' }]).listeners[0]), provisions.certificates.challenges,
    'a plain-HTTP listener answers the board\'s HTTP-01 challenges')
  t.equal(provisions.acmeOf(config([plain]).listeners[0]), null, 'a tcp one none')
})

t.test('a keeper made when first wanted publishes to the board; updates() for a worker that starts', async t => {
  const provisions = new Provisions()
  const state = stateDir(t)
  t.teardown(() => provisions.closeKeeper())
  await provisions.startKeeper(config([plain], { 'state-dir': state }))
  t.equal(provisions.keeperRole, 'none', 'no keeper while no config wants one')
  t.same(await provisions.reloadKeeper(config([local], { 'state-dir': state })), [], 'made and started: no lines')
  t.equal(provisions.keeperRole, 'own')
  const listenerTls = provisions.material(config([local], { 'state-dir': state }).listeners[0]).tls
  t.ok(listenerTls.context !== null, 'the board had the certificate before a listener took its material')
  t.match(provisions.updates(), [{ kind: 'certificate', listener: 'one', material: { cert: /BEGIN CERTIFICATE/ } }])
})

t.test('publish: the certificates go where the process says (the primary: to its workers)', async t => {
  const told = []
  const provisions = new Provisions({ publish: update => { told.push(update); return Promise.resolve() } })
  t.teardown(() => provisions.closeKeeper())
  await provisions.startKeeper(config([local], { 'state-dir': stateDir(t) }))
  t.match(told, [{ kind: 'certificate', listener: 'one' }])
  t.equal(provisions.certificates.latest.size, 0, 'the board of this process has none')
})

t.test('a worker keeps none: its certificates come from the primary', async t => {
  const provisions = new Provisions({ keeper: 'elsewhere' })
  await provisions.startKeeper(config([local], { 'state-dir': stateDir(t) }))
  t.same(await provisions.reloadKeeper(config([local])), [])
  t.same([provisions.keeperRole, provisions.updates()], ['elsewhere', []])
})

t.test('a state folder that cannot be used: a UsageError, and no keeper left for the next reload', async t => {
  const dir = stateDir(t)
  fs.mkdirSync(path.dirname(dir), { recursive: true })
  fs.writeFileSync(path.join(path.dirname(dir), 'file'), '')
  const provisions = new Provisions()
  const bad = config([local], { 'state-dir': path.join(path.dirname(dir), 'file', 'state') })
  await t.rejects(provisions.reloadKeeper(bad), UsageError)
  t.equal(provisions.keeperRole, 'none', 'the next reload makes one again')
  t.teardown(() => provisions.closeKeeper())
  await provisions.reloadKeeper(config([local], { 'state-dir': dir }))
  t.equal(provisions.keeperRole, 'own')
})
