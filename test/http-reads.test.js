'use strict'

// Where HTTP mode's pooled backend sockets read into (lib/proxy/http1/connection-pool.js
// READ): one buffer all of them share, whose reads are copied out, and a bulk socket's
// own, handed to the client's write as it is and read into again only once no write
// holds it. A buffer read into too soon would change bytes a waiting write still holds:
// clients reading at different speeds over the same backends must each get their body
// byte for byte.

const t = require('tap')
const http = require('http')
const { spawnLila, within, settled, listenOn } = require('./fixtures/helpers')
const { blockFor, digestOf, writeAll, readDigest } = require('./fixtures/bodies')
const { ReadSteps, sharedThenOwn } = require('./fixtures/read-steps')

const BLOCKS = 256 // of 64 KiB: 16 MiB a body, more than loopback's socket buffers hold
const CLIENTS = 8

t.test(`${CLIENTS} clients, fast and slow, download ${BLOCKS / 16} MiB each over two backends: every body intact`, async t => {
  const backends = []
  for (const name of ['a', 'b']) {
    const server = http.createServer((req, res) => {
      const block = blockFor(req.url)
      // Content-Length and chunked, in large writes: bulk reads on lila's side.
      if (req.url.endsWith('/chunked')) res.setHeader('Transfer-Encoding', 'chunked')
      else res.setHeader('Content-Length', block.length * BLOCKS)
      res.setHeader('X-Backend', name)
      writeAll(res, Array(BLOCKS).fill(block))
    })
    await listenOn(t, server)
    backends.push(`127.0.0.1:${server.address().port}`)
  }
  const lila = await spawnLila(t, ['rr', ...backends, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none'])
  // Three downloads a client, one after another: a backend connection goes back to the
  // pool as a response ends, possibly while its last piece still waits in a slow
  // client's write, and serves the next request at once.
  const paths = Array.from({ length: CLIENTS * 3 }, (_, i) => `/${i}${i % 3 === 0 ? '/chunked' : ''}`)

  // A slow client stops reading now and then, for a timer's turn, so that lila's writes
  // to it wait part-written, holding what they were given, while the fast ones go on.
  const download = (path, slow) => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: lila.port, path, agent: false }, res => {
      readDigest(res, slow ? { pieces: 64, ms: 20 } : null).then(resolve)
      res.on('error', reject)
    }).on('error', reject)
  })
  const client = async c => {
    const results = []
    for (let k = 0; k < 3; k++) results.push(await download(paths[c * 3 + k], c % 2 === 1))
    return results
  }
  const got = (await within(120000, 'the downloads', Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c))))).flat()
  for (const [i, { size, digest }] of got.entries()) {
    t.equal(size, BLOCKS * 64 * 1024, `${paths[i]}: all of it`)
    t.equal(digest, digestOf(blockFor(paths[i]), BLOCKS), `${paths[i]} (${Math.floor(i / 3) % 2 ? 'slow' : 'fast'}): byte for byte`)
  }
  await settled(lila, { timeout: 10000 })
})

