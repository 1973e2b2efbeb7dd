'use strict'

// Upstream without sockets: the wait queue, panic, backups, and DNS changes through an
// injected resolver. Health is driven by hand through the Backend's probe reports.

const t = require('tap')
const { until, within, backendSpec: spec, makeUpstream: make } = require('./fixtures/helpers')

// Collects what a waiter is handed.
function waiter () {
  const got = []
  return { got, onLease: (lease, reason) => got.push(lease === null ? `gave up: ${reason}` : lease) }
}

t.test('the queue: first come, first served, never above max-conn', async t => {
  const { upstream } = make(t, { backends: [spec('10.0.5.1', { maxConn: 1 }), spec('10.0.5.2', { maxConn: 1 })], queueTimeout: 60000 })
  const [a, b] = upstream.backends
  const leases = [upstream.acquire({}), upstream.acquire({})]
  t.same(leases.map(l => l.backend), [a, b], 'the fast path: a slot each, synchronously')
  t.equal(upstream.acquire({}), null, 'both full')
  const waiters = [waiter(), waiter(), waiter()]
  for (const w of waiters) t.ok(upstream.enqueue({}, null, w.onLease), 'queued')
  t.equal(upstream.stats().queued, 3)

  leases[1].release()
  t.equal(waiters[0].got[0].backend, b, 'the oldest waiter gets the freed slot at once')
  t.same([waiters[1].got, waiters[2].got], [[], []])
  t.equal(b.live, 1, 'b still holds one: never above its max-conn')
  t.equal(upstream.acquire({}), null, 'a newcomer does not overtake the queue')

  leases[0].release()
  t.equal(waiters[1].got[0].backend, a)
  waiters[0].got[0].release()
  t.equal(waiters[2].got[0].backend, b)
  t.equal(upstream.stats().queued, 0)
  t.same([a.live, b.live], [1, 1], 'each holds the one lease it handed on')
})

t.test('a waiter gives up after --queue-timeout; one that left is skipped', async t => {
  const { upstream } = make(t, { backends: [spec('10.0.5.3', { maxConn: 1 })], queueTimeout: 30 })
  const held = upstream.acquire({})
  const leaving = waiter()
  const patient = waiter()
  const ticket = upstream.enqueue({}, null, leaving.onLease)
  upstream.enqueue({}, null, patient.onLease)
  ticket.cancel()
  ticket.cancel() // idempotent
  t.equal(upstream.stats().queued, 1)
  await until(() => patient.got.length === 1, 'the waiter to give up')
  t.same(patient.got, ['gave up: no backend slot within 30ms'])
  t.same(leaving.got, [], 'a cancelled waiter hears nothing')
  t.match(upstream.stats(), { panic: false, queued: 0, queueTimeouts: 1 })
  held.release()
  t.equal(upstream.backends[0].live, 0)
})

t.test('no queue when waiting cannot help', async t => {
  t.test('--queue-timeout 0', async t => {
    const { upstream } = make(t, { backends: [spec('10.0.5.4', { maxConn: 1 })], queueTimeout: 0 })
    upstream.acquire({})
    t.equal(upstream.enqueue({}, null, () => {}), null)
  })

  t.test('every backend already tried by this connection', async t => {
    const { upstream } = make(t, { backends: [spec('10.0.5.5', { maxConn: 1 })], queueTimeout: 1000 })
    upstream.acquire({})
    t.equal(upstream.enqueue({}, new Set(upstream.backends), () => {}), null)
  })

  t.test('weight 0 everywhere', async t => {
    const { upstream } = make(t, { backends: [spec('10.0.5.6', { weight: 0 })], queueTimeout: 1000 })
    t.equal(upstream.acquire({}), null)
    t.equal(upstream.enqueue({}, null, () => {}), null)
  })
})

t.test('a waiter that tried the freed backend lets the next one have it', async t => {
  const { upstream } = make(t, { backends: [spec('10.0.5.7', { maxConn: 1 }), spec('10.0.5.8', { maxConn: 1 })], queueTimeout: 60000 })
  const [a, b] = upstream.backends
  const [la, lb] = [upstream.acquire({}), upstream.acquire({})]
  const retry = waiter()
  const fresh = waiter()
  upstream.enqueue({}, new Set([a]), retry.onLease) // a failed it already
  upstream.enqueue({}, null, fresh.onLease)
  la.release()
  t.same(retry.got, [], 'a is not for the retry')
  t.equal(fresh.got[0].backend, a, 'the next waiter takes it')
  lb.release()
  t.equal(retry.got[0].backend, b)
})

t.test('close: every waiter gives up', async t => {
  const { upstream } = make(t, { backends: [spec('10.0.5.9', { maxConn: 1 })], queueTimeout: 60000 })
  upstream.acquire({})
  const w = waiter()
  upstream.enqueue({}, null, w.onLease)
  upstream.close()
  t.same(w.got, ['gave up: lila is shutting down'])
  t.equal(upstream.enqueue({}, null, () => {}), null, 'nothing queues after close')
})

