'use strict'

// Runtime control in-process: what drain, disable, enable, weight, add and remove do to
// an Upstream (upstream.js), and how control.js finds listeners and backends and says
// no. Real TCP backends only where probes matter.

const t = require('tap')
const { createControl } = require('../lib/admin/control')
const { ControlError, ConflictError } = require('../lib/errors')
const { tcpBackend, deadPort, until, backendSpec: spec, makeUpstream: make, upstreamConfig } = require('./fixtures/helpers')

// Who the next n picks go to.
function picks (upstream, n) {
  const out = []
  for (let i = 0; i < n; i++) {
    const backend = upstream.choose({})
    out.push(backend === null ? null : backend.host)
  }
  return out
}

// The ports the next n picks go to (backends that share a host).
function portsPicked (upstream, n) {
  return Array.from({ length: n }, () => upstream.choose({})?.port ?? null)
}

t.test('drain: no new traffic, open connections finish, said when the last one ends', async t => {
  const { upstream, lines } = make(t, { backends: [spec('10.0.1.1'), spec('10.0.1.2')] })
  const [a] = upstream.backends
  const open = a.acquire()
  upstream.drain(a)
  t.same(picks(upstream, 4), Array(4).fill('10.0.1.2'), 'nothing new goes to a')
  t.equal(a.live, 1, 'its open connection goes on')
  t.match(a.snapshot(), { status: 'draining', admin: 'draining', reason: 'by an operator; 1 connection left', state: 'up' })
  t.equal(lines[lines.length - 1], 'backend 10.0.1.1:80 draining (by an operator); 1 connection left open')
  open.release()
  t.equal(lines[lines.length - 1], 'backend 10.0.1.1:80 drained')
  t.match(a.snapshot(), { status: 'drained', reason: 'by an operator' })
  upstream.drain(a) // again: nothing more said
  t.equal(lines[lines.length - 1], 'backend 10.0.1.1:80 drained')

  await upstream.enable(a)
  t.same(picks(upstream, 2).sort(), ['10.0.1.1', '10.0.1.2'], 'enabled: traffic again at once')
  t.match(a.snapshot(), { status: 'up', admin: null, adminAt: null, reason: null })
})

t.test('drained or disabled backends are not "down": panic counts only the others', async t => {
  const { upstream } = make(t, { backends: [spec('10.0.2.1'), spec('10.0.2.2')] })
  const [a, b] = upstream.backends
  upstream.drain(a)
  for (let i = 0; i < b.ejectAfter; i++) b.acquire().failed('connection refused') // ejects b
  t.equal(b.state, 'down')
  t.equal(upstream.stats().panic, true, 'b, the only backend left, is down: panic')
  t.same(picks(upstream, 2), ['10.0.2.2', '10.0.2.2'], 'in panic traffic goes to b, never to the drained a')
  upstream.disable(a)
  t.same(picks(upstream, 1), ['10.0.2.2'])
})

t.test('weight: 0 takes no new traffic, and shares follow the new weight', async t => {
  const { upstream, lines } = make(t, { backends: [spec('10.0.3.1'), spec('10.0.3.2')] })
  const [a, b] = upstream.backends
  upstream.setWeight(a, 0)
  t.equal(lines[lines.length - 1], 'backend 10.0.3.1:80 weight 1 -> 0 (by an operator)')
  t.same(picks(upstream, 3), Array(3).fill('10.0.3.2'))
  t.equal(upstream.stats().panic, false, 'weight 0 is not down')
  upstream.setWeight(a, 3)
  const shares = picks(upstream, 40)
  t.equal(shares.filter(h => h === '10.0.3.1').length, 30, '3:1')
  t.equal(a.snapshot().weight, 3)
  t.equal(b.snapshot().weight, 1)
})

