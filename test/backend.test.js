'use strict'

// Backend as a pure state machine: one health state fed by probes (active) and by real
// traffic (passive), slow start and latency, all on a hand-driven clock. No sockets.

const t = require('tap')
const { FIRST_COOL_OFF_MS } = require('../lib/upstream/backend-health')
const { makeBackend } = require('./fixtures/helpers')

function setup (spec = {}, options = {}) {
  const clock = { now: 1000 }
  const settings = { now: () => clock.now, checked: true, rise: 2, fall: 3, ejectAfter: 3, ...options }
  const backend = makeBackend({ host: '10.0.3.1', ...spec }, settings)
  const events = []
  backend.on('down', (reason, previous) => events.push(`down from ${previous}: ${reason}`))
  backend.on('up', (reason, previous) => events.push(`up from ${previous}: ${reason}`))
  return { backend, clock, events }
}

function failTraffic (backend, n, reason = 'connection refused') {
  for (let i = 0; i < n; i++) {
    const lease = backend.acquire()
    lease.failed(reason)
    lease.release()
  }
}

t.test('active checks: the first probe decides, then rise and fall', async t => {
  const { backend, events } = setup()
  t.equal(backend.state, 'pending')
  t.notOk(backend.usable(1000), 'not checked yet: no traffic')
  backend.checkPassed('tcp connect ok')
  t.equal(backend.state, 'up', 'one pass is enough at first')
  backend.checkFailed('tcp connection refused')
  backend.checkFailed('tcp connection refused')
  t.equal(backend.state, 'up', 'two failures of three')
  backend.checkPassed('tcp connect ok')
  backend.checkFailed('tcp connection refused')
  backend.checkFailed('tcp connection refused')
  t.equal(backend.state, 'up', 'a pass in between resets the count')
  backend.checkFailed('http /health 500')
  t.equal(backend.state, 'down')
  t.same([backend.downSource, backend.downReason], ['check', 'http /health 500'])
  t.notOk(backend.usable(1000))
  backend.checkFailed('tcp connect timed out')
  t.equal(backend.downReason, 'tcp connect timed out', 'the reason follows the latest probe')
  backend.checkPassed('tcp connect ok')
  t.equal(backend.state, 'down', 'one pass of two')
  backend.checkPassed('tcp connect ok')
  t.equal(backend.state, 'up')
  t.same(events, [
    'up from pending: tcp connect ok',
    'down from up: http /health 500',
    'up from down: tcp connect ok'
  ], 'one event per transition, with the reason')
})

t.test('a first probe that fails: down at once', async t => {
  const { backend, events } = setup()
  backend.checkFailed('tcp connection refused')
  t.equal(backend.state, 'down')
  t.same(events, ['down from pending: tcp connection refused'])
})

t.test('passive ejection and active checks share the state', async t => {
  t.test('ejected by traffic: passing probes do not bring it back, a trial does', async t => {
    const { backend, clock, events } = setup()
    backend.checkPassed('tcp connect ok')
    failTraffic(backend, 3, 'connection reset')
    t.same([backend.state, backend.downSource], ['down', 'traffic'])
    t.match(backend.downReason, /^3 failures in a row \(connection reset\); next try in 5s$/)
    backend.checkPassed('tcp connect ok')
    backend.checkPassed('tcp connect ok')
    t.equal(backend.state, 'down', 'the port accepting says little about real traffic')
    clock.now += FIRST_COOL_OFF_MS
    t.ok(backend.usable(clock.now), 'a trial may go after the cool-off')
    const trial = backend.acquire()
    trial.succeeded()
    trial.release()
    t.equal(backend.state, 'up')
    t.same(events.slice(1).map(e => e.split(':')[0]), ['down from up', 'up from down'])
  })

  t.test('ejected by traffic, then failing probes: the probes own it now', async t => {
    const { backend, clock, events } = setup()
    backend.checkPassed('tcp connect ok')
    failTraffic(backend, 3)
    for (let i = 0; i < 3; i++) backend.checkFailed('tcp connection refused')
    t.same([backend.state, backend.downSource, backend.downReason], ['down', 'check', 'tcp connection refused'])
    t.same(events.slice(1), [
      'down from up: 3 failures in a row (connection refused); next try in 5s',
      'down from down: tcp connection refused'
    ], 'the probes taking over is said once')
    clock.now += 60000
    t.notOk(backend.usable(clock.now), 'no trial: only probes bring it back')
    const lease = backend.acquire() // panic traffic
    lease.succeeded()
    lease.release()
    t.equal(backend.state, 'down', 'real traffic does not override the probes')
    backend.checkPassed('tcp connect ok')
    backend.checkPassed('tcp connect ok')
    t.equal(backend.state, 'up')
  })

  t.test('down by probes: traffic failures change nothing', async t => {
    const { backend } = setup()
    backend.checkFailed('tcp connection refused')
    failTraffic(backend, 5)
    t.same([backend.downSource, backend.downReason], ['check', 'tcp connection refused'])
    t.equal(backend.failures, 5, 'but they are counted')
  })

  t.test('a lease gives one verdict: the first', async t => {
    const { backend } = setup({}, { checked: false })
    for (let i = 0; i < 3; i++) {
      const lease = backend.acquire()
      lease.succeeded()
      lease.failed('connection reset') // after the first byte: not the backend's fault
      lease.release()
    }
    t.equal(backend.state, 'up')
    t.equal(backend.failures, 0)
  })
})

