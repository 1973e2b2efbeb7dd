'use strict'

// The keep-alive pools (lib/http/pool.js): on their own, with a real backend socket and
// stand-in exchanges that only record the connections they are given; and in a
// listener run in-process, where its pools can be looked at.

const t = require('tap')
const { Pool } = require('../lib/proxy/http1/connection-pool')
const { Http2Pool } = require('../lib/proxy/http2/pool')
const { createBalancer } = require('../lib/index')
const { parseCommandLine } = require('../lib/config/argv')
const net = require('net')
const { tcpBackend, within, until, captureLog, request, spawnLila } = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')

// Stands in for an Exchange: `connected` resolves with the first connection it gets;
// the socket's other events are of no interest here.
function standIn () {
  let resolve
  const connected = new Promise(_resolve => { resolve = _resolve })
  const ignore = () => {}
  return {
    connected,
    onUpstreamConnect (conn) { if (conn.ready) resolve(conn) },
    onUpstreamData: ignore,
    onUpstreamDrain: ignore,
    onUpstreamTimeout: ignore,
    onUpstreamError: ignore,
    onUpstreamEnd: ignore,
    onUpstreamClose: ignore,
    holdsRead: () => false // asked as it lets a connection go (connection-pool.js READ)
  }
}

async function poolFor (t) {
  const backend = await tcpBackend(t, 'b', socket => {}) // accepts, says nothing
  const pool = new Pool({ host: '127.0.0.1', port: backend.port }, { connectTimeout: 5000 })
  t.teardown(() => {
    pool.close()
    for (const socket of backend.sockets) socket.destroy()
  })
  return pool
}

t.test('a used-up connection (Keep-Alive max reached) is closed on release; the next exchange gets a fresh one', async t => {
  const pool = await poolFor(t)
  const first = standIn()
  t.equal(pool.acquire(first), await within(5000, 'the first connection', first.connected), 'acquire returns it')
  const conn = await first.connected
  conn.requestsLeft = 0 // the backend said max=1
  pool.release(conn)
  const next = standIn()
  pool.acquire(next)
  t.not(await within(5000, 'a connection for the next', next.connected), conn, 'a fresh connection')
  await until(() => conn.closed, 'the used-up one to close')
})

t.test('the pool has no cap of its own: every exchange given to it gets a connection at once', async t => {
  // The cap is the backend's max-conn (or the listener's), through the upstream's
  // visible queue; a second, hidden list here once held requests with no timeout.
  const pool = await poolFor(t)
  const exchanges = Array.from({ length: 1100 }, standIn)
  for (const exchange of exchanges) pool.acquire(exchange)
  t.equal(pool.size, 1100, 'a socket for each')
  const conns = await within(20000, 'every connection', Promise.all(exchanges.map(e => e.connected)))
  t.pass('1,100 connections, none waiting')
  for (const conn of conns) conn.destroy()
  await until(() => pool.size === 0, 'every connection to close', { timeout: 20000 })
})

t.test('the HTTP/2 pool has no cap of its own either: more streams than 64 sessions carry, each at once', async t => {
  // Sessions carry what the backend allows (100 streams each until its SETTINGS say);
  // the pool on Node's http2 once opened at most 64 per backend and kept the rest in a
  // list of its own, with no timeout and no trace in /status.
  const backend = await h2Backend(t, 'b')
  const pool = new Http2Pool({ host: '127.0.0.1', port: backend.port, hostHeader: backend.address }, { connectTimeout: 5000 })
  const heads = Array.from({ length: 65 * 100 }, () => {
    const call = {}
    call.head = new Promise((resolve, reject) => {
      call.handler = {
        onHead (s, head) { if (head.status >= 200) resolve(head.status) },
        onData () {},
        onTrailers () {},
        onReset (s, code) { reject(new Error(`reset ${code}`)) },
        onDrain () {}
      }
    })
    return call
  })
  const list = [':method', 'GET', ':scheme', 'http', ':authority', backend.address, ':path', '/']
  for (const call of heads) pool.request(call.handler, list, true)
  t.equal(pool.snapshot().sockets, 65, 'a session for every 100 streams')
  const statuses = await within(30000, 'an answer on every stream', Promise.all(heads.map(call => call.head)))
  t.equal(statuses.length, 6500)
  pool.close()
  await until(() => backend.sessionsOpen.size === 0, 'the sessions to close')
})

