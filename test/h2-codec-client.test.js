'use strict'

// lila's own HTTP/2 codec (lib/wire/h2) on the client side, the one lila will speak to
// HTTP/2 backends with (SessionPool, client Connections; test/fixtures/h2-client.js),
// against real servers: nghttpd (Debian nghttp2-server) and Node's http2. Bodies both
// ways under flow control, the server's SETTINGS_MAX_CONCURRENT_STREAMS, its GOAWAY
// (streams past its last id refused, safe to retry), PING finding a dead peer, and
// stream ids running out.

const t = require('tap')
const http2 = require('http2')
const net = require('net')
const { listenOn, until } = require('./fixtures/helpers')
const { h2client, request } = require('./fixtures/h2-client')
const { NO_NGHTTPD, patterned, nghttpd } = require('./fixtures/nghttp')

t.test('nghttpd: files, an upload echoed, a 3 MiB body, its stream limit', { skip: NO_NGHTTPD }, async t => {
  const port = await nghttpd(t, ['--echo-upload', '-m', '2'])
  const client = h2client(t, port)
  const first = await client.fetch(request('/index.html'))
  t.same([first.status, first.body.toString()], [200, 'hello from nghttpd\n'])
  t.same(client.pool.snapshot(), { sessions: 1, streams: 0, opened: 1 })
  const missing = await client.fetch(request('/nothing'))
  t.equal(missing.status, 404)
  const big = await client.fetch(request('/big'))
  t.ok(big.body.equals(patterned(3 * 1024 * 1024)), '3 MiB, byte for byte, under nghttpd\'s windows')
  const upload = patterned(1024 * 1024 + 5)
  const echoed = await client.fetch(request('/echo', 'POST'), { body: [upload.subarray(0, 500000), upload.subarray(500000)] })
  t.ok(echoed.body.equals(upload), '1 MiB up (nghttpd\'s 64 KiB window) and back')
  // nghttpd allows 2 streams a session: 20 at once take 10 sessions, none refused.
  const many = await Promise.all(Array.from({ length: 20 }, () => client.fetch(request('/index.html'))))
  t.same([...new Set(many.map(a => a.status))], [200], '20 at once, all answered')
  t.ok(client.pool.opened >= 10, `new sessions past the limit (${client.pool.opened} opened)`)
})

// A Node http2 server in the clear; `onStream(stream, headers, session)` answers.
async function nodeServer (t, onStream, settings = {}) {
  const server = http2.createServer({ settings })
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {})
    onStream(stream, headers, stream.session)
  })
  server.on('sessionError', () => {})
  server.on('session', session => session.on('error', () => {}))
  // Its connections, destroyed at the end: Node's server.close() would wait forever
  // for one whose session went away (GOAWAY) before its socket closed.
  const sockets = new Set()
  server.on('connection', socket => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  const port = await listenOn(t, server)
  t.teardown(() => { for (const socket of sockets) socket.destroy() })
  return { server, port }
}

t.test('Node http2: 1xx, trailers, its SETTINGS_MAX_CONCURRENT_STREAMS', async t => {
  const open = new Map() // session -> its streams open
  let most = 0
  const held = []
  const { port } = await nodeServer(t, (stream, headers) => {
    if (headers[':path'] === '/early') {
      stream.additionalHeaders({ ':status': 103, link: '</style.css>; rel=preload' })
      stream.respond({ ':status': 200 }, { waitForTrailers: true })
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }))
      return stream.end('with trailers')
    }
    const session = stream.session
    open.set(session, (open.get(session) || 0) + 1)
    most = Math.max(most, open.get(session))
    held.push(stream)
    stream.on('close', () => open.set(session, open.get(session) - 1))
    if (held.length === 6) for (const s of held.splice(0)) s.respond({ ':status': 200 }, { endStream: true })
  }, { maxConcurrentStreams: 3 })
  const client = h2client(t, port)
  const early = await client.fetch(request('/early'))
  t.same(early.interim.map(h => h.status), [103])
  t.same([early.status, early.body.toString(), early.trailers], [200, 'with trailers', ['grpc-status', 'grpc-status', '0']])
  const six = await Promise.all(Array.from({ length: 6 }, () => client.fetch(request('/held'))))
  t.same(six.map(a => a.status), Array(6).fill(200))
  t.ok(most <= 3, `never more than the server's 3 streams on a session (${most})`)
  t.equal(client.pool.opened, 2, 'a second session for the streams past 3')
})

