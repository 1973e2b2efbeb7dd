'use strict'

// What an idle connection keeps (bench/memory.js measures what it costs): in process,
// lila's own sessions looked at once their connections went idle. No timing.

const t = require('tap')
const { tcpBackend, greetThenEcho, openGreeted, httpBackend, startLila, until } = require('./fixtures/helpers')
const net = require('net')

// The Timeout a socket timeout leaves on its socket (Node keeps a cleared one there).
function socketTimer (socket) {
  const key = Object.getOwnPropertySymbols(socket).find(s => s.description === 'timeout')
  return key === undefined ? null : socket[key]
}

t.test('tcp: an idle proxied connection keeps no connect timer: the listener\'s sweep keeps the connect timeout', async t => {
  const backend = await tcpBackend(t, 'a', greetThenEcho)
  const { lb, port } = await startLila(t, ['rr', backend.address, '--connect-timeout', '2s'])
  const open = []
  for (let i = 0; i < 3; i++) open.push(await openGreeted(port))
  t.teardown(() => { for (const o of open) o.socket.destroy() })
  const sessions = [...lb.listeners[0].sessions]
  t.equal(sessions.length, 3)
  for (const session of sessions) {
    t.ok(session.piping, 'connected and piping')
    t.notOk(Object.values(session).some(v => v instanceof Object && v.constructor.name === 'Timeout'), 'the session holds no Timeout')
    t.equal(socketTimer(session.upstream), null, 'the backend socket holds no Timeout')
    t.same([session.replay.held, session.replay.kept], [null, null], 'nothing held or kept from the client')
  }
})

t.test('http: an idle keep-alive client keeps no request, buffer or timer', async t => {
  const backend = await httpBackend(t, 'a')
  const { lb, port } = await startLila(t, ['rr', backend.address, '--protocol', 'http'])
  const client = net.connect(port, '127.0.0.1')
  t.teardown(() => client.destroy())
  await new Promise(resolve => client.once('connect', resolve))
  // Two requests on the one connection; the second's response read in full.
  for (let i = 0; i < 2; i++) {
    client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    await new Promise(resolve => client.once('data', resolve))
  }
  const [session] = lb.listeners[0].sessions
  t.equal(session.exchange, null, 'no exchange')
  t.equal(session.buf, null, 'no bytes held')
  t.equal(session.headTimer, null, 'no head timer')
  t.equal(socketTimer(session.client), null, 'no socket timeout on the client')
})

// An HTTP/2 stream waiting on its HTTP/1.1 backend: one request held unanswered.
// Returns its exchange, in the lila `startLila` made.
async function waitingStream (t, extra = []) {
  const http2 = require('http2')
  let requests = 0
  const backend = await tcpBackend(t, 'silent', socket => socket.on('data', () => { requests++ })) // reads, never answers
  const { lb, port } = await startLila(t, ['rr', backend.address, '--protocol', 'http', ...extra])
  const session = http2.connect(`http://127.0.0.1:${port}`)
  session.on('error', () => {})
  t.teardown(() => session.destroy())
  const stream = session.request({ ':path': '/' })
  stream.on('error', () => {})
  await until(() => requests > 0, 'the request to reach the backend')
  const [h2] = lb.listeners[0].sessions
  const [x] = h2.exchanges
  return x
}

t.test('h2: a stream waiting on an HTTP/1.1 backend keeps no timer on the backend socket', async t => {
  const x = await waitingStream(t, ['--connect-timeout', '2s'])
  const conn = x.leg.conn
  t.ok(conn.ready, 'connected')
  t.equal(conn.connectTimer, null, 'the connect timer went with the connect')
  t.equal(socketTimer(conn.socket), null, 'the backend socket holds no Timeout')
  t.equal(conn.socket.listenerCount('timeout'), 0, 'nor listens for one')
  t.equal(conn.socket.listenerCount('data'), 0, 'a plain socket reads into lila\'s buffers: no \'data\' listener')
})

t.test('h2: a waiting exchange reads its pool\'s body limit there, keeps no boxed copy', async t => {
  const x = await waitingStream(t, ['--max-body-size', '1k'])
  t.notOk(Object.hasOwn(x, 'maxBody'), 'no field of its own')
  t.equal(x.maxBody, 1024, 'the pool\'s')
})
