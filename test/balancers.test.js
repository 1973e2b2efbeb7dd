'use strict'

// Every mode as a pure function of (candidates, ctx): no sockets. Backends are real
// Backend objects whose live counts the tests set by hand.

const t = require('tap')
const { Upstream } = require('../lib/upstream/upstream')
const { createMode, modeName, MODES } = require('../lib/upstream/balancers')
const { prng } = require('./fixtures/http-fuzz')
const { makeBackend, backendSpec, upstreamConfig } = require('./fixtures/helpers')

function backends (...specs) {
  return specs.map((spec, i) => makeBackend({ host: '10.0.0.' + (i + 1), ...spec }))
}

// --eject-after failed connections in a row take a backend out (passive health).
function eject (backend) {
  for (let i = 0; i < backend.ejectAfter; i++) {
    const lease = backend.acquire()
    lease.failed('connection refused')
    lease.release()
  }
}

function picks (mode, list, n, ctx = {}) {
  const balancer = createMode(mode)
  const out = []
  for (let i = 0; i < n; i++) out.push(balancer.pick(list, ctx))
  return out
}

function counts (list, picked) {
  return list.map(b => picked.filter(p => p === b).length)
}

function longestRun (picked, backend) {
  let longest = 0
  let run = 0
  for (const p of picked) {
    run = p === backend ? run + 1 : 0
    longest = Math.max(longest, run)
  }
  return longest
}

t.test('mode names and aliases', async t => {
  t.equal(modeName('rr'), 'round-robin')
  t.equal(modeName('lc'), 'least-connections')
  t.equal(modeName('random'), 'random')
  t.equal(modeName('ip-hash'), 'ip-hash')
  t.equal(modeName('fastest'), null)
  t.equal(modeName('constructor'), null, 'no prototype names')
  for (const mode of MODES) t.type(createMode(mode.name).pick, 'function', mode.name)
})

t.test('round-robin', async t => {
  t.test('equal weights take turns', async t => {
    const list = backends({}, {}, {})
    const [a, b, c] = list
    t.same(picks('round-robin', list, 6), [a, b, c, a, b, c])
  })

  t.test('weights 3:1 interleave smoothly', async t => {
    const list = backends({ weight: 3 }, { weight: 1 })
    const [a, b] = list
    const picked = picks('round-robin', list, 400)
    t.same(picked.slice(0, 4), [a, a, b, a], 'A A B A, not A A A B')
    t.same(counts(list, picked), [300, 100], 'exactly 300:100')
    t.ok(longestRun(picked, a) <= 3, `longest run of A is ${longestRun(picked, a)}`)
  })

  t.test('weights 5:1:1 give exact shares', async t => {
    const list = backends({ weight: 5 }, { weight: 1 }, { weight: 1 })
    t.same(counts(list, picks('round-robin', list, 700)), [500, 100, 100])
  })

  t.test('a backend missing from the candidates is skipped, then rejoins its turn', async t => {
    const list = backends({}, {}, {})
    const [a, b, c] = list
    const balancer = createMode('round-robin')
    t.equal(balancer.pick(list), a)
    t.equal(balancer.pick([a, c]), c, 'b left out: c')
    t.equal(balancer.pick(list), b)
    const later = []
    for (let i = 0; i < 300; i++) later.push(balancer.pick(list))
    t.same(counts(list, later), [100, 100, 100], 'still even afterwards')
  })
})

t.test('least-connections', async t => {
  t.test('fewest live connections wins', async t => {
    const list = backends({}, {}, {})
    list[0].live = 2
    list[1].live = 0
    list[2].live = 1
    t.same(picks('least-connections', list, 3), [list[1], list[1], list[1]])
  })

  t.test('ties rotate instead of always taking the first', async t => {
    const list = backends({}, {}, {})
    const picked = picks('least-connections', list, 300)
    t.same(counts(list, picked), [100, 100, 100])
    t.not(picked[0], picked[1])
  })

  t.test('load is relative to weight', async t => {
    const list = backends({ weight: 3 }, { weight: 1 })
    list[0].live = 2 // (2 + 1) / 3 = 1
    list[1].live = 1 // (1 + 1) / 1 = 2
    t.equal(picks('least-connections', list, 1)[0], list[0])
    list[0].live = 6 // 7/3 > 2
    t.equal(picks('least-connections', list, 1)[0], list[1])
  })

  t.test('idle weighted backends: the heavier one first', async t => {
    const list = backends({ weight: 3 }, { weight: 1 })
    t.equal(picks('least-connections', list, 1)[0], list[0])
  })
})