t.test('Node http2: a GOAWAY refuses the streams past its last id; the rest finish', async t => {
  const held = []
  const { port } = await nodeServer(t, (stream, headers, session) => {
    if (headers[':path'] === '/warm' || headers[':path'] === '/after') return stream.respond({ ':status': 200 }, { endStream: true })
    held.push(stream)
    if (held.length < 3) return
    // Three streams arrived; the server goes away having processed the first two only.
    session.goaway(http2.constants.NGHTTP2_NO_ERROR, held[1].id)
    for (const s of held.slice(0, 2)) s.respond({ ':status': 200 }, { endStream: true })
    held[2].close(http2.constants.NGHTTP2_REFUSED_STREAM)
  })
  const client = h2client(t, port)
  await client.fetch(request('/warm'))
  const answers = await Promise.all([1, 2, 3].map(i => client.fetch(request(`/${i}`))))
  t.same(answers.map(a => a.status), [200, 200, null])
  t.match(answers[2], { code: 'REFUSED_STREAM' }, 'past the last id: refused, for the exchange to retry elsewhere')
  t.equal(client.pool.snapshot().sessions, 0, 'the session closes once its streams are done')
  const again = await client.fetch(request('/after'))
  t.equal(again.status, 200, 'a new request goes on a new session')
  t.equal(client.pool.opened, 2)
})

t.test('PING keeps a live session and finds a dead peer', async t => {
  const { port } = await nodeServer(t, stream => stream.respond({ ':status': 200 }, { endStream: true }))
  const client = h2client(t, port, { pool: { pingAfter: 1 } })
  await client.fetch(request('/'))
  const [session] = client.pool.sessions
  client.pool.sweep() // heard from since the last sweep
  client.pool.sweep() // quiet since: PING
  t.equal(session.pinged, true)
  await until(() => session.pinged === false, 'the PING\'s ack')
  client.pool.sweep()
  client.pool.sweep()
  t.equal(client.pool.snapshot().sessions, 1, 'answered: alive')
  // A peer that accepts and never says a thing.
  const dead = await listenOn(t, net.createServer(() => {}))
  const silent = h2client(t, dead, { pool: { pingAfter: 1 } })
  const answer = silent.fetch(request('/'))
  silent.pool.sweep() // quiet: pinged
  silent.pool.sweep() // still no answer: closed
  t.match(await answer, { status: null, code: 'CLOSED', peerSpoke: false }, 'its stream ends, never processed (the peer never spoke)')
  t.equal(silent.pool.snapshot().sessions, 0)
})

t.test('stream ids running out: a new session takes over', async t => {
  const { port } = await nodeServer(t, stream => stream.respond({ ':status': 200 }, { endStream: true }))
  const client = h2client(t, port, { options: { maxStreamId: 7 } }) // 4 streams a session
  for (let i = 0; i < 10; i++) t.equal((await client.fetch(request(`/${i}`))).status, 200)
  t.equal(client.pool.opened, 3, '10 requests, 4 ids a session: 3 sessions')
})

t.test('Node http2: 4 MiB both ways with a server that reads slowly', async t => {
  const { port } = await nodeServer(t, stream => {
    const chunks = []
    stream.on('data', chunk => {
      chunks.push(chunk)
      stream.pause()
      setImmediate(() => stream.resume()) // a slow reader: one chunk a turn
    })
    stream.on('end', () => {
      stream.respond({ ':status': 200 })
      stream.end(Buffer.concat(chunks))
    })
  })
  const client = h2client(t, port)
  const body = patterned(4 * 1024 * 1024)
  const pieces = Array.from({ length: 64 }, (_, i) => body.subarray(i * 65536, (i + 1) * 65536))
  const answer = await client.fetch(request('/up', 'POST'), { body: pieces, timeout: 60000 })
  t.ok(answer.body.equals(body), 'byte for byte')
})