t.test('disable pauses the probes; enable checks again before any traffic', async t => {
  const a = await tcpBackend(t, 'a', socket => socket.destroy())
  const b = await tcpBackend(t, 'b', socket => socket.destroy())
  const { upstream, lines, waitFor } = make(t, {
    backends: [spec('127.0.0.1', { port: a.port }), spec('127.0.0.1', { port: b.port })],
    check: { type: 'tcp' },
    checkInterval: 20,
    checkTimeout: 20
  })
  await upstream.start()
  const [ba] = upstream.backends
  upstream.disable(ba)
  const disabledAt = lines.length
  t.match(ba.snapshot(), { status: 'disabled', reason: 'by an operator' })
  t.same(portsPicked(upstream, 4), [b.port, b.port, b.port, b.port], 'only b is picked')
  // b keeps being probed; a is not.
  const probesOfA = a.connections
  const probesOfB = b.connections
  await until(() => b.connections >= probesOfB + 3, 'three more probes of b')
  t.ok(a.connections <= probesOfA + 1, 'no probe of a started after the disable (one may have been under way)')
  const settledA = a.connections
  await until(() => b.connections >= probesOfB + 6, 'three more probes of b')
  t.equal(a.connections, settledA, 'still none')

  // Under maintenance, a stops; lila says nothing about it.
  await new Promise(resolve => a.server.close(resolve))
  const mark = lines.length
  await upstream.enable(ba)
  t.equal(lines[mark], `backend 127.0.0.1:${a.port} enabled (by an operator)`)
  await waitFor(new RegExp(`^backend 127\\.0\\.0\\.1:${a.port} down: tcp connection refused$`), { from: mark })
  t.match(ba.snapshot(), { status: 'down', admin: null })
  // (About a: b's 20 ms probes may time out on a busy machine, and say so.)
  const aboutA = lines.slice(disabledAt, mark).filter(l => l.startsWith(`backend 127.0.0.1:${a.port} `))
  t.same(aboutA, [], 'nothing was said about a while it was disabled')
})

t.test('a reload that turns checks on leaves a disabled backend unprobed until enabled', async t => {
  const a = await tcpBackend(t, 'a', socket => socket.destroy())
  const b = await tcpBackend(t, 'b', socket => socket.destroy())
  const backends = [spec('127.0.0.1', { port: a.port }), spec('127.0.0.1', { port: b.port })]
  const { upstream } = make(t, { backends })
  await upstream.start()
  const [ba] = upstream.backends
  upstream.disable(ba)
  upstream.update(upstreamConfig({ backends, check: { type: 'tcp' }, checkInterval: 20, checkTimeout: 20 }))
  await until(() => b.connections >= 3, 'three probes of b')
  t.equal(a.connections, 0, 'none of a, disabled')
  await upstream.enable(ba)
  t.ok(a.connections >= 1, 'probed once enabled')
  t.match(ba.snapshot(), { status: 'up' })
})

t.test('enable after disable with --check none: up at once', async t => {
  const { upstream } = make(t, { backends: [spec('10.0.4.1')] })
  const [a] = upstream.backends
  upstream.disable(a)
  t.equal(upstream.choose({}), null)
  await upstream.enable(a)
  t.equal(upstream.choose({}), a)
})

t.test('addBackend: checked first, then in the rotation; twice is refused', async t => {
  const a = await tcpBackend(t, 'a')
  const c = await tcpBackend(t, 'c')
  const { upstream, lines } = make(t, { backends: [spec('127.0.0.1', { port: a.port })], check: { type: 'tcp' }, checkInterval: 60000 })
  await upstream.start()
  const added = await upstream.addBackend(spec('127.0.0.1', { port: c.port, weight: 2 }))
  t.equal(added.length, 1)
  t.match(added[0], { address: `127.0.0.1:${c.port}`, state: 'up', weight: 2, lastCheck: 'tcp connect ok' }, 'resolved after its first probe')
  t.ok(lines.includes(`backend 127.0.0.1:${c.port} added (by an operator)`))
  t.same(portsPicked(upstream, 3).sort(), [a.port, c.port, c.port].sort(), 'in the rotation, at its weight of 2')
  t.equal(upstream.backends.length, 2)
  await t.rejects(upstream.addBackend(spec('127.0.0.1', { port: c.port })), new ConflictError(`127.0.0.1:${c.port} is already a backend`))

  const dead = await deadPort()
  const [down] = await upstream.addBackend(spec('127.0.0.1', { port: dead }))
  t.match(down, { state: 'down', downReason: 'tcp connection refused' }, 'a dead one is added, and down')
})

