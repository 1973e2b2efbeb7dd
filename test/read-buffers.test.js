'use strict'

// One pool of read buffers for every plain backend socket (lib/proxy/read-buffers.js):
// tcp sessions' and the HTTP/1.1 pool's sockets take buffers of their own under one cap
// between them. In process: sockets "read" as Node's onread does (READ.callback, then
// READ.buffer() for the next read). test/tcp-reads.test.js and test/http-reads.test.js
// check each side's rule for reading into a buffer again.

const t = require('tap')
const { TcpSession, READ: TCP_READ, SESSION } = require('../lib/proxy/tcp')
const { READ: POOL_READ, CONNECTION } = require('../lib/proxy/http1/connection-pool')
const { SHARED, OWN_MAX } = require('../lib/proxy/read-buffers')

const BULK_READ = 64 * 1024

// A pooled socket whose owner holds nothing it was handed.
function pooledSocket () {
  const owner = { holdsRead: () => false, onUpstreamData () {} }
  return { [CONNECTION]: { owner, readBuffer: null } }
}

// A tcp session's backend socket, piping, whose client took every write at once.
function tcpSocket () {
  const socket = { isPaused: () => false }
  const session = Object.create(TcpSession.prototype)
  Object.assign(session, { upstream: socket, ownBuffer: null, client: { writableLength: 0 } })
  session.fromUpstream = () => {}
  socket[SESSION] = session
  return socket
}

t.test('tcp and the HTTP/1.1 pool share one cap on buffers of their own', async t => {
  const half = OWN_MAX - 10
  const next = []
  // A bulk read into the shared buffer on each socket: each asks for a buffer of its own.
  for (const [read, make] of [[POOL_READ, pooledSocket], [TCP_READ, tcpSocket]]) {
    for (let i = 0; i < half; i++) {
      read.callback.call(make(), BULK_READ, SHARED)
      next.push(read.buffer())
    }
  }
  const own = next.filter(buffer => buffer !== SHARED)
  t.equal(own.length, OWN_MAX, `${OWN_MAX} of ${2 * half} sockets read into buffers of their own next`)
  t.equal(new Set(own).size, OWN_MAX, 'each its own')
  t.ok(next.slice(0, half).every(buffer => buffer !== SHARED), 'every pooled socket, the first to ask')
  t.equal(next.slice(half).filter(buffer => buffer !== SHARED).length, OWN_MAX - half,
    'and the tcp sockets only what the pool left under the cap')
})
