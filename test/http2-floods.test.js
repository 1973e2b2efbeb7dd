'use strict'

// HTTP/2 floods against the spawned lila, with raw frames over a socket: rapid reset
// (CVE-2023-44487), a CONTINUATION flood (CVE-2024-27316), SETTINGS, PING and empty DATA
// floods (read and unread). For each: lila closes the attacker with GOAWAY
// ENHANCE_YOUR_CALM (its flood limits, not a parse error or a plain close), serves a
// well-behaved HTTP/2 client meanwhile, no flood reaches the backend, and its resident
// memory stays bounded.

const t = require('tap')
const { spawnLila, httpBackend, memoryOf } = require('./fixtures/helpers')
const { h2connect, h2request } = require('./fixtures/h2')
const { flood } = require('./fixtures/h2-frames')
const { ENHANCE_YOUR_CALM } = require('../lib/wire/h2/constants')

const MIB = 1024 * 1024
// What lila may grow by over a flood (the attackers' frames are 20,000 and more).
const GROWTH = 64 * MIB

const CASES = [
  { attack: 'rapidReset', n: 20000, why: 'CVE-2023-44487: HEADERS then RST_STREAM' },
  { attack: 'continuation', n: 100000, why: 'CVE-2024-27316: endless CONTINUATION' },
  { attack: 'settings', n: 100000, why: 'SETTINGS, read' },
  { attack: 'settings', n: 100000, read: false, why: 'SETTINGS, acks never read' },
  { attack: 'ping', n: 100000, why: 'PING, read' },
  { attack: 'ping', n: 100000, read: false, why: 'PING, acks never read' },
  // Too few for a limit on acknowledgements queued (nghttp2's is 1,000): what stops
  // these is lila's meter of frames that do no work (http2/session.js maxGlitches).
  { attack: 'ping', n: 300, why: 'PING, 300 of them' },
  { attack: 'settings', n: 300, read: false, why: 'SETTINGS, 300 of them, acks never read' },
  { attack: 'emptyData', n: 100000, why: 'CVE-2019-9518: empty DATA frames' }
]

t.test('each flood: the attacker closed, a good client served meanwhile, memory bounded', async t => {
  const backend = await httpBackend(t, 'app')
  const lila = await spawnLila(t, [backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0'])
  const session = await h2connect(t, lila.port)
  t.equal((await h2request(session)).status, 200, 'served before')
  const start = memoryOf(lila.child.pid).rss
  let peak = start
  for (const { attack, n, read = true, why } of CASES) {
    const before = backend.requests
    const attacked = flood(lila.port, attack, n, { read })
    // A well-behaved client on its own connection while the flood is sent.
    const during = await Promise.all(Array.from({ length: 20 }, (_, i) => h2request(session, { path: `/during/${attack}/${i}` })))
    t.same(during.map(r => r.status), Array(20).fill(200), `${why}: a good client is served meanwhile`)
    const result = await attacked
    // flood() resolving is the close (long before --idle-timeout could do it).
    t.equal(result.goaway, ENHANCE_YOUR_CALM,
      `${why}: the attacker is closed with GOAWAY ENHANCE_YOUR_CALM (after ${result.sent} of its frames)`)
    const reached = backend.requests - before - 20
    t.ok(reached >= 0 && reached < 100, `${why}: the flood did not reach the backend (${reached} of its streams did)`)
    const rss = memoryOf(lila.child.pid).rss
    peak = Math.max(peak, rss)
    t.ok(rss - start < GROWTH, `${why}: lila's memory bounded (VmRSS ${(rss / MIB).toFixed(1)} MiB, from ${(start / MIB).toFixed(1)})`)
  }
  t.comment(`VmRSS at start ${(start / MIB).toFixed(1)} MiB, at most ${(peak / MIB).toFixed(1)} MiB over the floods`)
  t.equal((await h2request(session)).status, 200, 'served after')
  t.equal(lila.child.exitCode, null, 'lila is still running')
})