// The same rule in process, read by read: a pooled socket "reads" as Node's onread does
// (into what READ.buffer() gave it, then READ.callback), its owner saying whether it
// still holds the bytes it was handed, or letting the connection go back to its pool
// with the response's last read.
t.test('which buffer a pooled socket reads into next', async t => {
  const { EventEmitter } = require('events')
  const { Pool, UpstreamConnection, READ } = require('../lib/proxy/http1/connection-pool')
  const { SHARED } = require('../lib/proxy/read-buffers')
  const handed = []
  const owner = {
    holding: false,
    release: false, // the response ends on this read: the connection goes back to the pool
    holdsRead () { return this.holding },
    onUpstreamConnect () {},
    onUpstreamData (conn, chunk) {
      handed.push(chunk)
      if (this.release) conn.pool.release(conn)
    }
  }
  const pool = new Pool({ address: '127.0.0.1:1' }, { connectTimeout: 1000 })
  const socket = Object.assign(new EventEmitter(), { readableEnded: false, resume () {}, destroy () {} })
  const conn = new UpstreamConnection(pool, socket)
  conn.attach(owner)
  const steps = new ReadSteps(socket, READ, handed)

  const own = sharedThenOwn(t, steps)
  owner.holding = true
  steps.read(64 * 1024, 4)
  t.not(steps.into, own, 'a write still holds it: the socket gets another')
  t.equal(handed[handed.length - 1][0], 4, 'and what the write holds stays as it was')
  // The response's last read: the owner lets the connection go as it hands it on, and
  // says at that moment whether it holds any of it.
  owner.holding = false
  owner.release = true
  let before = steps.into
  steps.read(64 * 1024, 5)
  t.equal(pool.idle[pool.idle.length - 1], conn, 'the connection went back to its pool')
  t.equal(steps.into, before, 'let go holding none of the read: read into again')
  t.equal(pool.acquire(owner), conn, 'the next request takes it')
  owner.holding = true
  steps.read(64 * 1024, 6)
  t.not(steps.into, before, 'let go while its write still holds the read: another buffer')
  pool.acquire(owner)
  owner.holding = false
  before = steps.into
  steps.read(100, 7)
  t.equal(steps.into, before, 'a small last read, held by nothing: kept for the next response')
  pool.acquire(owner)
  owner.release = false
  steps.read(64 * 1024, 8)
  t.equal(steps.into, before, 'whose first read it takes without a copy')
  // The leg of an HTTP/2 client's exchange (http1/leg.js), whose stream may hold what
  // it wrote after the write completed (http2/session.js holdsWrites).
  const { Http1Leg } = require('../lib/proxy/http1/leg')
  const { Http2Session } = require('../lib/proxy/http2/session')
  conn.attach({
    partial: null,
    x: { client: { holdsWrites: Http2Session.prototype.holdsWrites } },
    holdsRead: Http1Leg.prototype.holdsRead,
    onUpstreamData: owner.onUpstreamData.bind({ release: false })
  })
  const leg = steps.into
  steps.read(64 * 1024, 9)
  t.not(steps.into, leg, 'an HTTP/2 stream\'s leg never gets its buffer read into again')
  steps.read(100, 10)
  t.equal(steps.into, SHARED, 'small reads go back to the shared buffer')
  t.equal(conn.reads.own, null, 'and hold no buffer of their own')
  // Every piece a write held kept its bytes; those that nothing held were written over
  // by the next read steps.into their buffer (3 by 4, 5 by 6, 7 by 8 and then 9, 8 by 9).
  t.same(handed.map(c => c[0]), [1, 2, 4, 4, 6, 6, 9, 9, 9, 10], 'every piece still held kept its bytes')
})

// A small body of a said length joins its head in one Buffer (http1/response-writer.js:
// the room heads.js responseHead leaves behind the head): each way its bytes can come
// from the backend, on one keep-alive client connection, the client gets them whole.
t.test('a small body joins its head: whole, after the head, or in pieces', async t => {
  const net = require('net')
  const waiting = [] // backend sockets that still owe the rest of a body
  const server = net.createServer(socket => {
    let text = ''
    socket.on('data', chunk => {
      text += chunk.toString('latin1')
      let end
      while ((end = text.indexOf('\r\n\r\n')) !== -1) {
        const path = text.slice(text.indexOf(' ') + 1, text.indexOf(' HTTP/'))
        const method = text.slice(0, text.indexOf(' '))
        text = text.slice(end + 4)
        const head = 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-Way: ' + path.slice(1) + '\r\n\r\n'
        if (method === 'HEAD' || path === '/whole') socket.write(head + (method === 'HEAD' ? '' : '0123456789'))
        else if (path === '/after') {
          socket.write(head)
          waiting.push(() => socket.write('0123456789'))
        } else {
          socket.write(head + '0123')
          waiting.push(() => socket.write('456789'))
        }
      }
    })
  })
  await listenOn(t, server)
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${server.address().port}`, '--protocol', 'http', '--port', '0',
    '--host', '127.0.0.1', '--check', 'none'])
  const client = net.connect(lila.port, '127.0.0.1')
  t.teardown(() => client.destroy())
  let got = ''
  let wanted = null // [what got must end with, resolve]
  client.on('data', chunk => {
    got += chunk.toString('latin1')
    if (waiting.length > 0 && got.includes('\r\n\r\n')) waiting.shift()() // the client has the head: the rest now
    if (wanted !== null && got.endsWith(wanted[0])) wanted[1]()
  })
  const ask = async (method, path, ending) => {
    got = ''
    const done = new Promise(resolve => { wanted = [ending, resolve] })
    client.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\n\r\n`)
    await within(5000, () => `${method} ${path}, got ${JSON.stringify(got)}`, done)
    return got
  }
  for (const path of ['/whole', '/after', '/pieces', '/whole']) {
    const text = await ask('GET', path, '0123456789')
    t.match(text, /^HTTP\/1\.1 200 OK\r\n/, `${path}: the status line`)
    t.ok(text.includes(`\r\nX-Way: ${path.slice(1)}\r\n`), `${path}: the backend's field`)
    t.ok(text.includes('\r\nContent-Length: 10\r\n'), `${path}: its length`)
    t.equal(text.slice(text.indexOf('\r\n\r\n') + 4), '0123456789', `${path}: the body, byte for byte, nothing after`)
  }
  const head = await ask('HEAD', '/whole', '\r\n\r\n')
  t.ok(head.includes('Content-Length: 10\r\n'), 'HEAD: the length said')
  t.equal(head.slice(head.indexOf('\r\n\r\n') + 4), '', 'HEAD: no body, no room written')
})
