'use strict'

// Live counts return to zero on every path that ends a connection. These run the
// balancer in-process (the programmatic API) so its counters can be read directly.

const t = require('tap')
const net = require('net')
const {
  tcpBackend, greetThenEcho, deadPort, blackhole, exchange, openGreeted, until, within, captureLog, httpBackend,
  request, isSettled, startLila
} = require('./fixtures/helpers')

// Everything idle: no live connection on any backend, none active, waiting or queued.
const idle = stats => isSettled({ listeners: [stats] })

async function settles (t, lila) {
  await until(() => idle(lila.stats()), 'live counts to return to zero').catch(err => {
    t.comment(JSON.stringify(lila.stats(), null, 1))
    throw err
  })
  t.ok(idle(lila.stats()), 'every live count is back to zero')
}

t.test('sequential connections: counts, totals and bytes', async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => tcpBackend(t, name)))
  const lila = await startLila(t, ['rr', ...backends.map(b => b.address)])
  for (let i = 0; i < 30; i++) await exchange(lila.port, 'hi')
  await settles(t, lila)
  const stats = lila.stats()
  t.same(stats.backends.map(b => b.total), [10, 10, 10])
  t.same(stats.backends.map(b => b.bytesOut), [20, 20, 20], '"a\\n" ten times each')
  t.same(stats.backends.map(b => b.bytesIn), [20, 20, 20], '"hi" ten times each')
  t.equal(stats.accepted, 30)
})

t.test('failover through a refused and a silent backend', async t => {
  const good = await tcpBackend(t, 'good')
  const silent = await blackhole(t)
  const lila = await startLila(t, ['rr', `127.0.0.1:${await deadPort()}`, `127.0.0.1:${silent}`, good.address, '--connect-timeout', '100ms'])
  const results = await Promise.all(Array.from({ length: 6 }, () => exchange(lila.port)))
  t.same(results.map(r => r.data), Array(6).fill('good\n'))
  await settles(t, lila)
  const [refused, timedOut] = lila.stats().backends
  t.ok(refused.failures >= 1 && timedOut.failures >= 1, 'both failures counted')
})

t.test('no backend at all', async t => {
  const lila = await startLila(t, ['rr', `127.0.0.1:${await deadPort()}`, `127.0.0.1:${await deadPort()}`])
  await Promise.all(Array.from({ length: 5 }, () => exchange(lila.port, 'x')))
  await settles(t, lila)
  t.equal(lila.stats().unserved, 5)
})

t.test('the client resets while lila is still connecting: the attempt stops at once', async t => {
  const silent = await blackhole(t)
  const lila = await startLila(t, ['rr', `127.0.0.1:${silent}`, '--connect-timeout', '60s'])
  const socket = net.connect(lila.port, '127.0.0.1')
  await new Promise(resolve => socket.on('connect', resolve))
  await until(() => lila.stats().backends[0].live === 1, 'the connect attempt to start')
  socket.resetAndDestroy()
  await settles(t, lila)
})

t.test('a FIN while connecting may be a half-close: sent on once connected', async t => {
  const backend = await tcpBackend(t, 'b', socket => {
    let got = ''
    socket.on('data', chunk => { got += chunk })
    socket.on('end', () => socket.end(`got ${got}`))
  })
  const lila = await startLila(t, ['rr', backend.address])
  const { data } = await exchange(lila.port, 'request') // written and ended at once
  t.equal(data, 'got request')
  await settles(t, lila)
})

t.test('resets on either side', async t => {
  const backend = await tcpBackend(t, 'b', (socket, b) => {
    socket.write('b\n')
    socket.on('data', chunk => { if (String(chunk) === 'reset') socket.resetAndDestroy() })
  })
  const lila = await startLila(t, ['rr', backend.address])
  const one = await openGreeted(lila.port)
  one.socket.on('error', () => {})
  one.socket.write('reset')
  const two = await openGreeted(lila.port)
  two.socket.resetAndDestroy()
  await settles(t, lila)
})

t.test('idle timeout', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await startLila(t, ['rr', backend.address, '--idle-timeout', '100ms'])
  await Promise.all([openGreeted(lila.port), openGreeted(lila.port)])
  await settles(t, lila)
})

