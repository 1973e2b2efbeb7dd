'use strict'

// Running out of file descriptors is lila's own problem, never a backend's (issue 17):
// --max-conn defaults to what the limit allows, a full listener stops accepting for a
// while instead of accepting and closing, health probes that could not be made count
// neither way, and everything is served again once clients leave. The end-to-end tests
// run the real executable under `prlimit --nofile=256:256` (util-linux).

const t = require('tap')
const net = require('net')
const http = require('http')
const { spawnSync } = require('child_process')
const {
  listenerShare, defaultMaxConn, holdable, limitWarning, outOfDescriptors, RESERVE
} = require('../lib/descriptors')
const { spawnLila, statusJson, within, until, request, LILA } = require('./fixtures/helpers')

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

const prlimit = spawnSync('prlimit', ['--version']).error ? null : 'prlimit'
const LIMIT = 256
const CLIENTS = 400

for (const protocol of ['http', 'tcp']) {
  t.test(`${protocol}: ${CLIENTS} idle clients under a limit of ${LIMIT} descriptors blame no backend`, async t => {
    if (prlimit === null) return t.skip('prlimit is not installed (Debian package util-linux)')
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
    const lila = await spawnLila(t, args, { lila: prlimit, prefix: [`--nofile=${LIMIT}:${LIMIT}`, LILA] })
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
    const refused = clients.filter(c => c.failed === 'ECONNREFUSED').length
    t.ok(refused > 0, `clients beyond it were refused, not accepted and closed (${refused} refused)`)
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

t.test('a --max-conn beyond the limit: warned at start; when lila runs out, probes blame no backend', async t => {
  if (prlimit === null) return t.skip('prlimit is not installed (Debian package util-linux)')
  // HTTP clients that each made a request and stay idle: the traffic path needs no
  // descriptor once they are answered, so the probes are what run out.
  const backend = http.createServer((req, res) => res.end('ok\n'))
  await new Promise(resolve => backend.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { backend.closeAllConnections(); backend.close() })
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${backend.address().port}`, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check-interval', '200ms', '--max-conn', '1000'],
  { lila: prlimit, prefix: [`--nofile=${LIMIT}:${LIMIT}`, LILA] })
  t.match(lila.stderr, /--max-conn 1000 needs about 2064 file descriptors .* but the limit is 256/)

  // More clients than descriptors: lila runs out, and its probes with it.
  const clients = []
  t.teardown(() => { for (const c of clients) c.destroy() })
  for (let i = 0; i < CLIENTS; i++) {
    const client = net.connect(lila.port, '127.0.0.1')
    client.on('error', () => {})
    client.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n')
    clients.push(client)
    await new Promise(resolve => client.once('connect', resolve).once('error', resolve))
  }
  await lila.waitForLine(/out of file descriptors \(limit 256\): health check of \S+ not made, not counted/)
  for (const c of clients) c.destroy()
  await lila.waitForLine(/accepting again on /)
  const after = await statusJson(lila)
  t.same(after.listeners[0].backends.map(b => b.status), ['up'], 'the backend stayed up through it')
  t.notMatch(lila.stderr, /backend \S+ down|panic/, 'no backend was said down, no panic')
})
