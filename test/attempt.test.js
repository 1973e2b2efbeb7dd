'use strict'

// The one attempt path (lib/upstream/attempt.js), in process and without sockets: an
// Upstream of backends A, B, C (round-robin, so the order is known) and a scripted owner
// that plays each backend's part as the tcp session or the http exchange would. A table
// in the manner of undici's balanced-pool tests: who refuses, who is slow, who goes down
// on which connection; then the expected order of backends and the outcome.

const t = require('tap')
const { Attempt } = require('../lib/upstream/attempt')
const { makeUpstream, backendSpec } = require('./fixtures/helpers')

const NAMES = ['A', 'B', 'C']

// An upstream of A, B, C at 127.0.0.1:1..3 (nothing is dialled: the owner only plays).
function upstreamOf (t, { specs = [{}, {}, {}], now = Date.now, ...config } = {}) {
  const backends = specs.map((extra, i) => backendSpec('127.0.0.1', { port: i + 1, ...extra }))
  const { upstream } = makeUpstream(t, { backends, ...config }, { now })
  return upstream
}

const nameOf = backend => NAMES[backend.port - 1]

// A client that plays `script`: { A: ['refuse', 'ok'], ... } says what backend A does
// on its first, second... connection (the last entry repeats; 'ok' by default).
//   ok       answers                          refuse   fails before the request reached it
//   drop     closes after the request reached it, without answering
//   slow     times out (not retried)          short    lila is out of descriptors
//   503...   answers with that status (the attempt decides: retry, blame, or forward)
// `replayable` false: the client's bytes went out, nothing may be sent again.
const FAILURES = {
  refuse: { cause: 'connect', sent: false },
  drop: { cause: 'closed', sent: true },
  slow: { cause: 'timeout', sent: true }
}

function client (upstream, script, seen, { replayable = true, clientAddress = '127.0.0.1' } = {}) {
  const c = {
    order: [],
    outcome: null,
    seated (lease) {
      const name = nameOf(lease.backend)
      const n = seen[name] = (seen[name] || 0) + 1
      const plays = script[name] || ['ok']
      const play = plays[Math.min(n, plays.length) - 1]
      c.order.push(name)
      if (play === 'ok') {
        c.attempt.succeeded(1)
        c.outcome = `served by ${name}`
      } else if (play === 'short') {
        c.attempt.shortage()
        c.outcome = 'short'
      } else if (/^\d+$/.test(play)) {
        if (!c.attempt.answered(Number(play), { replayable })) c.outcome = `forwarded ${name} ${play}`
      } else if (!c.attempt.failed(play, { ...FAILURES[play], replayable })) {
        c.outcome = c.attempt.everywhere !== null
          ? 'answered: failed everywhere'
          : `answered: ${c.attempt.lastBackend === lease.backend.address ? name : '?'} ${play}`
      }
    },
    unserved (reason) {
      c.outcome = reason === null ? `unserved after ${c.attempt.attempts}` : `left the queue: ${reason}`
    }
  }
  c.attempt = new Attempt(upstream, { clientAddress }, c, { perRequest: true })
  return c
}

const live = upstream => upstream.backends.reduce((sum, b) => sum + b.live, 0)