t.test('--max-conn: waiting clients, served and abandoned', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await startLila(t, ['rr', backend.address, '--max-conn', '2'])
  const served = await Promise.all([openGreeted(lila.port), openGreeted(lila.port)])
  const waiting = [net.connect(lila.port, '127.0.0.1'), net.connect(lila.port, '127.0.0.1')]
  await until(() => lila.stats().waiting === 2, 'two clients to wait')
  t.equal(lila.stats().active, 2)
  // A waiting client is not read (it waits in the kernel, as behind a full accept
  // queue), so one that gives up is found out when its turn comes; it must not block
  // the one behind it.
  waiting[0].destroy()
  const greeted = new Promise(resolve => waiting[1].once('data', resolve))
  served[0].socket.end()
  t.equal(String(await within(5000, 'the waiting client to be served', greeted)), 'b\n')
  waiting[1].end()
  served[1].socket.end()
  await settles(t, lila)
})

t.test('graceful close waits for open connections', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await startLila(t, ['rr', backend.address])
  const { socket } = await openGreeted(lila.port)
  let closed = false
  const closing = lila.lb.close(10000).then(() => { closed = true })
  await new Promise(resolve => { socket.once('data', resolve); socket.write('still') })
  t.notOk(closed, 'still draining while a connection is open')
  socket.end()
  await within(5000, 'close() to resolve', closing)
  t.ok(idle(lila.stats()))
})

