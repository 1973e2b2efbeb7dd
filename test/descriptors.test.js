'use strict'

// Running out of file descriptors is lila's own problem, never a backend's (issue 17):
// --max-conn defaults to what the limit allows, a full listener stops accepting for a
// while instead of accepting and closing, health probes that could not be made count
// neither way, and everything is served again once clients leave. The end-to-end tests
// run the real executable under `prlimit --nofile=256:256` (util-linux).

const t = require('tap')
const net = require('net')
const http = require('http')
const {
  listenerShare, defaultMaxConn, holdable, limitWarning, outOfDescriptors, RESERVE
} = require('../lib/descriptors')
const path = require('path')
const {
  spawnLila, statusJson, within, until, request, LILA, tcpBackend, greetThenEcho, httpBackend, listenOn
} = require('./fixtures/helpers')
const { h2Backend, h2connect, h2request } = require('./fixtures/h2')
const { grpcBackend, load: loadGrpc } = require('./fixtures/grpc')
const { tool } = require('./fixtures/tools')

const grpcLibs = loadGrpc()

t.test('the share of a limit, the default --max-conn, and how many may wait', async t => {
  t.equal(listenerShare(256, 1), 256 - RESERVE)
  t.equal(listenerShare(1024, 2), Math.floor((1024 - RESERVE) / 2), 'listeners share the limit evenly')
  t.equal(listenerShare(null, 1), null, 'no known limit: no share')
  t.equal(listenerShare(64, 1), 48, 'a quarter of a low limit is kept aside')
  t.equal(defaultMaxConn(listenerShare(256, 1)), Math.floor((256 - RESERVE) / 2), 'two descriptors per client')
  t.equal(defaultMaxConn(null), null, 'no known limit: no cap')
  t.equal(holdable(192, 96, 1024), 0, 'at the default, nothing is left to hold clients with')
  t.equal(holdable(192, 10, 1024), 172, 'a lower --max-conn leaves room to hold')
  t.equal(holdable(1e6, 10, 1024), 1024, 'never more than the cap')
  t.equal(holdable(null, null, 1024), 1024)
})

t.test('a --max-conn the limit cannot honour is said at start, once, in one line', async t => {
  t.equal(limitWarning(256, [null]), null, 'derived: always fits')
  t.equal(limitWarning(100000, [1000]), null)
  t.equal(limitWarning(256, [1000]),
    '--max-conn 1000 needs about 2064 file descriptors (two per client, and 64 for lila), ' +
    'but the limit is 256: raise it (ulimit -n, LimitNOFILE=) or lower --max-conn')
  t.match(limitWarning(1000, [300, 400]), /^--max-conn \(300 \+ 400\) needs about 1464 /)
  t.equal(outOfDescriptors(256, 'not accepting for 1s'), 'out of file descriptors (limit 256): not accepting for 1s')
  t.equal(outOfDescriptors(null, 'x'), 'out of file descriptors: x')
})

const prlimit = tool('prlimit')
const LIMIT = 256
const CLIENTS = 400

