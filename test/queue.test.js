'use strict'

// Per-backend max-conn and the wait queue, through the real `lila`: a backend never
// sees more than its max-conn; the rest wait their turn, or give up after
// --queue-timeout.

const t = require('tap')
const { tcpBackend, exchange, spawnLila, statusJson, within, until } = require('./fixtures/helpers')

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
  // Each backend holds every connection until the test releases it, and notes which
  // client (by the label it sent) it got.
  const arrivals = [] // { label, backend } in the order the backends got them
  const held = new Map() // label -> the backend's socket
  const listeners = []
  const holding = name => tcpBackend(t, name, socket => {
    socket.once('data', chunk => {
      const label = String(chunk)
      held.set(label, socket)
      arrivals.push({ label, backend: name })
      for (const listener of listeners.splice(0)) listener()
    })
  })
  const arrived = count => within(10000, `connection ${count} to reach a backend (so far ${JSON.stringify(arrivals)})`, new Promise(resolve => {
    const check = () => arrivals.length >= count ? resolve(arrivals[count - 1]) : listeners.push(check)
    check()
  }))
  const release = label => held.get(label).end('done\n')

  const one = await holding('one')
  const two = await holding('two')
  const lila = await spawnLila(t, [
    'lc', `${one.address},max-conn=1`, `${two.address},max-conn=1`, ...base,
    '--queue-timeout', '60s', '--status-port', '0'
  ])
  // Polls /status.json until the listener counts `count` queued (bounded).
  const queued = async count => {
    let seen = null
    await until(async () => (seen = (await statusJson(lila)).listeners[0].queued) === count, `${count} queued`)
      .catch(err => { throw new Error(`${err.message} (last: ${seen})`) })
  }

  // Both slots taken, one on each backend.
  const clients = [exchange(lila.port, 'h1'), exchange(lila.port, 'h2')]
  const holders = [await arrived(1), await arrived(2)]
  t.same(holders.map(a => a.backend).sort(), ['one', 'two'], 'one holder on each backend')
  // Four waiters, each counted as queued before the next one comes.
  const waiters = ['w1', 'w2', 'w3', 'w4']
  for (let i = 0; i < waiters.length; i++) {
    clients.push(exchange(lila.port, waiters[i]))
    await queued(i + 1)
  }
  t.equal(arrivals.length, 2, 'no waiter reached a backend while both were full')

  // Free one slot at a time, in the order they were taken (so alternating backends):
  // each goes to the oldest waiter, on the backend that freed it.
  const served = []
  for (let k = 0; k < waiters.length; k++) {
    const freed = arrivals[k]
    release(freed.label)
    const next = await arrived(k + 3)
    served.push(next.label)
    t.equal(next.backend, freed.backend, `the slot ${freed.label} freed on ${freed.backend} went to a waiter`)
  }
  t.same(served, waiters, 'served first come, first served')
  for (const { label } of arrivals.slice(waiters.length)) release(label)
  const results = await within(10000, 'every client to be answered', Promise.all(clients))
  t.same(results.map(r => r.data), Array(6).fill('done\n'), 'every client got its answer')
  t.equal((await statusJson(lila)).listeners[0].queueTimeouts, 0, 'nobody gave up')
})
