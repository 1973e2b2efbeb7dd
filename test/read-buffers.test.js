'use strict'

// One pool of read buffers for every plain backend socket (lib/proxy/read-buffers.js):
// tcp sessions' and the HTTP/1.1 pool's sockets take buffers of their own under one cap
// between them. In process: sockets "read" as Node's onread does (READ.callback, then
// READ.buffer() for the next read). test/tcp-reads.test.js and test/http-reads.test.js
// check each side's rule for reading into a buffer again.

const t = require('tap')
const { TcpSession, READ: TCP_READ, SESSION } = require('../lib/proxy/tcp')
const { EventEmitter } = require('events')
const { Pool, UpstreamConnection, READ: POOL_READ, CONNECTION } = require('../lib/proxy/http1/connection-pool')
const { SHARED, OWN_MAX, readIntoShared } = require('../lib/proxy/read-buffers')
const { BackendReads } = require('../lib/proxy/tcp-reads')
const net = require('net')
const { listenOn } = require('./fixtures/helpers')

const BULK_READ = 64 * 1024

// A pooled socket whose owner holds nothing it was handed (`onData`: what the owner
// does with each read).
const POOL = new Pool({ address: '127.0.0.1:1' }, { connectTimeout: 1000 })
function pooledSocket (onData = () => {}) {
  const socket = Object.assign(new EventEmitter(), { destroy () {} })
  new UpstreamConnection(POOL, socket).attach({ holdsRead: () => false, onUpstreamData: onData })
  return socket
}

// A tcp session's backend socket, piping, whose client took every write at once.
function tcpSocket (onData = () => {}) {
  const socket = { isPaused: () => false }
  const session = Object.create(TcpSession.prototype)
  Object.assign(session, { upstream: socket, upstreamReads: new BackendReads(), client: { writableLength: 0 } })
  session.fromUpstream = onData
  socket[SESSION] = session
  return socket
}

// The reads a socket made by either helper holds.
const readsOf = socket => socket[CONNECTION] ? socket[CONNECTION].reads : socket[SESSION].upstreamReads

t.test('tcp and the HTTP/1.1 pool share one cap on buffers of their own', async t => {
  const half = OWN_MAX - 10
  const next = []
  const sockets = []
  // A bulk read into the shared buffer on each socket: each asks for a buffer of its own.
  for (const [read, make] of [[POOL_READ, pooledSocket], [TCP_READ, tcpSocket]]) {
    for (let i = 0; i < half; i++) {
      const socket = make()
      sockets.push(socket)
      read.callback.call(socket, BULK_READ, SHARED)
      next.push(read.buffer())
    }
  }
  const own = next.filter(buffer => buffer !== SHARED)
  t.same(sockets.map(socket => readsOf(socket).own), next.map(buffer => buffer === SHARED ? null : buffer),
    'each socket holds the buffer it reads into next, or none')
  for (const socket of sockets) readsOf(socket).letGo(true) // under the cap again, for the next test
  t.equal(own.length, OWN_MAX, `${OWN_MAX} of ${2 * half} sockets read into buffers of their own next`)
  t.equal(new Set(own).size, OWN_MAX, 'each its own')
  t.ok(next.slice(0, half).every(buffer => buffer !== SHARED), 'every pooled socket, the first to ask')
  t.equal(next.slice(half).filter(buffer => buffer !== SHARED).length, OWN_MAX - half,
    'and the tcp sockets only what the pool left under the cap')
})

// A socket made while a read is handled (whatever runs with it: a pooled socket's owner
// may open another backend connection) asks for its first buffer at once: it must get
// the shared one, not the buffer the reading socket is to read into next (the order
// read-buffers.js asks for). Buffers compared by identity: a 64 KiB diff says nothing.
t.test('a socket made while a read is handled starts on the shared buffer', async t => {
  for (const [name, read, make] of [['pooled', POOL_READ, pooledSocket], ['tcp', TCP_READ, tcpSocket]]) {
    let made = null
    const socket = make(() => { made = read.buffer() })
    read.callback.call(socket, BULK_READ, SHARED)
    const mine = read.buffer()
    t.ok(made === SHARED, `${name}: the socket made meanwhile starts on the shared buffer`)
    t.ok(mine !== SHARED, `${name}: the reader, after its bulk read, on a buffer of its own`)
    t.ok(mine === readsOf(socket).own, `${name}: the one it took`)
    // A bulk read into its own buffer, read into again: chosen after the read too.
    read.callback.call(socket, BULK_READ, mine)
    t.ok(made === SHARED, `${name}: again when the reader reads into its own`)
    t.ok(read.buffer() === mine, `${name}: which it reads into again`)
    readsOf(socket).letGo(true)
  }
})

// A socket that went quiet holding a buffer of its own is bound to the shared one
// outside a read (tcp-reads.js): on a real socket, through Node's fields and handle.
// Its next read must land in the shared buffer and leave the one it held untouched (a
// write may still hold it, or another socket read into it).
t.test('readIntoShared: a real socket\'s next read lands in the shared buffer', async t => {
  const server = net.createServer(socket => socket.on('data', chunk => socket.write(`answer to ${chunk}`)))
  await listenOn(t, server)
  const mine = Buffer.alloc(64 * 1024)
  const reads = []
  let waiting = null
  const socket = net.connect({
    port: server.address().port,
    host: '127.0.0.1',
    onread: {
      buffer: mine,
      callback (nread, buffer) {
        reads.push({ buffer, text: buffer.toString('latin1', 0, nread) })
        waiting()
      }
    }
  })
  t.teardown(() => socket.destroy())
  const ask = question => new Promise(resolve => {
    waiting = resolve
    socket.write(question)
  })
  await new Promise(resolve => socket.once('connect', resolve))
  await ask('one')
  t.ok(reads[0].buffer === mine, 'read into the buffer it was given')
  t.equal(reads[0].text, 'answer to one', 'what was read')
  t.ok(readIntoShared(socket), 'bound to the shared buffer')
  await ask('two')
  t.ok(reads[1].buffer === SHARED, 'the next read is handed on in the shared buffer')
  t.equal(reads[1].text, 'answer to two', 'with what was read into it')
  t.equal(mine.toString('latin1', 0, 13), 'answer to one', 'the buffer it held is untouched')
  await ask('three')
  t.ok(reads[2].buffer === SHARED && reads[2].text === 'answer to three', 'and so on')
})
