'use strict'

// Per-backend max-conn and the wait queue, through the real `lila`: a backend never
// sees more than its max-conn; the rest wait their turn, or give up after
// --queue-timeout.

const t = require('tap')
const { tcpBackend, exchange, spawnLila } = require('./fixtures/helpers')

// No probes here: a probe is a connection too, and would count in the backend's peak.
const base = ['--host', '127.0.0.1', '--port', '0', '--check', 'none']

// Holds each request `ms` after it arrived, then answers with its name and closes;
// tracks how many requests it is handling at once. (Counted from the request to the
// answer: the backend's own 'close' events may be handled a moment after lila, having
// seen the answer and the FIN, already gave the slot to the next client.)
async function slowBackend (t, name, ms) {
  const backend = await tcpBackend(t, name, socket => {
    socket.once('data', () => {
      backend.handling++
      backend.peak = Math.max(backend.peak, backend.handling)
      let done = false
      const finish = () => {
        if (done) return
        done = true
        backend.handling--
      }
      const timer = setTimeout(() => {
        finish()
        socket.end(`${name}\n`)
      }, ms)
      socket.once('close', () => {
        clearTimeout(timer)
        finish()
      })
    })
  })
  backend.handling = 0
  backend.peak = 0
  return backend
}

t.test('max-conn=1, a handler that takes 200ms, 5 clients at once: all served, one at a time', async t => {
  const backend = await slowBackend(t, 'b', 200)
  const lila = await spawnLila(t, ['rr', `${backend.address},max-conn=1`, ...base])
  const results = await Promise.all(Array.from({ length: 5 }, (_, i) => exchange(lila.port, `request ${i}`)))
  t.same(results.map(r => r.data), Array(5).fill('b\n'), 'every client served')
  t.same(results.map(r => r.error), Array(5).fill(null))
  t.equal(backend.connections, 5)
  t.equal(backend.peak, 1, 'the backend never had two at once')
})

t.test('--queue-timeout 100ms: the late ones are closed, not held', async t => {
  const backend = await slowBackend(t, 'b', 200)
  const lila = await spawnLila(t, ['rr', `${backend.address},max-conn=1`, ...base, '--queue-timeout', '100ms'])
  const results = await Promise.all(Array.from({ length: 5 }, (_, i) => exchange(lila.port, `request ${i}`)))
  const served = results.filter(r => r.data === 'b\n').length
  t.equal(served, 1, 'one served; the slot frees after 200ms, the others gave up at 100ms')
  t.same(results.filter(r => r.data !== 'b\n').map(r => r.data), Array(4).fill(''), 'the others closed with nothing')
  t.equal(backend.connections, 1, 'the backend saw only the one it served')
  t.equal(backend.peak, 1)
  await lila.waitForLine(/a connection from 127\.0\.0\.1 left the queue: no backend slot within 100ms$/)
})

t.test('the queue spans backends: a slot on either goes to the oldest waiter', async t => {
  const one = await slowBackend(t, 'one', 100)
  const two = await slowBackend(t, 'two', 100)
  const lila = await spawnLila(t, ['lc', `${one.address},max-conn=1`, `${two.address},max-conn=2`, ...base])
  const results = await Promise.all(Array.from({ length: 9 }, (_, i) => exchange(lila.port, `request ${i}`)))
  t.same(results.filter(r => r.data === '').length, 0, 'all served')
  t.equal(one.connections + two.connections, 9)
  t.same([one.peak, two.peak], [1, 2], 'each filled to its max-conn, never above')
})
