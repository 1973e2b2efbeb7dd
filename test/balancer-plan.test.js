'use strict'

// A reload's plan (lib/balancer/plan.js) as a table: what a config in force, a new one
// and what runs make of it, before anything is touched. Then one reload that binds a
// new listener and fails on the next: all or none.

const t = require('tap')
const net = require('net')
const { planReload, planRedirects } = require('../lib/balancer/plan')
const { createBalancer } = require('../lib/index')
const { parseConfigFile } = require('../lib/config/file')
const { tcpBackend, exchange, listenOn } = require('./fixtures/helpers')

const B = ['127.0.0.1:1']
const config = (listeners, top = {}) =>
  parseConfigFile(JSON.stringify({ check: 'none', host: '127.0.0.1', ...top, listeners }), 'test.json')

// What runs when `cfg` was applied whole.
const running = cfg => ({
  listeners: cfg.listeners.map(config => ({
    config,
    routes: config.routes.map(route => ({ name: route.name, match: route.match, mode: route.pool.mode }))
  }))
})

// The plan, in the few words a row checks.
function summary (plan) {
  return {
    settings: plan.settings,
    keep: plan.keep.map(({ config, routes }) => ({
      name: config.name,
      routes: routes.next.map(r => `${r.config.name}${r.kept ? '' : ' new'}${r.said.length ? `: ${r.said.join(', ')}` : ''}`),
      removed: routes.removed
    })),
    start: plan.start.map(s => `${s.config.name}${s.replaces ? ' replaces' : ''}${s.afterRetire ? ' after retire' : ''}`),
    retire: plan.retire.map(r => `${r.name}${r.replaced ? ' replaced' : ''}`),
    order: plan.order
  }
}

const one = { name: 'one', port: 0, backends: B }
const two = { name: 'two', port: 0, backends: B }
const web = routes => ({ name: 'web', port: 0, protocol: 'http', backends: B, routes })
const api = { name: 'api', match: '/api', backends: B }

const cases = [
  {
    what: 'nothing changed',
    before: [one],
    after: [one],
    plan: { settings: [], keep: [{ name: 'one', routes: [], removed: [] }], start: [], retire: [], order: ['one'] }
  },
  {
    what: 'a listener added',
    before: [one],
    after: [two, one],
    plan: { keep: [{ name: 'one' }], start: ['two'], retire: [], order: ['two', 'one'] }
  },
  {
    what: 'a listener removed',
    before: [one, two],
    after: [two],
    plan: { keep: [{ name: 'two' }], start: [], retire: ['one'], order: ['two'] }
  },
  {
    what: 'a mode changed: in place, said by the settings',
    before: [one],
    after: [{ ...one, mode: 'rr' }],
    plan: { settings: ['one: mode random -> round-robin'], keep: [{ name: 'one' }], start: [], retire: [] }
  },
  {
    what: 'a protocol changed on port 0: replaced, bound before the old one stops',
    before: [one],
    after: [{ ...one, protocol: 'http' }],
    plan: { keep: [], start: ['one replaces'], retire: ['one replaced'], order: ['one'] }
  },
  {
    what: 'a protocol changed on a fixed port: bound once the old one stopped accepting',
    before: [{ ...one, port: 8123 }],
    after: [{ ...one, port: 8123, protocol: 'http' }],
    plan: { keep: [], start: ['one replaces after retire'], retire: ['one replaced'] }
  },
  {
    what: 'a new listener on a removed one\'s port: after it retires',
    before: [{ ...one, port: 8123 }],
    after: [{ ...two, port: 8123 }],
    plan: { start: ['two after retire'], retire: ['one'] }
  },
  {
    what: 'a listener moved to another port: replaced, bound first',
    before: [{ ...one, port: 8123 }],
    after: [{ ...one, port: 8124 }],
    plan: { start: ['one replaces'], retire: ['one replaced'] }
  },
  {
    what: 'a listener that starts running an app (lila run): kept, the app swapped in (app-swap.js)',
    before: [{ ...one, port: 8123 }],
    after: [{ name: 'one', port: 8123, run: { command: 'node server.js' } }],
    plan: { keep: [{ name: 'one' }], start: [], retire: [] }
  },
  {
    what: 'a listener that stops running its app: kept',
    before: [{ name: 'one', port: 8123, run: { command: 'node server.js' } }],
    after: [{ ...one, port: 8123 }],
    plan: { keep: [{ name: 'one' }], start: [], retire: [] }
  },
  {
    what: 'an app\'s command changed: in place (its app rolls)',
    before: [{ name: 'one', port: 8123, run: { command: 'node server.js' } }],
    after: [{ name: 'one', port: 8123, run: { command: 'node server2.js' } }],
    plan: { keep: [{ name: 'one' }], start: [], retire: [] }
  },
  {
    what: 'routes: one added, one changed, one removed',
    before: [web([api, { name: 'old', match: '/old', backends: B }])],
    after: [web([{ ...api, match: 'api.test/v2', mode: 'lc' }, { name: 'static', match: '/static', backends: B }])],
    plan: {
      keep: [{ name: 'web', routes: ['api: match /api -> api.test/v2, mode random -> least-connections', 'static new'], removed: ['old'] }],
      start: [],
      retire: []
    }
  },
  {
    what: 'process-wide settings',
    before: [one],
    after: [one],
    top: { 'shutdown-timeout': '3s' },
    plan: { settings: ['shutdown-timeout 30s -> 3s'] }
  }
]

