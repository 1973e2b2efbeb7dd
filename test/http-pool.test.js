'use strict'

// The keep-alive pool on its own (lib/http/pool.js), with a real backend socket and
// stand-in exchanges that only record the connections they are given.

const t = require('tap')
const { Pool, MAX_SOCKETS } = require('../lib/http/pool')
const { tcpBackend, within } = require('./fixtures/helpers')

// Stands in for an Exchange: `connected` resolves with the first connection it gets;
// the socket's other events are of no interest here.
function standIn () {
  let resolve
  const connected = new Promise(r => { resolve = r })
  const ignore = () => {}
  return {
    connected,
    onUpstreamConnect (conn) { if (conn.ready) resolve(conn) },
    onUpstreamData: ignore,
    onUpstreamDrain: ignore,
    onUpstreamTimeout: ignore,
    onUpstreamError: ignore,
    onUpstreamEnd: ignore,
    onUpstreamClose: ignore
  }
}

async function poolFor (t) {
  const backend = await tcpBackend(t, 'b', socket => {}) // accepts, says nothing
  const pool = new Pool({ host: '127.0.0.1', port: backend.port }, { connectTimeout: 5000 })
  t.teardown(() => {
    pool.waiting.length = 0
    pool.close()
    for (const socket of backend.sockets) socket.destroy()
  })
  return pool
}

t.test('a used-up connection (Keep-Alive max reached) is not handed to a waiting exchange', async t => {
  const pool = await poolFor(t)
  const first = standIn()
  pool.acquire(first)
  const conn = await within(5000, 'the first connection', first.connected)
  pool.size += MAX_SOCKETS - 1 // every other socket busy: the next exchange waits
  const waiter = standIn()
  pool.acquire(waiter)
  t.equal(pool.waiting.length, 1, 'the second exchange waits')
  conn.requestsLeft = 0 // the backend said max=1
  pool.release(conn)
  const next = await within(5000, 'a connection for the waiter', waiter.connected)
  t.not(next, conn, 'the waiter got a fresh connection')
  t.ok(conn.closed, 'the used-up one was closed')
  pool.size -= MAX_SOCKETS - 1
})