t.test('slow start ramps the effective weight after a recovery', async t => {
  const { backend, clock } = setup({ weight: 10, slowStart: 10000 })
  backend.checkPassed('tcp connect ok')
  t.equal(backend.effectiveWeight, 10, 'not at start-up: everything starts together')
  for (let i = 0; i < 3; i++) backend.checkFailed('tcp connection refused')
  backend.checkPassed('ok')
  backend.checkPassed('ok')
  t.equal(backend.effectiveWeight, 1, 'just back: a tenth')
  clock.now += 5000
  t.equal(backend.effectiveWeight, 5, 'half way: half')
  clock.now += 4999
  t.ok(backend.effectiveWeight < 10)
  clock.now += 1
  t.equal(backend.effectiveWeight, 10, 'full weight after slow-start')
  t.equal(backend.snapshot().effectiveWeight, 10)
})

t.test('slow start for a backend that joins after start-up (DNS)', async t => {
  const { backend, clock } = setup({ weight: 4, slowStart: 1000 }, { rampOnFirstUp: true })
  backend.checkPassed('tcp connect ok')
  t.equal(backend.effectiveWeight, 0.4)
  clock.now += 1000
  t.equal(backend.effectiveWeight, 4)
})

t.test('slow start for a backend that joins unchecked (--check none)', async t => {
  const { backend, clock } = setup({ weight: 2, slowStart: 1000 }, { checked: false, rampOnFirstUp: true })
  t.equal(backend.state, 'up')
  t.equal(backend.effectiveWeight, 0.2)
  clock.now += 500
  t.equal(backend.effectiveWeight, 1)
})

t.test('latency: a decaying peak average', async t => {
  const { backend, clock } = setup()
  t.equal(backend.latencyEstimate(), null, 'never measured')
  backend.observeLatency(10)
  t.equal(backend.latencyEstimate(), 10, 'the first sample')
  backend.observeLatency(50)
  t.equal(backend.latencyEstimate(), 50, 'a peak replaces the estimate at once')
  clock.now += 10
  backend.observeLatency(5)
  const afterOne = backend.latencyEstimate()
  t.ok(afterOne > 45 && afterOne < 50, `a lower sample pulls it down slowly (${afterOne})`)
  clock.now += 10000
  const idle = backend.latencyEstimate()
  t.ok(idle < afterOne / 2 && idle > 0, `it decays while idle, so it gets tried again (${idle})`)
  for (let i = 0; i < 200; i++) {
    clock.now += 500
    backend.observeLatency(5)
  }
  t.ok(Math.abs(backend.latencyEstimate() - 5) < 0.5, 'steady samples: the estimate settles on them')
  t.equal(backend.snapshot().latency, Math.round(backend.latencyEstimate() * 1000) / 1000)
})

t.test('snapshot names the state and why', async t => {
  const { backend } = setup({ maxConn: 4, backup: true })
  backend.checkFailed('http /health 503')
  const snap = backend.snapshot()
  t.match(snap, {
    address: '10.0.3.1:80',
    state: 'down',
    up: false,
    downSource: 'check',
    downReason: 'http /health 503',
    lastCheck: 'http /health 503',
    draining: false,
    maxConn: 4,
    backup: true,
    effectiveWeight: 1,
    latency: null,
    live: 0
  })
})

t.test('passive health: whose failures eject (the client rule), and what the reason says', async t => {
  // `client` null: a failure no request can cause (or one another backend did not
  // have); an address: a failure that may be that client's request's doing.
  const fail = (backend, n, reason, cause, client) => {
    for (let i = 0; i < n; i++) {
      const lease = backend.acquire()
      lease.failed(reason, cause, client)
      lease.release()
    }
  }

  t.test('failures that may be one client\'s doing never eject, however many', async t => {
    const { backend } = setup({}, { checked: false, ejectAfter: 5 })
    fail(backend, 50, 'answered 503', '503', '192.0.2.1')
    t.equal(backend.state, 'up')
    t.equal(backend.failures, 50, 'but they are counted')
  })

  t.test('two clients behind the streak: ejected, and the reason names the answer', async t => {
    const { backend, events } = setup({}, { checked: false, ejectAfter: 5 })
    fail(backend, 4, 'answered 503', '503', '192.0.2.1')
    fail(backend, 1, 'answered 503', '503', '192.0.2.2')
    t.equal(backend.state, 'down')
    t.same(events, ['down from up: 5 answers of 503 in a row; next try in 5s'])
    t.same(backend.snapshot().ejections, { 503: 1 })
  })

  t.test('one failure no request can cause in the streak is enough', async t => {
    const { backend, events } = setup({}, { checked: false, ejectAfter: 5 })
    fail(backend, 4, 'closed the connection without answering', 'closed', '192.0.2.1')
    fail(backend, 1, 'connection refused', 'connect', null)
    t.same(events, ['down from up: 5 failures in a row (connection refused); next try in 5s'], 'mixed causes: the last one named')
    t.same(backend.snapshot().ejections, { connect: 1 })
  })

  t.test('a success ends the streak and what was known of its clients', async t => {
    const { backend } = setup({}, { checked: false, ejectAfter: 3 })
    fail(backend, 2, 'answered 502', '502', '192.0.2.1')
    const ok = backend.acquire()
    ok.succeeded()
    ok.release()
    fail(backend, 2, 'answered 502', '502', '192.0.2.2')
    t.equal(backend.state, 'up', 'two of three since the success, from one client')
    fail(backend, 1, 'answered 502', '502', '192.0.2.3')
    t.equal(backend.state, 'down')
  })

  t.test('--eject-after 0: never ejected by traffic', async t => {
    const { backend } = setup({}, { checked: false, ejectAfter: 0 })
    fail(backend, 20, 'connection refused', 'connect', null)
    t.equal(backend.state, 'up')
  })
})