for (const row of cases) {
  t.test(row.what, async t => {
    const before = config(row.before)
    const after = config(row.after, row.top)
    const plan = summary(planReload(before, after, running(before)))
    t.match(plan, row.plan)
    for (const key of ['keep', 'start', 'retire']) {
      if (row.plan[key] !== undefined) t.equal(plan[key].length, row.plan[key].length, `${key}: nothing else`)
    }
    if (row.plan.settings !== undefined) t.same(plan.settings, row.plan.settings, 'settings: nothing else')
  })
}

t.test('what runs, not the config in force, is matched: a listener that could not start is started', async t => {
  const before = config([one, { ...two, port: 8123 }])
  const runs = running(before)
  runs.listeners.pop() // "two" was not started
  const plan = summary(planReload(before, before, runs))
  t.same(plan.start, ['two'])
  t.same(plan.keep.map(k => k.name), ['one'])
})

t.test('redirect listeners follow their listeners', async t => {
  const listeners = config([
    { ...one, 'redirect-http': 8080, tls: 'local', 'tls-names': 'a.test' },
    { ...two, port: 8443, 'redirect-http': 8081, tls: 'local', 'tls-names': 'a.test' },
    { name: 'three', port: 8444, backends: B, 'redirect-http': 8082, tls: 'local', 'tls-names': 'a.test' }
  ]).listeners
  const runs = [
    { name: 'one', host: '127.0.0.1', port: 8080 }, // the same: it follows
    { name: 'two', host: '127.0.0.1', port: 9999 }, // another port: stops, one starts
    { name: 'gone', host: '127.0.0.1', port: 8090 } // its listener is gone: off
  ]
  t.same(planRedirects(runs, listeners), {
    follow: ['one'],
    stop: [{ name: 'two', off: false }, { name: 'gone', off: true }],
    start: ['two', 'three']
  })
})

t.test('a reload whose second new listener cannot bind: the first is closed, nothing changed', async t => {
  const a = await tcpBackend(t, 'a')
  const taken = net.createServer()
  await listenOn(t, taken)
  const lb = createBalancer(config([{ ...one, backends: [a.address] }]))
  t.teardown(() => lb.close(0))
  const [address] = await lb.listen()

  let closed = 0
  const next = config([{ ...one, backends: [a.address] }, { ...two, backends: [a.address] },
    { name: 'three', port: taken.address().port, backends: [a.address] }])
  const { Listener } = require('../lib/proxy/listener')
  const close = Listener.prototype.close
  Listener.prototype.close = function (...args) { closed++; return close.apply(this, args) }
  t.teardown(() => { Listener.prototype.close = close })
  await t.rejects(lb.reload(next), { name: 'RuntimeError', message: /cannot listen on 127\.0\.0\.1:\d+: address already in use/ })
  Listener.prototype.close = close
  t.equal(closed, 1, 'the listener bound before the failure was closed')
  t.same(lb.stats().listeners.map(l => l.name), ['one'], 'nothing else runs')
  t.same(lb.config.listeners.map(l => l.name), ['one'], 'the config in force is the old one')
  t.equal((await exchange(Number(address.split(':').pop()))).data, 'a\n', 'still serving as before')
  const lines = await lb.reload(config([{ ...one, backends: [a.address] }, { ...two, backends: [a.address] }]))
  t.match(lines, [/^listener two added: /], 'a later reload can add it')
})
