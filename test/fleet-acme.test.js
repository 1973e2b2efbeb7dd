'use strict'

// --tls acme in a fleet, against Pebble: one order for the fleet, its HTTP-01 probe sent
// to the lila that did not order, both serving the same certificate; a renewal made
// once; a lila killed -9 holding the order's lock: the other orders once it expires.

const t = require('tap')
const net = require('net')
const tls = require('tls')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFileSync } = require('child_process')
const { redisServer, MISSING, spawnMember } = require('./fixtures/redis')
const { httpBackend, restartablePort, within } = require('./fixtures/helpers')
const { startPebble, PEBBLE_MISSING } = require('./fixtures/pebble')
const { stateDir } = require('./fixtures/certs')

const NAME = 'shop.lila.test'
const LOCK = `lila:default:acme:lock:acme ${NAME}`

// The certificate a lila serves for NAME, verified against Pebble's root: its serial.
function servedSerial (lila, root) {
  return within(10000, 'a TLS handshake', new Promise((resolve, reject) => {
    const options = { host: lila.host, port: lila.port, servername: NAME, ca: fs.readFileSync(root) }
    const socket = tls.connect(options, () => {
      resolve(socket.getPeerX509Certificate().serialNumber)
      socket.end()
    })
    socket.on('error', reject)
  }))
}

const acmeArgs = (backend, redis, httpPort, directory, pebble, t) => ['rr', backend.address, '--protocol', 'http',
  '--redirect-http', String(httpPort), '--tls', 'acme', '--tls-names', NAME, '--acme-directory', directory,
  '--acme-ca', pebble.serverCa, '--state-dir', stateDir(t), '--fleet', `redis://127.0.0.1:${redis.port}`]

const issued = pebble => pebble.lines.filter(line => /Issued certificate serial/.test(line)).length

t.test('one order for the fleet, probed through the other lila; one renewal', { skip: MISSING || PEBBLE_MISSING }, async t => {
  const redis = await redisServer(t)
  const httpPort = await restartablePort()
  const pebble = await startPebble(t, { httpPort, tlsPort: await restartablePort(), validity: 15 })
  const lilas = []
  // The name points at the lila that does NOT hold the order's lock: the CA's probe
  // reaches a lila that knows the challenge only through Redis.
  pebble.dns.set(NAME, {
    get A () {
      const holder = execFileSync('redis-cli', ['-p', String(redis.port), 'GET', LOCK]).toString().trim()
      const other = lilas.find(lila => !holder.includes(`/${lila.child.pid}/`))
      return [other ? other.host : '127.0.0.1']
    }
  })
  const backend = await httpBackend(t, 'app')
  const secret = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lila-fleet-key-')), 'fleet.key')
  fs.writeFileSync(secret, 'the same secret on every lila of the fleet')
  t.teardown(() => fs.rmSync(path.dirname(secret), { recursive: true, force: true }))
  const args = [...acmeArgs(backend, redis, httpPort, pebble.directory, pebble, t), '--fleet-key', secret]
  const [a, b] = await Promise.all([2, 3].map(n => spawnMember(t, n, args)))
  lilas.push(a, b)
  const ordered = new RegExp(`certificate for ${NAME.replace(/\./g, '\\.')} \\(ACME\\) issued by`)
  const taken = /\(ACME\) taken from the fleet/
  const orderer = await Promise.race([a, b].map(lila => lila.waitForLine(ordered, { timeout: 30000 }).then(() => lila)))
  const other = orderer === a ? b : a
  await other.waitForLine(taken, { timeout: 10000 })
  t.match(other.stderr, /ACME: answered an HTTP-01 validation/, 'the CA\'s probe was answered by the lila that did not order')
  t.notMatch(orderer.stderr, /ACME: answered an HTTP-01 validation/)
  const [one, two] = await Promise.all([servedSerial(a, pebble.root), servedSerial(b, pebble.root)])
  t.equal(one, two, 'both serve the same certificate')
  t.equal(issued(pebble), 1, 'Pebble issued one certificate')
  const kept = execFileSync('redis-cli', ['-p', String(redis.port), 'HGETALL', 'lila:default:acme:certificates']).toString()
  t.match(kept, /BEGIN CERTIFICATE/, 'the certificate is in Redis')
  t.notMatch(kept, /PRIVATE KEY/, 'its key sealed with --fleet-key')

  // Renewal (two thirds of 15 s, or Pebble's renewal window): once for the fleet.
  const takenBefore = new Map([a, b].map(lila => [lila, lila.lines.filter(line => taken.test(line)).length]))
  const renewed = await Promise.race([a, b].map(lila => lila.waitForLine(/\(ACME\) renewed by/, { timeout: 30000 }).then(() => lila)))
  const follower = renewed === a ? b : a
  await follower.waitForLine(taken, { count: takenBefore.get(follower) + 1, timeout: 10000 })
  const [three, four] = await Promise.all([servedSerial(a, pebble.root), servedSerial(b, pebble.root)])
  t.equal(three, four, 'both serve the renewed certificate')
  t.not(three, one)
  t.equal(issued(pebble), 2, 'Pebble issued one renewal')
  for (const lila of [a, b]) t.notMatch(lila.stderr, /PRIVATE KEY/)
})

t.test('a lila killed -9 holding the lock: the other orders once the lock expires', { skip: MISSING || PEBBLE_MISSING }, async t => {
  const redis = await redisServer(t)
  const httpPort = await restartablePort()
  const pebble = await startPebble(t, { httpPort, tlsPort: await restartablePort(), validity: 300 })
  pebble.dns.set(NAME, { A: ['127.0.0.3'] })
  // A's CA accepts a connection and never answers: A holds the lock, in the middle of an order.
  const silent = net.createServer(() => {})
  await new Promise(resolve => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => silent.close())
  const backend = await httpBackend(t, 'app')
  const stuck = `https://127.0.0.1:${silent.address().port}/dir`
  const a = await spawnMember(t, 2, acmeArgs(backend, redis, httpPort, stuck, pebble, t))
  await a.waitForLine(/\(ACME\): getting one from/)
  const b = await spawnMember(t, 3, acmeArgs(backend, redis, httpPort, pebble.directory, pebble, t))
  await b.waitForLine(/another lila of the fleet is getting it; waiting for it/)
  a.child.kill('SIGKILL')
  await a.exited
  await b.waitForLine(/\(ACME\) issued by/, { timeout: 30000 })
  t.equal(issued(pebble), 1, 'the other lila ordered it')
  t.ok(await servedSerial(b, pebble.root))
})