t.test('an idle connection the backend has ended is not reused, even before its close', async t => {
  const backend = await tcpBackend(t, 'b', socket => {})
  const pool = new Pool({ host: '127.0.0.1', port: backend.port }, { connectTimeout: 5000 })
  t.teardown(() => pool.close())
  const first = standIn()
  pool.acquire(first)
  const conn = await within(5000, 'the first connection', first.connected)
  pool.release(conn) // idle now
  await until(() => backend.sockets.size === 1, 'the backend to hold it')
  const second = standIn()
  conn.socket.once('end', () => pool.acquire(second)) // the FIN is in; the close is not yet
  for (const socket of backend.sockets) socket.end()
  const next = await within(5000, 'a connection for the second exchange', second.connected)
  t.not(next, conn, 'a fresh connection, not the ended one')
  t.equal(pool.reuses, 0)
  next.destroy()
})

t.test('a backend DNS took away, once drained, leaves no pool behind', async t => {
  // Answers every request head with a small keep-alive response; closes when lila does.
  const backend = await tcpBackend(t, 'b', socket => {
    socket.on('data', () => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n'))
    socket.on('end', () => socket.end())
  })
  const answers = { 'app.lila.test': ['127.0.0.1'] }
  const { log, waitFor } = captureLog()
  const { config } = parseCommandLine([
    'rr', `app.lila.test:${backend.port}`, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--check', 'none', '--resolve-interval', '10ms'
  ])
  const lb = createBalancer(config, { log, resolve: async name => answers[name] })
  const [address] = await lb.listen()
  t.teardown(() => lb.close(0))
  const listener = lb.listeners[0]
  const [gone] = listener.upstream.all()
  const res = await request(Number(address.split(':').pop()))
  t.equal(res.status, 200)
  t.match(listener.protocol.snapshotBackend(gone).pool, { idle: 1 }, 'the connection waits in the pool')
  answers['app.lila.test'] = ['127.0.0.2']
  await waitFor(/removed 127\.0\.0\.1/)
  await until(() => listener.protocol.snapshotBackend(gone).pool === null, 'the removed backend\'s pool to go')
  await within(5000, 'its idle connection to close', backend.open === 0 ? Promise.resolve() : backend.nextClose())
})

t.test('a request given up while its backend connection is still being opened closes that connection', async t => {
  // The backend accepts TCP but never answers the TLS handshake: lila's connection to it
  // stays "being opened". The client leaves; the connection must go with it, not stay
  // open to carry the request later for nobody.
  const backend = await tcpBackend(t, 'silent', socket => { // reads, never answers; closes when lila does
    socket.resume()
    socket.on('end', () => socket.end())
  })
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--check', 'none', '--backend-tls', '--backend-tls-insecure', '--connect-timeout', '60s'])
  const client = net.connect(lila.port, '127.0.0.1')
  client.on('error', () => {})
  client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => backend.open === 1, 'lila to open a connection to the backend')
  client.resetAndDestroy() // gone for good (a FIN alone could still read an answer)
  await until(() => backend.open === 0, 'that connection to close once the client left', { timeout: 5000 })
  t.equal(backend.connections, 1)
})

t.test('a connect the kernel finished while the loop was busy past --connect-timeout is not timed out', async t => {
  // The timeout's timer runs before the poll that delivers the connect: on a loop held
  // up (here by a busy wait of 4 timeouts), the kernel's finished connect must still win.
  // Before connectTimedOut waited for that poll, 295 of 1,200 uploads got 502 this way.
  const backend = await tcpBackend(t, 'b', socket => {})
  const pool = new Pool({ host: '127.0.0.1', port: backend.port }, { connectTimeout: 50 })
  t.teardown(() => {
    pool.close()
    for (const socket of backend.sockets) socket.destroy()
  })
  const exchange = standIn()
  let timedOut = false
  exchange.onUpstreamTimeout = () => { timedOut = true }
  pool.acquire(exchange)
  const busyUntil = Date.now() + 200
  while (Date.now() < busyUntil); // the kernel completes the handshake meanwhile
  const conn = await within(5000, 'the connection', exchange.connected)
  t.ok(conn.ready, 'connected')
  t.notOk(timedOut, 'not called timed out')
})

t.test('a connection not ready within the connect timeout is timed out, and its timer goes with it', async t => {
  // A TLS connection to a backend that never answers the handshake is never ready.
  const backend = await tcpBackend(t, 'silent', socket => socket.resume())
  const pool = new Pool({ host: '127.0.0.1', port: backend.port }, { connectTimeout: 50, tls: { rejectUnauthorized: false } })
  t.teardown(() => {
    pool.close()
    for (const socket of backend.sockets) socket.destroy()
  })
  const exchange = standIn()
  const timedOut = new Promise(resolve => { exchange.onUpstreamTimeout = resolve })
  const conn = pool.acquire(exchange)
  t.not(conn.connectTimer, null, 'a timer while connecting')
  t.equal(await within(5000, 'the connect timeout', timedOut), conn)
  t.notOk(conn.ready, 'never ready')
  t.equal(conn.connectTimer, null, 'the timer is gone once it fired')
})