const CASES = [
  { name: 'all answer: the first pick serves', script: {}, order: ['A'], outcome: 'served by A' },
  { name: 'A refuses: B serves', script: { A: ['refuse'] }, order: ['A', 'B'], outcome: 'served by B' },
  { name: 'A and B refuse: C serves', script: { A: ['refuse'], B: ['refuse'] }, order: ['A', 'B', 'C'], outcome: 'served by C' },
  {
    name: 'all refuse: three tries, then the last failure is answered',
    script: { A: ['refuse'], B: ['refuse'], C: ['refuse'] },
    order: ['A', 'B', 'C'],
    outcome: 'answered: C refuse'
  },
  {
    name: '--retries 1: two tries at most',
    script: { A: ['refuse'], B: ['refuse'] },
    config: { retries: 1 },
    order: ['A', 'B'],
    outcome: 'answered: B refuse'
  },
  {
    name: 'never the same failed backend twice, whatever the budget',
    specs: [{}, {}],
    script: { A: ['refuse'], B: ['refuse'] },
    config: { retries: 9 },
    order: ['A', 'B'],
    outcome: 'answered: B refuse'
  },
  { name: 'a slow backend is not tried elsewhere', script: { A: ['slow'] }, order: ['A'], outcome: 'answered: A slow' },
  {
    name: 'bytes already sent: not replayed',
    script: { A: ['refuse'] },
    options: { replayable: false },
    order: ['A'],
    outcome: 'answered: A refuse'
  },
  { name: 'a backup only when no primary can take it', specs: [{}, { backup: true }, {}], script: { A: ['refuse'], C: ['refuse'] }, order: ['A', 'C', 'B'], outcome: 'served by B' },
  { name: 'lila short of descriptors: nobody is blamed, nothing retried', script: { A: ['short'] }, order: ['A'], outcome: 'short', blamed: [] },
  // Whose fault (attempt.js, top): a failure after the request reached the backend is
  // judged by the next backend.
  { name: 'A drops the request, B serves it: A is blamed', script: { A: ['drop'] }, order: ['A', 'B'], outcome: 'served by B' },
  {
    name: 'A and B drop the request: the request is blamed, not them, and not tried on C',
    script: { A: ['drop'], B: ['drop'] },
    order: ['A', 'B'],
    outcome: 'answered: failed everywhere',
    blamed: []
  },
  {
    name: 'A refuses, B and C drop: A alone is blamed (a refusal is never the request\'s doing)',
    script: { A: ['refuse'], B: ['drop'], C: ['drop'] },
    order: ['A', 'B', 'C'],
    outcome: 'answered: failed everywhere',
    blamed: ['A']
  },
  { name: 'A answers 503, B serves: the answer is retried, A blamed', script: { A: ['503'] }, order: ['A', 'B'], outcome: 'served by B' },
  { name: 'A answers 502, B serves', script: { A: ['502'] }, order: ['A', 'B'], outcome: 'served by B' },
  {
    name: 'A and B answer 503: B\'s answer is forwarded, nobody blamed',
    script: { A: ['503'], B: ['503'] },
    order: ['A', 'B'],
    outcome: 'forwarded B 503',
    blamed: []
  },
  {
    name: 'a 503 to a request that may not be repeated is forwarded and blamed',
    script: { A: ['503'] },
    options: { replayable: false },
    order: ['A'],
    outcome: 'forwarded A 503'
  },
  { name: 'a 504 answer counts but is not retried', script: { A: ['504'] }, order: ['A'], outcome: 'forwarded A 504' },
  { name: 'a 500 neither counts nor is retried by default', script: { A: ['500'] }, order: ['A'], outcome: 'forwarded A 500', blamed: [] },
  {
    name: '--retry-on 5xx --eject-on 5xx: a 500 is retried and blamed',
    script: { A: ['500'] },
    config: { retryOn: [500, 502, 503], ejectOn: [500, 502, 503, 504] },
    order: ['A', 'B'],
    outcome: 'served by B'
  },
  {
    name: '--retry-on none: a 503 is forwarded, and still counts',
    script: { A: ['503'] },
    config: { retryOn: [] },
    order: ['A'],
    outcome: 'forwarded A 503'
  },
  {
    name: '--eject-on none: a 503 is retried but blames nobody',
    script: { A: ['503'] },
    config: { ejectOn: [] },
    order: ['A', 'B'],
    outcome: 'served by B',
    blamed: []
  }
]

for (const c of CASES) {
  t.test(c.name, async t => {
    const upstream = upstreamOf(t, { specs: c.specs, ...c.config })
    const one = client(upstream, c.script, {}, c.options)
    one.attempt.start()
    t.same(one.order, c.order, 'backends in this order')
    t.equal(one.outcome, c.outcome)
    one.attempt.release(0, 0)
    t.equal(live(upstream), 0, 'every slot released')
    const blamed = upstream.backends.filter(b => b.failures > 0).map(nameOf)
    const expected = c.blamed || c.order.filter(name => (c.script[name] || ['ok'])[0] !== 'ok')
    t.same(blamed, expected, 'blamed: the backends that failed, and only them')
  })
}

// One client served start to end: the backends it went through ("C>A"). As on real
// sockets, each backend plays its part after the call that seated the client returned.
function serveOne (upstream, script, seen) {
  const one = client(upstream, script, seen)
  const play = one.seated
  const seats = []
  one.seated = lease => seats.push(lease)
  one.attempt.start()
  for (let i = 0; i < 10 && seats.length > 0; i++) play(seats.shift())
  one.attempt.release(0, 0)
  return one.order.join('>')
}

t.test('a backend that starts failing on its second connection is ejected, then passed over', async t => {
  const upstream = upstreamOf(t)
  const seen = {}
  const script = { C: ['ok', 'refuse'] }
  const served = []
  for (let i = 0; i < 9; i++) served.push(serveOne(upstream, script, seen))
  // Round-robin A B C; C fails its second connection on: each failure passes the client
  // to the next backend, and --eject-after (5) failures in a row eject C.
  t.same(served, ['A', 'B', 'C', 'A', 'B', 'C>A', 'B', 'C>A', 'B'])
  const c = upstream.backends[2]
  t.equal(c.failures, 2)
  for (let i = 0; i < 20 && c.failures < c.ejectAfter; i++) serveOne(upstream, script, seen)
  t.equal(c.state, 'down', 'the fifth failure in a row ejects C')
  const after = []
  for (let i = 0; i < 6; i++) after.push(serveOne(upstream, script, seen))
  t.notOk(after.some(order => order.includes('C')), `C is passed over: ${after.join(' ')}`)
  t.equal(live(upstream), 0)
})

