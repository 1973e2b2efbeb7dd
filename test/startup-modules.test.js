'use strict'

// What `lila --version` loads, held to what ARCHITECTURE.md says of it ("The start of a
// process"): about N of lila's modules (within a few: a new config/ file need not
// change the sentence), those Node built-ins exactly, and none of the balancer, the
// listeners or the status listener.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawnSync } = require('child_process')
const { ROOT, spawnLila, tcpBackend } = require('./fixtures/helpers')

const TOLERANCE = 4
// Folders and files only a serving lila needs.
const SERVING = /^(balancer|admin|net|tls|fleet|telemetry|app)\/|^proxy\/(listener|tcp|http\/protocol|http\/exchange)\.js$|^index\.js$/

t.test('lila --version loads what ARCHITECTURE.md says', async t => {
  const doc = fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8').replace(/\s+/g, ' ')
  const claim = /`lila --version` loads none of the balancer, the listeners or the status listener: about (\d+) of lila's modules \(.*?\) and (?:Node's ([a-z, ]+?)|none of Node's) \(/.exec(doc)
  t.ok(claim, 'the sentence is in ARCHITECTURE.md')
  const [, count, names] = claim
  const builtins = names === undefined ? [] : names.split(/, | and /)

  const run = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'loaded-modules.js'), '--version'],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, timeout: 30000 })
  t.equal(run.status, 0, 'exit 0')
  t.match(run.stdout, /^lila \d+\.\d+\.\d+/, 'it says its version')
  const { lib, builtins: required } = JSON.parse(run.stderr.trim().split('\n').pop())
  t.ok(Math.abs(lib.length - Number(count)) <= TOLERANCE,
    `${lib.length} of lila's modules, the doc says about ${count} (within ${TOLERANCE})`)
  t.same(required, builtins.sort(), 'the Node built-ins the doc names')
  t.same(lib.filter(file => SERVING.test(file)), [], 'nothing only a serving lila needs')
})

// What a plain listener loads: a feature's modules (TLS, compression, --basic-auth's
// hashes, forward auth, tracing, --workers, the fleet, lila run, ACME) load only when it
// is configured (ARCHITECTURE.md, "The start of a process"). The built file, so that its
// bundled require is what is held to it, then lib/ for which of lila's modules.
// tls/wants.js and tls/http01.js (what a config asks of ACME, its HTTP-01 answers) are small
// and read by every listener's setup. The HTTP/2 codec loads with the first HTTP/2 client
// or probe (wire/h2/preface.js and constants.js, which HTTP/1.1 sessions use to spot the
// preface, excepted); gRPC health checks' messages with the first such check; v8 and vm
// with the idle collector's first look (cli/heap.js, a second after the start);
// child_process with an upgrade, dns with a backend given by name; --workers' primary
// (cli/workers.js and what it uses) with --workers above 1.
const FEATURES = /^(telemetry|fleet|app)\/|^cli\/(workers|worker-slots|worker-requests)\.js$|^tls\/(?!wants\.js$|http01\.js$)|^wire\/(otlp|jose|x509|grpc-health)\.js$|^wire\/h2\/(?!preface\.js$|constants\.js$)|^proxy\/http2\/|^proxy\/edge\/(basic-auth|passwords|bcrypt|apr1|sha-crypt|crypt64)\.js$|^proxy\/(tcp-trace|http\/exchange-trace)\.js$/
const UNUSED_BUILTINS = ['tls', 'zlib', 'https', 'cluster', 'http2', 'v8', 'vm', 'child_process', 'dns']
// ./lila's loader compiles the bundle with vm (scripts/bundle-loader.js); lib/ does not.
const LOADER_BUILTINS = ['vm']
const FIXTURE = path.join(__dirname, 'fixtures', 'loaded-modules.js')

for (const protocol of ['tcp', 'http']) {
  t.test(`a plain ${protocol} listener loads no feature it does not use`, async t => {
    const backend = await tcpBackend(t, 'a')
    const args = ['rr', backend.address, '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--protocol', protocol]
    const loaded = async prefix => {
      const lila = await spawnLila(t, args, { lila: process.execPath, prefix, env: { ...process.env, NODE_OPTIONS: '' } })
      t.equal((await lila.stop()).code, 0, 'it stops cleanly')
      return JSON.parse(lila.stderr.trim().split('\n').pop())
    }
    const built = await loaded(['-r', FIXTURE, path.join(ROOT, 'lila')])
    t.ok(built.builtins.includes('net'), 'the built file is observed (it loads net)')
    const unused = UNUSED_BUILTINS.filter(name => !LOADER_BUILTINS.includes(name))
    t.same(built.builtins.filter(name => unused.includes(name)), [], `./lila loads none of ${unused.join(', ')}`)
    const source = await loaded([FIXTURE])
    t.same(source.builtins.filter(name => UNUSED_BUILTINS.includes(name)), [], 'nor does lib/')
    t.ok(source.lib.includes('proxy/listener.js'), 'lib/ is observed (it loads the listener)')
    t.same(source.lib.filter(file => FEATURES.test(file)), [], 'no feature module')
  })
}