t.test('addBackend and removeBackend of a name; removal drains', async t => {
  const answers = { 'svc.lila.test': ['10.0.6.1', '10.0.6.2'] }
  const resolve = async name => answers[name]
  const { upstream, waitFor } = make(t, { backends: [spec('10.0.6.9')], resolveInterval: 5 }, { resolve })
  await upstream.start()
  const added = await upstream.addBackend(spec('svc.lila.test'))
  t.same(added.map(b => b.address), ['10.0.6.1:80', '10.0.6.2:80'])
  t.same(upstream.backends.map(b => b.host), ['10.0.6.9', '10.0.6.1', '10.0.6.2'])
  await t.rejects(upstream.addBackend(spec('svc.lila.test')), new ConflictError('svc.lila.test:80 is already a backend'))
  t.equal(upstream.given('svc.lila.test:80'), true)
  t.equal(upstream.given('10.0.6.1:80'), false, 'an address of a name was not given as such')

  const held = added[0].acquire()
  const removed = upstream.removeBackend('svc.lila.test:80')
  t.same(removed, added)
  t.same(upstream.backends.map(b => b.host), ['10.0.6.9'])
  t.same(upstream.snapshot().map(b => [b.address, b.status]), [['10.0.6.9:80', 'up'], ['10.0.6.1:80', 'draining']], 'the one with a connection stays listed while it drains')
  held.release()
  await waitFor(/^backend 10\.0\.6\.1:80 drained$/)
  t.equal(upstream.snapshot().length, 1)
  t.same(upstream.removeBackend('svc.lila.test:80'), [], 'removing it again: nothing')
  const ip = upstream.removeBackend('10.0.6.9:80')
  t.same(ip.map(b => b.status), ['drained'])
  t.equal(upstream.choose({}), null)
})

t.test('removeBackend of one port of a name stops resolving it for that port', async t => {
  // The same name on two ports is two watches; removing each must end its own. A
  // second upstream resolving every 5 ms is the clock: by its 4th tick, a watch left
  // running would have asked again.
  let calls = 0
  const resolve = async () => { calls++; return ['10.0.6.1'] }
  const { upstream } = make(t, { backends: [spec('svc.lila.test'), spec('svc.lila.test', { port: 81 })], resolveInterval: 5 }, { resolve })
  await upstream.start()
  t.equal(upstream.removeBackend('svc.lila.test:80').length, 1)
  t.equal(upstream.removeBackend('svc.lila.test:81').length, 1)
  const asked = calls
  let ticks = 0
  const { upstream: clock } = make(t, { backends: [spec('tick.lila.test')], resolveInterval: 5 }, { resolve: async () => { ticks++; return ['10.0.6.8'] } })
  await clock.start()
  await until(() => ticks >= 4, 'the clock')
  t.equal(calls, asked, 'neither port is resolved any more')
})

// A balancer-shaped object over Upstreams, as control.js sees lb.
function fakeLb (t, listeners) {
  return {
    listeners: listeners.map(([name, port, backends]) => {
      const { upstream } = make(t, { backends })
      return { name, bound: `127.0.0.1:${port}`, server: { address: () => ({ port }) }, upstream }
    })
  }
}