t.test('queue: every backend full, the client waits and takes the first freed slot', async t => {
  const upstream = upstreamOf(t, { specs: [{ maxConn: 1 }, { maxConn: 1 }], queueTimeout: 5000 })
  const [a, b] = upstream.backends
  const holdA = a.acquire()
  const holdB = b.acquire()
  const one = client(upstream, {}, {})
  one.attempt.start()
  t.same(one.order, [], 'waiting')
  t.equal(upstream.stats().queued, 1)
  holdB.release()
  t.same(one.order, ['B'], 'seated on the slot that freed')
  t.equal(one.outcome, 'served by B')
  holdA.release()
  one.attempt.release(0, 0)
  t.equal(live(upstream), 0)
})

t.test('queue: waiters are served oldest first', async t => {
  const upstream = upstreamOf(t, { specs: [{ maxConn: 1 }], queueTimeout: 5000 })
  const [a] = upstream.backends
  let hold = a.acquire()
  const clients = [0, 1, 2].map(() => client(upstream, {}, {}))
  const served = []
  for (const c of clients) c.attempt.start()
  for (let i = 0; i < clients.length; i++) {
    hold.release()
    const next = clients.findIndex(c => c.order.length > 0 && !served.includes(c))
    served.push(clients[next])
    hold = clients[next].attempt
  }
  hold.release(0, 0)
  t.same(served.map(c => clients.indexOf(c)), [0, 1, 2])
  t.equal(live(upstream), 0)
})

t.test('queue: a client that gives up waiting hears why', async t => {
  const upstream = upstreamOf(t, { specs: [{ maxConn: 1 }], queueTimeout: 20 })
  const hold = upstream.backends[0].acquire()
  const one = client(upstream, {}, {})
  const done = new Promise(resolve => { one.unserved = reason => resolve(reason) })
  one.attempt.start()
  t.equal(await done, 'no backend slot within 20ms')
  t.equal(upstream.stats().queueTimeouts, 1)
  hold.release()
  t.equal(live(upstream), 0)
})

t.test('queue: a client that leaves while waiting takes no slot', async t => {
  const upstream = upstreamOf(t, { specs: [{ maxConn: 1 }], queueTimeout: 5000 })
  const hold = upstream.backends[0].acquire()
  const one = client(upstream, {}, {})
  one.attempt.start()
  one.attempt.cancel()
  hold.release()
  t.same(one.order, [], 'never seated')
  t.equal(upstream.stats().queued, 0)
  t.equal(live(upstream), 0)
})

t.test('a retry queues behind those already waiting, and its failed slot goes to them', async t => {
  // A and B take one connection each. X holds A, Y holds B, W waits. X fails on A: its
  // retry may not overtake W, and A's slot (released after X's retry queued) goes to W.
  const upstream = upstreamOf(t, { specs: [{ maxConn: 1 }, { maxConn: 1 }], queueTimeout: 5000 })
  const seen = {}
  const x = client(upstream, {}, seen)
  x.seated = lease => { x.order.push(nameOf(lease.backend)) }
  x.attempt.start()
  const y = client(upstream, {}, seen)
  y.attempt.start()
  const w = client(upstream, {}, seen)
  w.attempt.start()
  t.same([x.order, y.order, w.order], [['A'], ['B'], []])
  x.attempt.failed('refused')
  t.same(w.order, ['A'], 'W, the older waiter, takes A')
  t.same(x.order, ['A'], 'X waits for another backend than A')
  y.attempt.release(0, 0)
  t.same(x.order, ['A', 'B'], 'X is seated on B once it frees')
  for (const c of [x, w]) c.attempt.release(0, 0)
  t.equal(live(upstream), 0)
})

t.test('every backend down or tried: no waiting, unserved at once', async t => {
  const upstream = upstreamOf(t, { specs: [{ maxConn: 1 }], queueTimeout: 5000 })
  const one = client(upstream, { A: ['refuse'] }, {})
  one.attempt.start()
  t.equal(one.outcome, 'answered: A refuse', 'A failed it; waiting for A is pointless')
  t.equal(upstream.stats().queued, 0)
  t.equal(live(upstream), 0)
})

t.test('an ejected backend whose trial answers 503 stays out, for twice as long', async t => {
  const clock = { now: 1000000 }
  const upstream = upstreamOf(t, { specs: [{}, {}], now: () => clock.now })
  const [a] = upstream.backends
  const seen = {}
  const script = { A: ['503'] }
  for (let i = 0; i < 20 && a.state === 'up'; i++) serveOne(upstream, script, seen)
  t.match(a.downReason, /^5 answers of 503 in a row; next try in 5s$/)
  clock.now += 5000
  let order = ''
  for (let i = 0; i < 4 && !order.includes('A'); i++) order = serveOne(upstream, script, seen)
  t.equal(order, 'A>B', 'the trial goes to A; its 503 is retried on B')
  t.match(a.downReason, /^answered 503 \(trial\); next try in 10s$/, 'the trial failed: the cool-off doubled')
  const after = []
  for (let i = 0; i < 4; i++) after.push(serveOne(upstream, script, seen))
  t.same(after, ['B', 'B', 'B', 'B'], 'no second trial meanwhile')
  t.equal(live(upstream), 0)
})