t.test('random (power of two choices)', async t => {
  // A scripted random source makes the draws deterministic.
  const scripted = values => { let i = 0; return () => values[i++ % values.length] }

  t.test('of the two drawn, the less loaded wins', async t => {
    const list = backends({}, {}, {})
    list[0].live = 5
    list[2].live = 1
    // draws: first -> list[0] (0.1 * 3 = 0.3), second from the rest -> list[2] (0.9 * 2)
    const balancer = createMode('random', { random: scripted([0.1, 0.9]) })
    t.equal(balancer.pick(list), list[2])
  })

  t.test('never draws the same backend twice', async t => {
    const list = backends({}, {})
    list[0].live = 1
    const balancer = createMode('random', { random: scripted([0.0, 0.0]) })
    t.equal(balancer.pick(list), list[1], 'the second draw skipped the first')
  })

  t.test('spreads load over every backend', async t => {
    const list = backends({}, {}, {}, {})
    const balancer = createMode('random', { random: prng(42) }) // seeded: the same draws every run
    for (let i = 0; i < 4000; i++) balancer.pick(list).live++
    for (const b of list) t.ok(b.live > 800 && b.live < 1200, `${b.address} got ${b.live} of 4000`)
    const spread = Math.max(...list.map(b => b.live)) - Math.min(...list.map(b => b.live))
    t.ok(spread <= 2, `two choices keep live counts within 2 of each other (spread ${spread})`)
  })

  t.test('one candidate, or none', async t => {
    const [a] = backends({})
    t.equal(createMode('random').pick([a]), a)
    t.equal(createMode('random').pick([]), null)
  })
})

