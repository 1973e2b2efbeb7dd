'use strict'

// HTTP/2 abuse beyond the floods (http2-floods.test.js), against the spawned lila: an
// HPACK bomb (a small header block that expands, through the dynamic table, to a header
// list hundreds of times its size), a client that never opens its flow-control window
// on large responses, and a long-lived backend session whose stream ids run out. For
// each: lila stays up, bounded, and serves.

const t = require('tap')
const http = require('http')
const { spawnLila, httpBackend, memoryOf, until, request, listenOn } = require('./fixtures/helpers')
const { h2connect, h2request, h2Backend } = require('./fixtures/h2')
const { TYPE, FLAG, frame, encodeBlock, hpackInt, rawClient } = require('./fixtures/h2-frames')

const MIB = 1024 * 1024
const LOCAL = ['--host', '127.0.0.1', '--port', '0']
const SETTINGS_INITIAL_WINDOW_SIZE = 4
const NO_ERROR = Buffer.from([0, 0, 0, 0])

// A GET's header block with one field of `size` bytes put in the dynamic table
// (literal with incremental indexing, a new name), then `refs` references to it (one
// byte each: dynamic index 62).
function bombBlock (size, refs) {
  const name = Buffer.from('x-bomb')
  const value = Buffer.alloc(size, 'a')
  return Buffer.concat([
    encodeBlock([':method', 'GET', ':scheme', 'http', ':path', '/bomb', ':authority', 'localhost']),
    Buffer.from([0x40]), hpackInt(name.length, 7, 0), name, hpackInt(value.length, 7, 0), value,
    Buffer.alloc(refs, 0x80 | 62)
  ])
}

t.test('an HPACK bomb: each request answered 431 at a loop\'s cost, the connection and lila go on', async t => {
  const backend = await httpBackend(t, 'app')
  const lila = await spawnLila(t, [backend.address, '--protocol', 'http', ...LOCAL])
  const start = memoryOf(lila.child.pid).rss
  const client = rawClient(lila.port)
  // 4,000 bytes in the table, then 12,000 one-byte references: a 16 KiB frame that
  // decodes to a 48 MB header list (lila allows 64 KiB).
  const block = bombBlock(4000, 12000)
  t.ok(block.length <= 16384, `the block fits one frame (${block.length} bytes)`)
  client.send(frame(TYPE.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, block))
  t.equal(await client.status(1), 431, 'answered 431, the list never kept')
  // Again and again on the same connection: the table holds the entry; each block of
  // 12,000 references is a loop.
  const refs = Buffer.alloc(12000, 0x80 | 62)
  const head = encodeBlock([':method', 'GET', ':scheme', 'http', ':path', '/bomb', ':authority', 'localhost'])
  const bomb = Buffer.concat([head, refs])
  for (let id = 3; id <= 401; id += 2) client.send(frame(TYPE.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, bomb))
  t.equal(await client.status(401), 431, '200 more bombs: each answered 431')
  // The same connection still serves a request.
  client.send(frame(TYPE.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 403, head))
  t.equal(await client.status(403), 200, 'a good request on the same connection')
  t.equal(backend.requests, 1, 'no bomb reached the backend')
  const session = await h2connect(t, lila.port)
  t.equal((await h2request(session)).status, 200, 'another client served')
  const rss = memoryOf(lila.child.pid).rss
  t.ok(rss - start < 64 * MIB, `lila's memory bounded (VmRSS ${(rss / MIB).toFixed(1)} MiB, from ${(start / MIB).toFixed(1)})`)
  client.socket.destroy()
  session.close()
  t.equal(lila.child.exitCode, null, 'lila is still running')
})