t.test('http: every way a request can end brings the in-flight counts back to zero', async t => {
  const backend = await httpBackend(t, 'h', (req, res) => {
    if (req.url === '/slow') return // never answers: --timeout
    if (req.url === '/die') { res.setHeader('Content-Length', '10'); res.write('x'); return setImmediate(() => res.socket.destroy()) }
    if (req.url === '/wait') return setTimeout(() => res.end('late'), 200)
    res.end('ok')
  })
  backend.server.on('upgrade', (req, socket) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n')
    socket.pipe(socket)
  })
  const hangup = await tcpBackend(t, 'hangup', socket => socket.once('data', () => socket.destroy()))
  const lila = await startLila(t, ['rr', backend.address, hangup.address, '--protocol', 'http', '--timeout', '300ms'])
  const agent = new (require('http').Agent)({ keepAlive: true, maxSockets: 3 })
  t.teardown(() => agent.destroy())

  const results = await Promise.all([
    request(lila.port, { agent }),
    request(lila.port, { agent }),
    request(lila.port, { path: '/slow' }),
    request(lila.port, { path: '/die' }),
    request(lila.port, { method: 'POST', body: 'x', headers: { 'Content-Length': 1 } }),
    request(lila.port, { method: 'POST', body: 'y', headers: { 'Content-Length': 1 } }),
    exchange(lila.port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n'),
    exchange(lila.port, 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n')
  ])
  t.same(results.slice(0, 2).map(r => r.status), [200, 200])
  t.equal(results[2].status, 504)
  // A client that leaves while its request is with the backend.
  const leaving = net.connect(lila.port, '127.0.0.1')
  leaving.write('GET /wait HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => lila.stats().backends.some(b => b.live > 0), 'the request to be in flight')
  leaving.destroy()
  // A tunnel, opened and closed.
  const tunnel = net.connect(lila.port, '127.0.0.1')
  tunnel.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n')
  await new Promise(resolve => tunnel.once('data', resolve))
  t.equal(lila.stats().active >= 1, true)
  tunnel.end()
  agent.destroy() // its idle keep-alive connections would rightly stay open
  await settles(t, lila)
})

t.test('passive ejection: a backend that resets every connection is taken out, tried after the cool-off', async t => {
  const clock = { now: 1000000 }
  let behave = false
  // Resets each connection once the client's request arrives; later, behaves.
  const flaky = await tcpBackend(t, 'flaky', socket => {
    if (behave) return socket.end('flaky\n')
    socket.once('data', () => socket.resetAndDestroy())
  })
  const good = await tcpBackend(t, 'good', (socket, b) => socket.end('good\n'))
  const { log, waitFor } = captureLog()
  const lila = await startLila(t, ['rr', flaky.address, good.address, '--eject-after', '3'], { now: () => clock.now, log })
  const results = []
  for (let i = 0; i < 6; i++) results.push(await exchange(lila.port, 'hi'))
  t.same(results.map(r => r.data), ['', 'good\n', '', 'good\n', '', 'good\n'], 'rr: every other one hits the reset')
  t.same(results.filter(r => r.data === '').map(r => r.error && r.error.code), ['ECONNRESET', 'ECONNRESET', 'ECONNRESET'], 'the reset is passed on')
  await waitFor(new RegExp(`^backend ${flaky.address} down: 3 failures in a row \\(connection reset\\); next try in 5s$`))
  for (let i = 0; i < 4; i++) t.equal((await exchange(lila.port, 'hi')).data, 'good\n', 'ejected: no more traffic to it')
  t.equal(flaky.connections, 3)
  let flakyBackend = lila.stats().backends[0]
  t.match(flakyBackend, { state: 'down', downSource: 'traffic', failures: 3 })

  clock.now += 5000 // the cool-off is over: one trial, which fails
  for (let i = 0; i < 4 && flaky.connections === 3; i++) await exchange(lila.port, 'hi')
  t.equal(flaky.connections, 4, 'one trial connection')
  flakyBackend = lila.stats().backends[0]
  t.match(flakyBackend.downReason, /connection reset \(trial\); next try in 10s/, 'out again, for twice as long')
  await waitFor(new RegExp(`^backend ${flaky.address} still down: connection reset \\(trial\\); next try in 10s$`))
  for (let i = 0; i < 4; i++) await exchange(lila.port, 'hi')
  t.equal(flaky.connections, 4, 'no traffic during the longer cool-off')

  behave = true
  clock.now += 10000
  for (let i = 0; i < 4 && flaky.connections === 4; i++) await exchange(lila.port, 'hi')
  await waitFor(new RegExp(`^backend ${flaky.address} up: a connection succeeded$`))
  const back = []
  for (let i = 0; i < 4; i++) back.push((await exchange(lila.port, 'hi')).data)
  t.ok(back.includes('flaky\n'), 'back in the rotation')
  await settles(t, lila)
})

t.test('queue: waiting clients that leave or time out leave no count behind', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await startLila(t, ['rr', `${backend.address},max-conn=1`, '--queue-timeout', '300ms'])
  const held = await openGreeted(lila.port)
  const leaving = net.connect(lila.port, '127.0.0.1')
  await new Promise(resolve => leaving.once('connect', resolve))
  const timingOut = exchange(lila.port, 'x') // a request, then a half-close: waits for the answer
  await until(() => lila.stats().queued === 2, 'two clients to queue')
  t.equal(lila.stats().backends[0].live, 1, 'max-conn 1: one live')
  // A FIN could be a half-close (a request sent, the answer awaited): a client that
  // leaves for good is seen by its reset.
  leaving.resetAndDestroy()
  await until(() => lila.stats().queued === 1, 'the leaving client to leave the queue')
  const { data } = await within(5000, 'the queue timeout', timingOut)
  t.equal(data, '', 'closed after --queue-timeout')
  t.equal(lila.stats().queueTimeouts, 1)
  t.equal(lila.stats().unserved, 1)
  held.socket.end()
  await settles(t, lila)
})

t.test('DNS: a removed backend drains and its count returns to zero', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const answers = { 'app.lila.test': ['127.0.0.1'] }
  const { log, waitFor } = captureLog()
  const lila = await startLila(t, ['rr', `app.lila.test:${backend.port}`, '--resolve-interval', '10ms'], { resolve: async name => answers[name], log })
  const open = await openGreeted(lila.port)
  answers['app.lila.test'] = ['127.0.0.2'] // nothing listens there on this port
  await waitFor(/removed 127\.0\.0\.1, 1 connection left to drain/)
  t.match(lila.stats().backends, [{ address: '127.0.0.2:' + backend.port, draining: false }, { address: '127.0.0.1:' + backend.port, draining: true, live: 1 }])
  const echoed = new Promise(resolve => open.socket.once('data', chunk => resolve(String(chunk))))
  open.socket.write('still there')
  t.equal(await within(5000, 'the echo', echoed), 'still there', 'the open connection is undisturbed')
  open.socket.end()
  await waitFor(new RegExp(`^backend 127\\.0\\.0\\.1:${backend.port} drained$`))
  await settles(t, lila)
  t.equal(lila.stats().backends.length, 1, 'gone once drained')
})