t.test('ip-hash (rendezvous hashing)', async t => {
  const keys = Array.from({ length: 10000 }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
  const assign = (list, mode = 'ip-hash') => {
    const balancer = createMode(mode)
    return keys.map(key => balancer.pick(list, { clientAddress: key }).address)
  }

  t.test('deterministic for the same backend list, across balancer instances', async t => {
    t.same(assign(backends({}, {}, {})), assign(backends({}, {}, {})))
  })

  t.test('known values, so every process and machine agrees', async t => {
    const list = backends({}, {}, {}, {}, {})
    const balancer = createMode('ip-hash')
    const got = ['192.168.1.1', '10.0.0.7', '::1', '2001:db8::1'].map(k => balancer.pick(list, { clientAddress: k }).address)
    t.same(got, ['10.0.0.2:80', '10.0.0.3:80', '10.0.0.2:80', '10.0.0.3:80'], 'pinned: changing the hash moves every user')
  })

  t.test('spreads keys evenly', async t => {
    const list = backends({}, {}, {}, {}, {})
    const assigned = assign(list)
    for (const b of list) {
      const share = assigned.filter(a => a === b.address).length / keys.length
      t.ok(share > 0.17 && share < 0.23, `${b.address} owns ${(share * 100).toFixed(1)}%`)
    }
  })

  t.test('removing 1 of 5 moves only the keys it owned', async t => {
    const list = backends({}, {}, {}, {}, {})
    const before = assign(list)
    const removed = list[2].address
    const after = assign(list.filter(b => b.address !== removed))
    let moved = 0
    let movedOthers = 0
    for (let i = 0; i < keys.length; i++) {
      if (before[i] === after[i]) continue
      moved++
      if (before[i] !== removed) movedOthers++
    }
    t.equal(movedOthers, 0, 'no key of a remaining backend moved')
    t.ok(moved / keys.length <= 0.25, `${(moved / keys.length * 100).toFixed(1)}% of keys moved`)
  })

  t.test('weight 2 owns about twice the keys', async t => {
    const list = backends({ weight: 2 }, {}, {})
    const assigned = assign(list)
    const share = assigned.filter(a => a === list[0].address).length / keys.length
    t.ok(share > 0.45 && share < 0.55, `weight 2 of 4 owns ${(share * 100).toFixed(1)}%`)
  })
})

t.test('least-time (peak-EWMA × in-flight)', async t => {
  const clocked = (...specs) => {
    const clock = { now: 0 }
    const list = specs.map((spec, i) => makeBackend({ host: '10.0.4.' + (i + 1), ...spec }, { now: () => clock.now }))
    return { list, clock }
  }

  t.test('the fastest wins while loads are equal', async t => {
    const { list } = clocked({}, {}, {})
    list[0].observeLatency(30)
    list[1].observeLatency(5)
    list[2].observeLatency(20)
    t.same(picks('least-time', list, 5), Array(5).fill(list[1]))
  })

  t.test('in-flight counts: a fast backend that is busy loses to a slower idle one', async t => {
    const { list } = clocked({}, {})
    list[0].observeLatency(10)
    list[1].observeLatency(25)
    list[0].live = 2 // 10 × 3 = 30 > 25 × 1
    t.equal(picks('least-time', list, 1)[0], list[1])
    list[0].live = 1 // 10 × 2 = 20 < 25
    t.equal(picks('least-time', list, 1)[0], list[0])
  })

  t.test('relative to weight', async t => {
    const { list } = clocked({ weight: 4 }, {})
    list[0].observeLatency(10)
    list[1].observeLatency(10)
    list[0].live = 2 // 10 × 3 / 4 = 7.5 < 10
    t.equal(picks('least-time', list, 1)[0], list[0])
  })

  t.test('nothing measured yet: fewest connections, ties rotate', async t => {
    const { list } = clocked({}, {}, {})
    t.same(counts(list, picks('least-time', list, 300)), [100, 100, 100])
    list[1].live = 1
    list[2].live = 1
    t.equal(picks('least-time', list, 1)[0], list[0])
  })

  t.test('a newcomer counts as the average of the measured, not as free', async t => {
    const { list } = clocked({}, {}, {})
    list[0].observeLatency(10)
    list[1].observeLatency(30) // average 20
    list[2].live = 1 // unmeasured: 20 × 2 = 40 > 10 × 1
    t.equal(picks('least-time', list, 1)[0], list[0])
    list[0].live = 4 // 10 × 5 = 50 > 40
    list[1].live = 1 // 30 × 2 = 60 > 40
    t.equal(picks('least-time', list, 1)[0], list[2])
  })

  t.test('a backend that was slow is tried again once its estimate decayed', async t => {
    const { list, clock } = clocked({}, {})
    list[0].observeLatency(100)
    list[1].observeLatency(2)
    t.equal(picks('least-time', list, 1)[0], list[1])
    clock.now += 60000 // both idle for a minute: 100 × e^-6 ≈ 0.25 < 2 × e^-6
    list[1].observeLatency(2)
    t.equal(picks('least-time', list, 1)[0], list[0])
  })
})

t.test('bounded loads for hash modes (--hash-balance-factor)', async t => {
  const keyOn = (list, key, factor) => createMode('ip-hash', { hashBalanceFactor: factor }).pick(list, { clientAddress: key })

  t.test('below the bound, the same backend as plain consistent hashing', async t => {
    const list = backends({}, {}, {}, {})
    for (let i = 0; i < 200; i++) {
      const key = `10.1.0.${i}`
      t.equal(keyOn(list, key, 1.25), keyOn(list, key, null))
    }
  })

  t.test('a hot key spills to the next backend in its own order, and back', async t => {
    const list = backends({}, {}, {}, {})
    const key = '192.0.2.7'
    const owner = keyOn(list, key, null)
    const order = [] // the key's rendezvous order: remove the winner, ask again
    let rest = list.slice()
    while (rest.length) {
      const next = keyOn(rest, key, null)
      order.push(next)
      rest = rest.filter(b => b !== next)
    }
    t.equal(order[0], owner)
    // The owner holds 4, the others 0: average with the new one 5/4, bound ceil(1.25 × 5/4) = 2.
    owner.live = 4
    t.equal(keyOn(list, key, 1.25), order[1], 'over the bound: the second in the key\'s order')
    order[1].live = 2 // total 7: bound ceil(1.25 × 8 / 4) = 3, order[1] still fits
    t.equal(keyOn(list, key, 1.25), order[1])
    order[1].live = 3 // total 8: bound ceil(1.25 × 9 / 4) = 3; 4 > 3 and 3 + 1 > 3
    t.equal(keyOn(list, key, 1.25), order[2], 'the second full too: the third')
    owner.live = 0
    order[1].live = 0
    t.equal(keyOn(list, key, 1.25), owner, 'load gone: back to the owner')
  })

  t.test('every process agrees: the spill order depends on key and addresses only', async t => {
    const one = backends({}, {}, {})
    const two = backends({}, {}, {})
    for (const list of [one, two]) list.forEach((b, i) => { b.live = [5, 1, 0][i] })
    for (let i = 0; i < 50; i++) {
      const key = `10.2.0.${i}`
      t.equal(keyOn(one, key, 1.1).address, keyOn(two, key, 1.1).address)
    }
  })

  t.test('under a stream of one hot key, no backend goes far above the bound', async t => {
    const list = backends({}, {}, {}, {})
    const balancer = createMode('ip-hash', { hashBalanceFactor: 1.25 })
    for (let i = 0; i < 400; i++) balancer.pick(list, { clientAddress: '198.51.100.1' }).live++
    const max = Math.max(...list.map(b => b.live))
    t.ok(max <= Math.ceil(1.25 * 400 / 4), `busiest holds ${max} of 400 (bound ${Math.ceil(1.25 * 400 / 4)})`)
    t.ok(list.every(b => b.live > 0), 'the hot key spread over all four')
  })

  t.test('weights scale the bound', async t => {
    const list = backends({ weight: 3 }, {})
    const balancer = createMode('ip-hash', { hashBalanceFactor: 1 })
    for (let i = 0; i < 400; i++) balancer.pick(list, { clientAddress: '203.0.113.9' }).live++
    t.same(list.map(b => b.live), [300, 100], 'factor 1 with weights 3:1: exactly 3:1')
  })
})

t.test('upstream: which backends are candidates', async t => {
  const make = (mode, ...specs) => new Upstream(upstreamConfig({
    mode,
    backends: specs.map((spec, i) => backendSpec('10.0.1.' + (i + 1), spec))
  }))

  t.test('backups only when no primary can take the connection', async t => {
    const up = make('round-robin', {}, {}, { backup: true })
    const [a, b, backup] = up.backends
    const seen = new Set()
    for (let i = 0; i < 10; i++) seen.add(up.choose({}))
    t.same([...seen].sort((x, y) => x.port - y.port || x.host.localeCompare(y.host)), [a, b])
    a.maxConn = 1
    a.live = 1
    b.weight = 0
    t.equal(up.choose({}), backup, 'primaries full or weight 0: the backup')
    a.live = 0
    t.equal(up.choose({}), a, 'a primary frees up: back to it')
  })

  t.test('full backends are skipped; nothing usable gives null', async t => {
    const up = make('least-connections', { maxConn: 1 }, { maxConn: 1 })
    const [a, b] = up.backends
    a.live = 1
    t.equal(up.choose({}), b)
    b.live = 1
    t.equal(up.choose({}), null, 'explicit null, not undefined')
  })

  t.test('a retry never goes back to a backend that failed it', async t => {
    const up = make('round-robin', {}, {}, {})
    const [a, b, c] = up.backends
    for (let i = 0; i < 6; i++) t.equal(up.choose({}, new Set([a, b])), c)
    t.equal(up.choose({}, new Set([a, b, c])), null)
  })

  t.test('down backends are skipped in every mode', async t => {
    for (const { name } of MODES) {
      const up = make(name, {}, {}, {})
      const [a, b, c] = up.backends
      eject(a)
      eject(c)
      for (let i = 0; i < 20; i++) t.equal(up.choose({ clientAddress: `1.2.3.${i}` }), b, name)
    }
  })
})

t.test('backend: passive health and leases', async t => {
  let clock = 1000
  const now = () => clock
  const make = () => makeBackend({ host: '10.0.2.1' }, { now, ejectAfter: 3 }) // --eject-after 3

  t.test('a lease counts once and releases once', async t => {
    const b = make()
    const lease = b.acquire()
    t.equal(b.live, 1)
    t.equal(b.total, 1)
    lease.release(10, 20)
    lease.release(10, 20)
    t.equal(b.live, 0, 'a second release changes nothing')
    t.same([b.bytesIn, b.bytesOut], [10, 20])
  })

  t.test('three failures in a row eject; one trial after the cool-off', async t => {
    const b = make()
    const events = []
    b.on('down', reason => events.push(['down', reason]))
    b.on('up', reason => events.push(['up', reason]))
    for (let i = 0; i < 2; i++) { const l = b.acquire(); l.failed('connection refused'); l.release() }
    t.ok(b.usable(clock), 'two failures: still in')
    const l3 = b.acquire()
    l3.failed('connection refused')
    l3.release()
    t.notOk(b.usable(clock), 'three: out')
    t.equal(events.length, 1)
    t.match(events[0][1], /3 failures in a row \(connection refused\); next try in 5s/)
    clock += 4999
    t.notOk(b.usable(clock), 'still cooling off')
    clock += 1
    t.ok(b.usable(clock), 'cool-off over: a trial may go')
    const trial = b.acquire()
    t.notOk(b.usable(clock), 'only one trial at a time')
    trial.failed('connection refused')
    trial.release()
    t.notOk(b.usable(clock), 'trial failed: out again')
    clock += 5000
    t.notOk(b.usable(clock), 'the cool-off doubled')
    clock += 5000
    const second = b.acquire()
    second.succeeded()
    second.release()
    t.ok(b.usable(clock))
    t.same(events.map(e => e[0]), ['down', 'up'])
    t.equal(b.failures, 4)
  })

  t.test('a success resets the count of failures', async t => {
    const b = make()
    for (const outcome of ['failed', 'failed', 'succeeded', 'failed', 'failed']) {
      const l = b.acquire()
      l[outcome]('connection refused')
      l.release()
    }
    t.ok(b.isUp)
  })

  t.test('a trial whose client left frees the trial slot', async t => {
    const b = make()
    for (let i = 0; i < 3; i++) { const l = b.acquire(); l.failed('x'); l.release() }
    clock += 5000
    const trial = b.acquire()
    t.notOk(b.usable(clock))
    trial.release()
    t.ok(b.usable(clock))
  })
})