t.test('a backend coming up serves the queue', async t => {
  const { upstream } = make(t, {
    backends: [spec('10.0.6.1', { maxConn: 1 }), spec('10.0.6.2')],
    check: { type: 'tcp' },
    queueTimeout: 60000
  })
  const [a, b] = upstream.backends
  a.checkPassed('tcp connect ok')
  b.checkFailed('tcp connection refused')
  upstream.acquire({})
  const w = waiter()
  t.ok(upstream.enqueue({}, null, w.onLease))
  b.checkPassed('tcp connect ok')
  t.same(w.got, [], 'one pass of two')
  b.checkPassed('tcp connect ok')
  t.equal(w.got[0].backend, b)
})

t.test('panic: every backend down, traffic still goes to them', async t => {
  const { upstream, lines } = make(t, { backends: [spec('10.0.7.1'), spec('10.0.7.2'), spec('10.0.7.3', { backup: true })], check: { type: 'tcp' }, fall: 1, rise: 1 })
  const [a, b, backup] = upstream.backends
  for (const backend of upstream.backends) backend.checkPassed('tcp connect ok')
  upstream.started = true // as after start(): changes are logged
  a.checkFailed('tcp connection refused')
  t.equal(upstream.choose({}), b)
  b.checkFailed('tcp connection refused')
  t.equal(upstream.choose({}), backup, 'every primary down: the backup')
  t.notOk(upstream.stats().panic)
  backup.checkFailed('tcp connect timed out')
  t.ok(upstream.stats().panic, 'all down: panic')
  const chosen = new Set()
  for (let i = 0; i < 4; i++) chosen.add(upstream.choose({}))
  t.same([...chosen].sort((x, y) => x.host.localeCompare(y.host)), [a, b], 'in panic, primaries first, in turn')
  b.checkPassed('tcp connect ok')
  t.notOk(upstream.stats().panic)
  t.equal(upstream.choose({}), b)
  t.same(lines.filter(l => /panic/.test(l)), [
    'panic: every backend is down (3); sending traffic to them anyway',
    'panic over: a backend is up again'
  ], 'one line entering, one leaving')
  t.same(lines.filter(l => /^backend/.test(l)), [
    'backend 10.0.7.1:80 down: tcp connection refused',
    'backend 10.0.7.2:80 down: tcp connection refused',
    'backend 10.0.7.3:80 down: tcp connect timed out',
    'backend 10.0.7.2:80 up: tcp connect ok'
  ])
})

t.test('discovery: addresses join and drain as the name changes', async t => {
  const answers = { 'app.lila.test': ['10.0.8.1', '10.0.8.2'] }
  const resolved = []
  const resolve = async name => {
    resolved.push(name)
    const answer = answers[name]
    if (answer instanceof Error) throw answer
    return answer
  }
  const { upstream, lines, waitFor } = make(t, {
    backends: [spec('10.0.8.9'), spec('app.lila.test', { maxConn: 5 })],
    resolveInterval: 5
  }, { resolve })
  const hosts = () => upstream.backends.map(b => b.host)
  t.same(hosts(), ['10.0.8.9'], 'before start: only the IP literal, never resolved')
  await upstream.start()
  t.same(hosts(), ['10.0.8.9', '10.0.8.1', '10.0.8.2'])
  t.same(upstream.backends.map(b => [b.name, b.maxConn]), [[null, null], ['app.lila.test', 5], ['app.lila.test', 5]], 'each address has the options given')
  t.match(lines.join('\n'), /10\.0\.8\.1:80 \(app\.lila\.test\)\s+up\s+not checked/, 'the start-up table')

  answers['app.lila.test'] = ['10.0.8.2', '10.0.8.3', '10.0.8.1']
  await waitFor(/^app\.lila\.test:80 resolves to 10\.0\.8\.1, 10\.0\.8\.2, 10\.0\.8\.3 \(added 10\.0\.8\.3\)$/)
  t.same(hosts(), ['10.0.8.9', '10.0.8.1', '10.0.8.2', '10.0.8.3'])

  const old = upstream.backends[1]
  const open = old.acquire() // a connection on 10.0.8.1
  answers['app.lila.test'] = ['10.0.8.3']
  await waitFor(/^app\.lila\.test:80 resolves to 10\.0\.8\.3 \(removed 10\.0\.8\.1, 10\.0\.8\.2, 1 connection left to drain\)$/)
  t.same(hosts(), ['10.0.8.9', '10.0.8.3'])
  const drainingNow = upstream.snapshot().filter(b => b.draining)
  t.same(drainingNow.map(b => [b.address, b.live]), [['10.0.8.1:80', 1]], 'the removed backend with a connection drains')
  for (let i = 0; i < 10; i++) t.not(upstream.choose({}), old, 'no new traffic to it')

  answers['app.lila.test'] = new Error('boom')
  answers['app.lila.test'].code = 'ENOTFOUND'
  const mark = lines.length
  await waitFor(/^cannot resolve app\.lila\.test:80: name not found; keeping 10\.0\.8\.3$/, { from: mark })
  const calls = resolved.length
  await until(() => resolved.length >= calls + 3, 'more resolutions')
  t.equal(lines.slice(mark).filter(l => /cannot resolve/.test(l)).length, 1, 'a failure is logged once while it lasts')
  t.same(hosts(), ['10.0.8.9', '10.0.8.3'], 'the last good set is kept')

  answers['app.lila.test'] = ['10.0.8.3', '10.0.8.1']
  await waitFor(/resolves to 10\.0\.8\.3, 10\.0\.8\.1 \(added 10\.0\.8\.1\)/)
  t.equal(upstream.backends[2], old, 'back while still draining: the same backend, one max-conn')
  t.notOk(old.retired)
  open.release()
  t.equal(old.live, 0)
  t.notOk(lines.some(l => /drained/.test(l)), 'it was revived, not drained')

  answers['app.lila.test'] = ['10.0.8.3']
  await waitFor(/removed 10\.0\.8\.1\)$/)
  t.same(upstream.snapshot().filter(b => b.draining), [], 'nothing open: gone at once')
  t.same([...new Set(resolved)], ['app.lila.test'], 'the IP literal is never resolved')
})