t.test('control: finds the backend, by listener when it must, and says no precisely', async t => {
  const lb = fakeLb(t, [
    ['web', 4444, [spec('10.0.7.1'), spec('10.0.7.2')]],
    ['api', 5555, [spec('10.0.7.2'), spec('10.0.7.3')]]
  ])
  const control = createControl(lb)
  const [web, api] = lb.listeners.map(l => l.upstream)

  const drained = await control.drain({ backend: '10.0.7.1:80' })
  t.equal(drained.message, '10.0.7.1:80 drained: by an operator')
  t.match(drained.backends, [{ address: '10.0.7.1:80', status: 'drained' }])
  t.equal(web.backends[0].admin, 'draining')

  const rejects = (promise, status, message) => t.rejects(promise, { name: 'ControlError', status, message })
  await rejects(control.drain({ backend: '10.0.7.9:80' }), 404, 'no backend "10.0.7.9:80": expected an address listed in /status.json')
  await rejects(control.drain({ backend: '10.0.7.2:80' }), 400, 'backend 10.0.7.2:80 is in 2 listeners (web, api): say which with ?listener=NAME')
  await rejects(control.drain({ backend: '10.0.7.1:80', listener: 'api' }), 404, 'no backend "10.0.7.1:80" in listener api: expected an address listed in /status.json')
  await rejects(control.drain({ backend: '10.0.7.1:80', listener: 'nope' }), 404, 'no listener "nope": expected one of web, api (or its port)')

  await control.disable({ backend: '10.0.7.2:80', listener: '5555' })
  t.equal(api.backends[0].admin, 'disabled', 'by port')
  t.equal(web.backends[1].admin, null, 'the same address in the other listener is untouched')
  await control.enable({ backend: '10.0.7.2:80', listener: '127.0.0.1:5555' })
  t.equal(api.backends[0].admin, null, 'by address')

  const weighed = await control.weight({ backend: '10.0.7.3:80', value: 5 })
  t.equal(weighed.message, '10.0.7.3:80 weight 5 (was 1)')

  await rejects(control.add({ spec: spec('10.0.7.4') }), 400, 'there are 2 listeners (web, api): say which with ?listener=NAME')
  const added = await control.add({ spec: spec('10.0.7.4'), listener: 'web' })
  t.equal(added.message, 'added 10.0.7.4:80 up')
  await rejects(control.add({ spec: spec('10.0.7.4'), listener: 'web' }), 409, '10.0.7.4:80 is already a backend')

  const removed = await control.remove({ backend: '10.0.7.4:80', listener: 'web' })
  t.equal(removed.message, 'removed 10.0.7.4:80')
  await rejects(control.remove({ backend: '10.0.7.4:80' }), 404, 'no backend given as "10.0.7.4:80": expected an address or name:port as given on the command line or added')
  t.ok(new ControlError(404, 'x') instanceof Error)
})

t.test('lb.control(action) and controlFrom(perform): one function of { op, ...request }', async t => {
  const { createBalancer } = require('../lib/index')
  const { parseCommandLine } = require('../lib/config/argv')
  const { controlFrom } = require('../lib/admin/control')
  const { config } = parseCommandLine(['rr', '127.0.0.1:9', '127.0.0.1:10', '--host', '127.0.0.1', '--port', '0', '--check', 'none'])
  const lb = createBalancer(config)
  await lb.listen()
  t.teardown(() => lb.close(0))
  const result = await lb.control({ op: 'weight', backend: '127.0.0.1:10', value: 4 })
  t.equal(result.message, '127.0.0.1:10 weight 4 (was 1)')
  t.equal(lb.stats().listeners[0].backends[1].weight, 4)
  await t.rejects(lb.control({ op: 'explode', backend: '127.0.0.1:10' }), { name: 'ControlError', status: 400, message: 'unknown control action "explode": expected one of drain, enable, disable, weight, add, remove' })

  // What a process that passes actions on (the --workers primary) gives the status listener.
  const passed = []
  const control = controlFrom(async action => { passed.push(action); return lb.control(action) })
  await control.drain({ backend: '127.0.0.1:9' })
  t.same(passed, [{ op: 'drain', backend: '127.0.0.1:9' }])
  t.equal(lb.stats().listeners[0].backends[0].status, 'drained')
})