t.test('a client that never opens its window on large responses holds them at the backend, not in lila', async t => {
  const SIZE = 256 * MIB
  const STREAMS = 20
  // A backend that writes each response as fast as its socket takes it, counting what
  // the socket took (written less what waits in its buffer).
  const taken = new Map()
  const chunk = Buffer.alloc(MIB, 'x')
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-length': SIZE })
    let written = 0
    const write = () => {
      while (written < SIZE) {
        written += chunk.length
        taken.set(res, () => written - res.writableLength)
        if (!res.write(chunk)) return res.once('drain', write)
      }
      res.end()
    }
    write()
    res.on('close', () => taken.delete(res))
  })
  await listenOn(t, server)
  const lila = await spawnLila(t, [`127.0.0.1:${server.address().port}`, '--protocol', 'http', ...LOCAL])
  const start = memoryOf(lila.child.pid).rss
  // Its streams' windows are 0: lila may send no DATA at all.
  const client = rawClient(lila.port, { settings: [SETTINGS_INITIAL_WINDOW_SIZE, 0] })
  const head = encodeBlock([':method', 'GET', ':scheme', 'http', ':path', '/big', ':authority', 'localhost'])
  const open = FLAG.END_HEADERS | FLAG.END_STREAM
  for (let i = 0; i < STREAMS; i++) client.send(frame(TYPE.HEADERS, open, 1 + 2 * i, head))
  for (let i = 0; i < STREAMS; i++) t.equal(await client.status(1 + 2 * i), 200, `stream ${1 + 2 * i}: the head, no DATA`)
  // The backends are held: what their sockets took stops growing.
  let last = -1
  let steady = 0
  const total = () => [...taken.values()].reduce((sum, f) => sum + f(), 0)
  await until(() => {
    const now = total()
    steady = taken.size === STREAMS && now === last ? steady + 1 : 0
    last = now
    return steady >= 10
  }, 'the backends to be held', { timeout: 20000, every: 50 })
  t.ok(last < STREAMS * 16 * MIB, `the backends could hand over ${(last / MIB).toFixed(1)} MiB of ${STREAMS * SIZE / MIB}`)
  t.notOk(client.frames.some(f => f.type === TYPE.DATA && f.payload.length > 0), 'no DATA sent past a window of 0')
  const rss = memoryOf(lila.child.pid).rss
  t.ok(rss - start < 96 * MIB, `lila holds little of it (VmRSS ${(rss / MIB).toFixed(1)} MiB, from ${(start / MIB).toFixed(1)})`)
  // Served meanwhile, and the stalled client's streams let go when it leaves.
  t.equal((await request(lila.port)).status, 200, 'an HTTP/1.1 client served meanwhile')
  client.send(frame(TYPE.RST_STREAM, 0, 1, NO_ERROR))
  client.socket.destroy()
  await until(() => taken.size === 0, 'every backend response to be closed', { timeout: 20000 })
  t.equal(lila.child.exitCode, null, 'lila is still running')
})

t.test('a long-lived backend session whose stream ids run out: a new session takes over, nothing is lost', async t => {
  const backend = await h2Backend(t, 'b')
  // Eleven streams a session (ids 1 to 21): a test's knob for RFC 9113's 2^31-1.
  const env = { ...process.env, LILA_TEST_H2_LAST_STREAM_ID: '21' }
  const lila = await spawnLila(t, [backend.address, '--protocol', 'http', '--backend-protocol', 'h2', ...LOCAL], { env })
  for (let i = 0; i < 30; i++) t.equal((await request(lila.port, { path: `/one/${i}` })).status, 200, `request ${i}, one at a time`)
  const session = await h2connect(t, lila.port)
  const burst = await Promise.all(Array.from({ length: 60 }, (_, i) => h2request(session, { path: `/burst/${i}` })))
  t.same(burst.map(r => r.status), Array(60).fill(200), '60 at once, over the ends of several sessions')
  t.equal(backend.requests, 90, 'each reached the backend once')
  t.ok(backend.sessions >= 9, `a new session for every 11 streams (${backend.sessions})`)
  // Spent sessions close once their streams are done: no more are left open than the
  // last one (and one the burst opened beside it).
  await until(() => backend.sessionsOpen.size <= 2, 'spent sessions to close', { timeout: 10000 })
  t.pass(`${backend.sessionsOpen.size} backend session(s) left open`)
  session.close()
  t.equal((await lila.stop()).code, 0, 'lila stops cleanly')
})
