'use strict'

// Where a plain client connection reads a long request body into (lib/proxy/http1/
// client-reads.js): read-buffers.js's buffers, a bulk read's own buffer read into again
// only once nothing holds what it read (the backend write it went to, a replay's copy,
// the next request's bytes). A buffer read into too soon would change bytes a waiting
// write still holds: bodies uploaded over one keep-alive connection to backends that
// read them at different speeds must each arrive byte for byte.

const t = require('tap')
const http = require('http')
const net = require('net')
const crypto = require('crypto')
const { blockFor, digestOf, writeAll, digestingBackend } = require('./fixtures/bodies')
const { ReadSteps, sharedThenOwn } = require('./fixtures/read-steps')
const { spawnLila, within, settled, listenOn, LILA } = require('./fixtures/helpers')

const BLOCKS = 32 // of 64 KiB: 2 MiB a body, more than loopback's socket buffers hold
const CLIENTS = 4
const UPLOADS = 3 // a client's, one after another on its keep-alive connection

t.test(`${CLIENTS} clients upload ${UPLOADS} bodies of ${BLOCKS / 16} MiB each to a fast and a slow backend: every body intact`, async t => {
  const backends = [await digestingBackend(t, false), await digestingBackend(t, true)]
  const lila = await spawnLila(t, ['rr', ...backends, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none'])
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS })
  t.teardown(() => agent.destroy())
  // With a Content-Length, or chunked (no length: Node's client frames it), in writes
  // of a block each: reads of up to 64 KiB on lila's side.
  const upload = name => new Promise((resolve, reject) => {
    const block = blockFor(name)
    const chunked = name.endsWith('chunked')
    const headers = chunked ? {} : { 'Content-Length': block.length * BLOCKS }
    const req = http.request({ host: '127.0.0.1', port: lila.port, method: 'POST', path: `/${name}`, agent, headers }, res => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', chunk => { text += chunk })
      res.on('end', () => resolve({ status: res.statusCode, text }))
      res.on('error', reject)
    }).on('error', reject)
    writeAll(req, Array(BLOCKS).fill(block))
  })
  const names = Array.from({ length: CLIENTS * UPLOADS }, (_, i) => `${i}${i % 3 === 1 ? '-chunked' : ''}`)
  const client = async c => {
    const results = []
    for (let k = 0; k < UPLOADS; k++) results.push(await upload(names[c * UPLOADS + k]))
    return results
  }
  const got = (await within(120000, 'the uploads', Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c))))).flat()
  for (const [i, { status, text }] of got.entries()) {
    t.equal(status, 200, `${names[i]}: answered`)
    t.same(JSON.parse(text), { size: BLOCKS * 64 * 1024, digest: digestOf(blockFor(names[i]), BLOCKS) }, `${names[i]}: byte for byte`)
  }
  agent.destroy()
  await settled(lila, { timeout: 10000 })
})