t.test('discovery: a drained backend goes when its last connection ends', async t => {
  const answers = { 'db.lila.test': ['10.0.9.1'] }
  const { upstream, waitFor } = make(t, { backends: [spec('db.lila.test')], resolveInterval: 5 }, { resolve: async name => answers[name] })
  await upstream.start()
  const lease = upstream.acquire({})
  answers['db.lila.test'] = ['10.0.9.2']
  await waitFor(/1 connection left to drain/)
  t.equal(upstream.live, 1, 'the draining connection still counts')
  lease.release()
  await waitFor(/^backend 10\.0\.9\.1:80 drained$/)
  t.same(upstream.snapshot().map(b => b.address), ['10.0.9.2:80'])
  t.equal(upstream.live, 0)
})

t.test('discovery: a name that does not resolve at start, an address given twice', async t => {
  const answers = { 'late.lila.test': Object.assign(new Error('nope'), { code: 'ENOTFOUND' }), 'dup.lila.test': ['10.0.9.5', '10.0.9.6'] }
  const resolve = async name => {
    if (answers[name] instanceof Error) throw answers[name]
    return answers[name]
  }
  const { upstream, lines, waitFor } = make(t, { backends: [spec('10.0.9.5'), spec('dup.lila.test'), spec('late.lila.test')], resolveInterval: 5 }, { resolve })
  await upstream.start()
  t.same(upstream.backends.map(b => b.address), ['10.0.9.5:80', '10.0.9.6:80'], 'an address already given is not added twice')
  t.match(lines.join('\n'), /late\.lila\.test:80\s+-\s+cannot resolve: name not found/, 'the table says which name failed')
  answers['late.lila.test'] = ['10.0.9.7']
  await waitFor(/^late\.lila\.test:80 resolves to 10\.0\.9\.7 \(added 10\.0\.9\.7\)$/)
  t.equal(upstream.backends.length, 3)
})

t.test('discovery: a reload that changes --resolve-interval resolves the names again, at its pace', async t => {
  const { listenerConfig } = require('../lib/config/defaults')
  let calls = 0
  const backends = [spec('again.lila.test')]
  const settings = { mode: 'round-robin', check: null, queueTimeout: 0, backends }
  const { upstream } = make(t, { ...settings, resolveInterval: 0 }, { resolve: async () => { calls++; return ['10.0.9.6'] } })
  await upstream.start()
  t.equal(calls, 1, 'resolved once')
  upstream.update(listenerConfig({ ...settings, resolveInterval: 5 }))
  await within(5000, 'resolved again', until(() => calls >= 3, 'resolutions every 5 ms'))
  t.same(upstream.backends.map(b => b.address), ['10.0.9.6:80'], 'the same backend')
})

t.test('discovery: --resolve-interval 0 resolves once', async t => {
  let calls = 0
  const { upstream } = make(t, { backends: [spec('once.lila.test')], resolveInterval: 0 }, { resolve: async () => { calls++; return ['10.0.9.9'] } })
  await upstream.start()
  // Another upstream with a short interval, as a clock: by the time it resolved 3
  // times, the first one would have too.
  let ticks = 0
  const { upstream: other } = make(t, { backends: [spec('tick.lila.test')], resolveInterval: 5 }, { resolve: async () => { ticks++; return ['10.0.9.8'] } })
  await other.start()
  await within(5000, 'ticks', until(() => ticks >= 4, 'ticks'))
  t.equal(calls, 1)
})