for (const protocol of ['http', 'tcp']) {
  t.test(`${protocol}: ${CLIENTS} idle clients under a limit of ${LIMIT} descriptors blame no backend`, async t => {
    if (prlimit.skip) return t.skip(prlimit.skip)
    const backends = []
    for (let i = 0; i < 3; i++) {
      const server = protocol === 'http'
        ? http.createServer((req, res) => res.end('ok\n'))
        : net.createServer(socket => { socket.on('error', () => {}); socket.pipe(socket) })
      await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
      t.teardown(() => { server.closeAllConnections?.(); server.close() })
      backends.push(server)
    }
    const addresses = backends.map(s => `127.0.0.1:${s.address().port}`)
    const args = ['rr', ...addresses, '--protocol', protocol, '--port', '0', '--host', '127.0.0.1',
      '--status-port', '0', '--check-interval', '300ms']
    // prlimit runs lila in its own process: the limit is lila's alone.
    const lila = await spawnLila(t, args, { lila: prlimit.path, prefix: [`--nofile=${LIMIT}:${LIMIT}`, LILA] })
    const status = await statusJson(lila)
    const maxConn = Math.floor((LIMIT - RESERVE) / 2)
    t.equal(status.listeners[0].maxConn, maxConn, `--max-conn defaults to ${maxConn}, from the limit`)

    const clients = []
    t.teardown(() => { for (const c of clients) c.destroy() })
    const hello = protocol === 'http' ? 'GET / HTTP/1.1\r\nHost: test\r\n\r\n' : 'hello'
    for (let i = 0; i < CLIENTS; i++) {
      const client = net.connect(lila.port, '127.0.0.1')
      client.answered = false
      client.on('error', err => { client.failed = err.code })
      client.once('data', () => { client.answered = true })
      // Closed by lila before its first bytes arrived there: a FIN, not a reset.
      client.once('close', () => { if (!client.answered && !client.failed) client.failed = 'closed' })
      client.write(hello)
      clients.push(client)
      await new Promise(resolve => client.once('connect', resolve).once('error', resolve))
    }
    const line = await lila.waitForLine(/out of file descriptors \(limit 256\): .*not accepting for 1s/)
    t.ok(line, 'a line says lila is out of descriptors')
    await until(() => clients.filter(c => c.answered).length >= maxConn, 'the clients served to be answered', { timeout: 10000 })

    const during = await statusJson(lila)
    t.same(during.listeners[0].backends.map(b => b.status), ['up', 'up', 'up'], 'every backend stays up')
    t.equal(during.listeners[0].panic, false, 'no panic')
    t.equal(during.listeners[0].accepting, false, 'status says the listener is not accepting')
    const metrics = await request(lila.statusPort, { path: '/metrics' })
    t.match(String(metrics.body), /^lila_listener_accepting\{listener="[^"]+"\} 0$/m, 'and so does /metrics')
    t.match(String(metrics.body), new RegExp(`^lila_listener_max_connections\\{listener="[^"]+"\\} ${maxConn}$`, 'm'))
    t.ok(during.listeners[0].active <= maxConn, `at most ${maxConn} clients served`)
    // The others were refused once the listener closed, or (those already in the
    // kernel's backlog then, all of them on a busy machine) reset with it, or accepted
    // and closed before their first bytes reached lila; none answered.
    const tally = () => `${clients.filter(c => c.answered).length} answered, ${clients.filter(c => c.failed).length} turned away`
    await until(() => clients.filter(c => c.failed).length === CLIENTS - maxConn, 'the clients beyond it to be turned away',
      { timeout: 20000 }).catch(err => { throw new Error(`${err.message} (${tally()} of ${CLIENTS})`) })
    const refused = clients.filter(c => c.failed === 'ECONNREFUSED').length
    const closed = clients.filter(c => c.failed === 'closed').length
    t.equal(clients.filter(c => c.answered).length, maxConn,
      `clients beyond it were turned away without a byte (${refused} refused, ${closed} closed, the rest reset)`)
    // While full, the listening socket stays closed: a new client is refused, never
    // accepted and closed.
    const late = await within(10000, 'a client while lila does not accept', new Promise(resolve => {
      const client = net.connect(lila.port, '127.0.0.1')
      client.once('error', err => resolve(err.code))
      client.once('connect', () => { client.destroy(); resolve('connected') })
    }))
    t.equal(late, 'ECONNREFUSED', 'a new client is refused')
    t.notMatch(lila.stderr, /backend \S+ down/, 'no backend was said down')

    // The idle clients leave: lila accepts again by itself and serves.
    for (const c of clients) c.destroy()
    await lila.waitForLine(/accepting again on /)
    const answer = await within(10000, 'a request after the idle clients left', new Promise(resolve => {
      const client = net.connect(lila.port, '127.0.0.1')
      client.on('error', err => resolve(`error ${err.code}`))
      client.once('data', data => { client.destroy(); resolve(String(data)) })
      client.write(hello)
    }))
    t.match(answer, protocol === 'http' ? /^HTTP\/1\.1 200 / : /^hello/, 'served again')
  })
}

t.test('a --max-conn beyond the limit: warned at start; lila runs out, blames no backend, and recovers', async t => {
  if (prlimit.skip) return t.skip(prlimit.skip)
  // HTTP clients that each made a request and stay idle: with --max-conn 1000, lila
  // accepts more than its descriptors allow and runs out (accepting, connecting or
  // probing, whichever comes first).
  const backend = http.createServer((req, res) => res.end('ok\n'))
  // Its idle connections kept (Keep-Alive: timeout=600; lila's pool then keeps them
  // 60 s): the shortage lasts until the clients leave. With Node's 5 s, lila's pool let
  // them go 4 s after the burst, and a health probe (what meets the shortage first
  // here: libuv accepts and closes what it has no descriptor for, silently) could find
  // descriptors free again before it ran.
  backend.keepAliveTimeout = 600000
  await listenOn(t, backend)
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${backend.address().port}`, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check-interval', '200ms', '--max-conn', '1000'],
  { lila: prlimit.path, prefix: [`--nofile=${LIMIT}:${LIMIT}`, LILA] })
  t.match(lila.stderr, /--max-conn 1000 needs about 2064 file descriptors .* but the limit is 256/)

  const clients = []
  t.teardown(() => { for (const c of clients) c.destroy() })
  for (let i = 0; i < CLIENTS; i++) {
    const client = net.connect(lila.port, '127.0.0.1')
    client.on('error', () => {})
    client.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n')
    clients.push(client)
    await new Promise(resolve => client.once('connect', resolve).once('error', resolve))
  }
  await lila.waitForLine(/out of file descriptors \(limit 256\): /)
  for (const c of clients) c.destroy()
  await lila.waitForLine(/accepting again on /)
  const after = await statusJson(lila)
  t.same(after.listeners[0].backends.map(b => b.status), ['up'], 'the backend stayed up through it')
  t.notMatch(lila.stderr, /backend \S+ down|panic/, 'no backend was said down, no panic')
})

// Out of descriptors at a chosen moment: lila under prlimit with fixtures/descriptor-hog.js
// preloaded, whose hog() takes every free descriptor (but `leave`), and keeps taking
// those that free up, until free().
const HOG = path.join(__dirname, 'fixtures', 'descriptor-hog.js')

async function hoggedLila (t, args, { leave = 0 } = {}) {
  const lila = await spawnLila(t, args, {
    lila: prlimit.path,
    prefix: [`--nofile=${LIMIT}:${LIMIT}`, process.execPath, '--require', HOG, LILA],
    env: { ...process.env, HOG_LEAVE: String(leave) }
  })
  let hogs = 0
  let frees = 0
  let resumed = 0
  lila.hog = async () => {
    lila.child.kill('SIGWINCH')
    await lila.waitForLine(/^hog: holding \d+ descriptors$/, { count: ++hogs })
  }
  // Descriptors back; resolves once lila accepts again.
  lila.free = async () => {
    lila.child.kill('SIGWINCH')
    await lila.waitForLine(/^hog: released$/, { count: ++frees })
    await lila.waitForLine(/accepting again on /, { count: ++resumed })
  }
  return lila
}

// The first bytes a new client gets ('' if closed without any).
function greeting (port, hello = null) {
  return within(10000, 'a client\'s first bytes', new Promise(resolve => {
    const client = net.connect(port, '127.0.0.1')
    client.on('error', () => {})
    client.once('data', data => { client.destroy(); resolve(String(data)) })
    client.once('close', () => resolve(''))
    if (hello !== null) client.write(hello)
  }))
}

const OUT_CONNECTING = /out of file descriptors \(limit 256\): cannot open a backend connection; not accepting for 1s/

t.test('tcp: a backend connection lila has no descriptor for closes the client and blames no backend', async t => {
  if (prlimit.skip) return t.skip(prlimit.skip)
  const echo = await tcpBackend(t, 'echo', greetThenEcho)
  const lila = await hoggedLila(t, ['rr', echo.address, '--port', '0', '--host', '127.0.0.1', '--status-port', '0', '--check', 'none'],
    { leave: 1 }) // one descriptor for the client to be accepted with, none for its backend
  await lila.hog()
  t.equal(await greeting(lila.port), '', 'the client is closed without a byte')
  await lila.waitForLine(OUT_CONNECTING)
  await lila.free()
  t.equal(await greeting(lila.port), 'echo\n', 'served once descriptors are back')
  const [backend] = (await statusJson(lila)).listeners[0].backends
  t.match(backend, { status: 'up', failures: 0 }, 'the backend was not blamed')
  t.notMatch(lila.stderr, /backend \S+ down|panic/)
})

for (const backendProtocol of ['h1', 'h2']) {
  t.test(`http, ${backendProtocol} backend: a backend connection lila has no descriptor for is 503, and blames no backend`, async t => {
    if (prlimit.skip) return t.skip(prlimit.skip)
    const backend = backendProtocol === 'h1' ? await httpBackend(t, 'b') : await h2Backend(t, 'b')
    const lila = await hoggedLila(t, ['rr', backend.address, '--protocol', 'http', '--backend-protocol', backendProtocol,
      '--port', '0', '--host', '127.0.0.1', '--status-port', '0', '--check', 'none'])
    // Clients connected before lila runs out: an HTTP/1.1 one and an HTTP/2 one. Each
    // request is the first thing lila needs a descriptor for after the hog took them all.
    const h1 = net.connect(lila.port, '127.0.0.1')
    h1.on('error', () => {})
    t.teardown(() => h1.destroy())
    await new Promise(resolve => h1.once('connect', resolve))
    const h2 = await h2connect(t, lila.port)
    // Both accepted by lila (a connection still in the kernel's backlog when it runs out
    // would be accepted and closed by libuv).
    await until(async () => (await statusJson(lila)).listeners[0].active >= 2, 'both clients accepted', { every: 20 })

    await lila.hog()
    const first = new Promise(resolve => h1.once('data', data => resolve(String(data))))
    h1.write('GET /h1 HTTP/1.1\r\nHost: test\r\n\r\n')
    t.match(await within(10000, 'the HTTP/1.1 answer', first), /^HTTP\/1\.1 503 [\s\S]*lila is short of resources \(too many open files\)/,
      'an HTTP/1.1 request: 503')
    await lila.waitForLine(OUT_CONNECTING)
    await lila.free()

    await lila.hog()
    const stream = await within(10000, 'the HTTP/2 answer', h2request(h2, { path: '/h2' }))
    t.equal(stream.status, 503, 'an HTTP/2 request: 503')
    await lila.free()

    t.equal((await request(lila.port, { path: '/after' })).status, 200, 'served once descriptors are back')
    t.equal((await h2request(h2, { path: '/after' })).status, 200)
    const [snapshot] = (await statusJson(lila)).listeners[0].backends
    t.match(snapshot, { status: 'up', failures: 0 }, 'the backend was not blamed')
    t.notMatch(lila.stderr, /backend \S+ down|panic|502 for/, 'no backend said down, no 502')
  })
}

// Each kind of probe, made while lila has no descriptor to make it with: counted neither
// way, however many fail (more than --fall), and said once a second.
const PROBES = [
  ['tcp', () => ['--check', 'tcp'], t => tcpBackend(t, 'echo', greetThenEcho)],
  ['http', () => ['--protocol', 'http', '--check', 'http:/'], t => httpBackend(t, 'b')],
  ['http over HTTP/2', () => ['--protocol', 'http', '--backend-protocol', 'h2', '--check', 'http:/'], t => h2Backend(t, 'b')],
  ['grpc', () => ['--protocol', 'grpc', '--check', 'grpc'], t => grpcBackend(t, 'g')]
]

for (const [kind, options, start] of PROBES) {
  t.test(`${kind} health probes lila has no descriptor for blame no backend`, async t => {
    if (prlimit.skip) return t.skip(prlimit.skip)
    if (kind === 'grpc' && grpcLibs === null) return t.skip('@grpc/grpc-js is not installed')
    const backend = await start(t)
    // A probe's timeout is its interval: 250 ms, so that an HTTP/2 or gRPC probe made
    // once descriptors are back does not time out on a busy machine (at 100 ms they did,
    // three in a row, and the backend went down for that).
    const lila = await hoggedLila(t, ['rr', backend.address, ...options(), '--port', '0', '--host', '127.0.0.1',
      '--status-port', '0', '--check-interval', '250ms', '--fall', '3'])
    await lila.hog()
    // Said at once, then once a second with how many more failed meanwhile: more
    // probes than --fall go unmade before descriptors come back.
    const said = /out of file descriptors \(limit 256\): health check of \S+ not made, not counted(?: \(and (\d+) more like it)?/
    let notMade = 0
    for (let count = 1; notMade <= 3 && count <= 20; count++) {
      notMade += 1 + Number((await lila.waitForLine(said, { count }))[1] || 0)
    }
    t.ok(notMade > 3, `more probes not made than --fall (${notMade})`)
    await lila.free()
    const [snapshot] = (await statusJson(lila)).listeners[0].backends
    t.equal(snapshot.status, 'up', 'the backend stayed up')
    t.notMatch(lila.stderr, /backend \S+ down|panic/, 'no backend was said down, no panic')
  })
}

// What descriptors.js hears from anywhere reaches every listener with its kind, each
// kind said once a second: a probe's line is not hidden by a request's, nor one
// backend's probe by another's (they are one kind).
t.test('each kind of shortage said once a second: a probe is not hidden by a backend connection', async t => {
  const { createBalancer } = require('../lib/index')
  const { parseCommandLine } = require('../lib/config/argv')
  const { reportOutOfDescriptors } = require('../lib/descriptors')
  const { captureLog } = require('./fixtures/helpers')
  const { log, lines } = captureLog('info')
  const { config } = parseCommandLine(['rr', '127.0.0.1:1', '--host', '127.0.0.1', '--port', '0', '--check', 'none'])
  const lb = createBalancer(config, { log })
  await lb.listen()
  t.teardown(() => lb.close(0))
  reportOutOfDescriptors('cannot open a backend connection')
  reportOutOfDescriptors('health check of 127.0.0.1:1 not made, not counted', 'health check')
  reportOutOfDescriptors('health check of 127.0.0.1:2 not made, not counted', 'health check')
  const said = lines.filter(line => /out of file descriptors/.test(line))
  t.equal(said.length, 2, `one line for the backend connection, one for the probes: ${JSON.stringify(said)}`)
  t.match(said[0], /cannot open a backend connection; not accepting/)
  t.match(said[1], /health check of 127\.0\.0\.1:1 not made, not counted/)
})