// The next request's head in the same write as a long body's end: its bytes stay for
// the session (unread) while the read they came in is let go.
t.test('a request pipelined right behind a long body is read as it was sent', async t => {
  const backends = [await digestingBackend(t, true)]
  const lila = await spawnLila(t, ['rr', ...backends, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none'])
  const block = blockFor('pipelined')
  const length = block.length * BLOCKS
  const socket = net.connect(lila.port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  const head = name => `POST /${name} HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n`
  let text = ''
  socket.setEncoding('latin1')
  socket.on('data', chunk => { text += chunk })
  const answers = within(60000, () => `two answers, got ${text.length} bytes`, new Promise(resolve => {
    const check = () => { if ((text.match(/"digest"/g) || []).length === 2) resolve() }
    socket.on('data', check)
  }))
  socket.write(head('first'))
  for (let i = 0; i < BLOCKS - 1; i++) socket.write(block)
  socket.write(Buffer.concat([block, Buffer.from(head('second'))]))
  for (let i = 0; i < BLOCKS; i++) socket.write(block)
  await answers
  const bodies = text.split(/HTTP\/1\.1 200 OK\r\n/).slice(1).map(answer => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)))
  const expected = { size: length, digest: digestOf(block, BLOCKS) }
  t.same(bodies, [expected, expected], 'both bodies byte for byte')
  socket.end()
  await settled(lila, { timeout: 10000 })
})

// A write that reports room while it still waits: Node 22 and later do so for a read
// under their 64 KiB high-water mark, and lila then goes on reading the client. Here
// every write does (a high-water mark above the body, fixtures/high-water-mark.js) and
// the backend reads nothing past the head until the client has sent all: lila's writes
// to it queue behind the kernel's buffers while it reads the rest of the body. A read
// buffer read into again while a queued write holds it (Leg#holdsBody) changes bytes
// the backend gets later. The body is sized from this machine's TCP buffer limits: when
// the client has handed over its last byte, lila has read more than the way to the
// backend holds, so several of its reads wait behind queued writes.
t.test('a body read on while lila\'s writes to the backend wait is intact', async t => {
  const fs = require('fs')
  const limit = file => { // (where there is no /proc, more than Linux allows by default)
    try { return Number(fs.readFileSync(`/proc/sys/net/ipv4/${file}`, 'utf8').trim().split(/\s+/)[2]) } catch { return 32 << 20 }
  }
  const buffers = limit('tcp_wmem') + limit('tcp_rmem') // what one direction of a connection may hold
  const blocks = Math.ceil((2 * buffers + 4 * 1024 * 1024) / (64 * 1024))
  const length = blocks * 64 * 1024
  // Each block its own (its number in every word), so that a piece read over shows.
  const blockAt = i => {
    const block = Buffer.allocUnsafe(64 * 1024)
    for (let j = 0; j < block.length; j += 4) block.writeUInt32LE((i * 16384 + j / 4) >>> 0, j)
    return block
  }
  const expected = crypto.createHash('sha256')
  for (let i = 0; i < blocks; i++) expected.update(blockAt(i))
  let release
  const released = new Promise(resolve => { release = resolve })
  const server = net.createServer(socket => {
    let head = Buffer.alloc(0)
    let size = -1
    const hash = crypto.createHash('sha256')
    socket.on('data', chunk => {
      if (size === -1) {
        head = Buffer.concat([head, chunk])
        const end = head.indexOf('\r\n\r\n')
        if (end === -1) return
        chunk = head.subarray(end + 4)
        size = 0
        socket.pause() // nothing more read until the client sent all
        released.then(() => socket.resume())
      }
      hash.update(chunk)
      size += chunk.length
      if (size < length) return
      const text = JSON.stringify({ size, digest: hash.digest('hex') })
      socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`)
    })
  })
  await listenOn(t, server)
  const env = { ...process.env, LILA_TEST_HIGH_WATER: String(4 * length) }
  const prefix = ['--require', require.resolve('./fixtures/high-water-mark'), LILA]
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${server.address().port}`, '--protocol', 'http', '--port', '0',
    '--host', '127.0.0.1', '--status-port', '0', '--check', 'none'], { lila: process.execPath, prefix, env })
  const socket = net.connect(lila.port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  let text = ''
  socket.setEncoding('latin1')
  const answered = new Promise(resolve => socket.on('data', chunk => {
    text += chunk
    if (text.includes('"digest"')) resolve()
  }))
  await within(60000, 'the body sent', new Promise((resolve, reject) => {
    socket.once('error', reject)
    socket.write(`POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n`)
    let i = 0
    const write = () => {
      while (i < blocks) {
        const last = i === blocks - 1
        const room = socket.write(blockAt(i++), last ? resolve : undefined)
        if (!room && !last) return socket.once('drain', write)
      }
    }
    write()
  }))
  release()
  await within(60000, () => `the answer, got ${text.length} bytes`, answered)
  const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))
  t.same(body, { size: length, digest: expected.digest('hex') }, `${blocks / 16} MiB byte for byte`)
  socket.end()
  await settled(lila, { timeout: 10000 })
})

// The same rule in process, read by read: a client socket "reads" as Node's onread does
// (into what the read buffers give it next, then the callback), its session and
// exchange saying whether they still hold the bytes they were handed.
t.test('which buffer a client socket reads into next', async t => {
  const { onRead, ClientReads, READS } = require('../lib/proxy/http1/client-reads')
  const { readsInto } = require('../lib/proxy/read-buffers')
  const handed = []
  const leg = { writing: false, holdsBody () { return this.writing } }
  const x = { tunnel: null, shadow: null, body: { kept: false, heldBytes: 0 }, leg }
  const session = { buf: null, exchange: x, onData (chunk) { handed.push(chunk) } }
  const socket = { [READS]: new ClientReads(session) }
  const steps = new ReadSteps(socket, readsInto(onRead), handed)

  let own = sharedThenOwn(t, steps)
  const holders = [
    ['the leg\'s write still holds it', () => { leg.writing = true }, () => { leg.writing = false }],
    ['it is held for a replay', () => { x.body = { kept: true, heldBytes: 1 } }, () => { x.body = { kept: false, heldBytes: 0 } }],
    ['the session holds bytes of it for the next request', () => { session.buf = Buffer.alloc(1) }, () => { session.buf = null }],
    ['the exchange has no leg yet', () => { x.leg = null }, () => { x.leg = leg }],
    ['a --mirror copy holds it', () => { x.shadow = {} }, () => { x.shadow = null }]
  ]
  let fill = 4
  for (const [why, hold, release] of holders) {
    own = steps.into
    hold()
    steps.read(64 * 1024, fill++)
    release()
    t.not(steps.into, own, `${why}: the socket gets another`)
  }
  // The exchange ends with the read (the session has none after it): its leg is asked.
  own = steps.into
  leg.writing = true
  session.onData = chunk => { handed.push(chunk); session.exchange = null }
  steps.read(64 * 1024, fill++)
  t.not(steps.into, own, 'the exchange that read it ended, its leg still writing it: another')
  own = steps.into
  leg.writing = false
  steps.read(64 * 1024, fill)
  t.equal(steps.into, own, 'nothing held it: read into again')
  // All but the third, whose buffer the fourth read was allowed into: nothing held it.
  t.same(handed.map(c => c[0]), [1, 2, 4, 4, 5, 6, 7, 8, 9, 10], 'every piece still held kept its bytes')
  // The connection closes: the session's close handler lets the buffer go.
  const { CLIENT, SESSION } = require('../lib/proxy/http1/session-events')
  socket[SESSION] = { onClose () {} }
  t.not(socket[READS].own, null, 'the socket holds a buffer of its own')
  CLIENT.close.call(socket)
  t.equal(socket[READS].own, null, 'and lets go of it when the connection closes')
})

// A backend socket made while a client's read is handled (a pool miss on the head that
// read brought) asks for its first buffer at once: it must get the shared one, not the
// buffer the client socket is to read into next.
t.test('a socket made while a read is handled does not take the reader\'s next buffer', async t => {
  const { onRead, ClientReads, READS } = require('../lib/proxy/http1/client-reads')
  const { readsInto, SHARED } = require('../lib/proxy/read-buffers')
  const next = readsInto(() => {}).buffer
  let made = null
  const session = { buf: null, exchange: null, onData () { made = next() } }
  const socket = { [READS]: new ClientReads(session) }
  const into = next()
  t.equal(into, SHARED, 'the client socket reads into the shared buffer')
  onRead.call(socket, 64 * 1024, into)
  const after = next()
  t.equal(made, SHARED, 'the socket made meanwhile starts on the shared buffer')
  t.not(after, SHARED, 'the client socket, after its bulk read, on a buffer of its own')
  t.equal(after, socket[READS].own, 'the one it took')
  socket[READS].letGo(true)
})
