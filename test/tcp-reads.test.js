'use strict'

// Where tcp mode's backend sockets read into (lib/proxy/tcp.js READ): the buffer all
// sockets share, whose reads are copied out, and a bulk socket's own buffer, written on
// as it is. In process and without sockets: sessions whose backend socket "reads" as
// Node's `onread` does (into the buffer READ.buffer() gave it, then READ.callback, then
// READ.buffer() again for the next read), and whose client holds on to what it is given
// while it is stalled, the way a write waiting in Node's queue or the kernel's does.
// Every byte a stalled client holds must still be what was written when it drains.

const t = require('tap')
const { TcpSession, READ, SESSION } = require('../lib/proxy/tcp')
const { OWN_MAX, OwnBuffer } = require('../lib/proxy/read-buffers')

// A small deterministic PRNG (mulberry32), so that a failure can be replayed.
function random (seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

const HIGH_WATER = 16 * 1024 // a net.Socket's writableHighWaterMark

// A client that takes writes as a socket does: a write of a stalled client waits, and
// keeps the chunk it was given (no copy) until it drains; write() returns false past the
// high-water mark.
function fakeClient () {
  return {
    stalled: false,
    writableLength: 0,
    waiting: [], // [chunk as given, a copy made when it was written]
    written: 0,
    corrupted: 0,
    session: null,
    write (chunk) {
      const ok = this.writableLength + chunk.length < HIGH_WATER
      this.written += chunk.length
      if (this.stalled) {
        this.writableLength += chunk.length
        this.waiting.push([chunk, Buffer.from(chunk)])
      }
      return ok
    },
    // What waited is written now: it must be what it was when it was handed over.
    drain () {
      for (const [given, copy] of this.waiting) if (!given.equals(copy)) this.corrupted++
      this.waiting = []
      this.writableLength = 0
      this.stalled = false
      this.session.onClientDrain()
    }
  }
}

const SHARED = READ.buffer() // with no read in progress, the shared buffer
const seen = { shared: 0, own: 0, ownHeld: 0, mostBound: 0 } // reads into each, own ones a stalled client
// kept, and the most sockets bound to buffers of their own at once

function fakeBackendSocket () {
  return {
    paused: false,
    bound: READ.buffer(), // what Node binds at connect
    [SESSION]: null,
    isPaused () { return this.paused },
    pause () { this.paused = true },
    resume () { this.paused = false },
    // One read of `n` bytes of `fill`, as Node's onread does it.
    read (n, fill) {
      const own = this.bound !== SHARED
      this.bound.fill(fill, 0, n)
      READ.callback.call(this, n, this.bound)
      if (own) seen.own++
      else seen.shared++
      if (own && this[SESSION].client.stalled) seen.ownHeld++
      this.bound = READ.buffer()
    }
  }
}

// A session in the state of one that is piping, without a listener or an attempt.
function pipingSession () {
  const session = Object.create(TcpSession.prototype)
  Object.assign(session, {
    client: fakeClient(),
    upstream: fakeBackendSocket(),
    piping: true,
    answered: true,
    idleTicks: 0,
    upstreamReads: new OwnBuffer()
  })
  session.client.session = session
  session.upstream[SESSION] = session
  return session
}

for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
  t.test(`interleaved small and bulk reads on 100 sockets, clients stalling (seed ${seed})`, async t => {
    const rand = random(seed)
    const sessions = Array.from({ length: 100 }, pipingSession)
    let fill = 0
    for (let step = 0; step < 20000; step++) {
      const s = sessions[Math.floor(rand() * sessions.length)]
      const roll = rand()
      if (roll < 0.1) {
        s.client.stalled = true
      } else if (roll < 0.25) {
        if (s.client.writableLength > 0 || s.client.stalled) s.client.drain()
      } else if (!s.upstream.paused) {
        // Bulk (a full or nearly full buffer) or small (a reply), as a backend sends them.
        const size = rand() < 0.5 ? 16 * 1024 + Math.floor(rand() * 48 * 1024) : 1 + Math.floor(rand() * 4000)
        s.upstream.read(Math.min(size, s.upstream.bound.length), (fill = (fill + 1) % 256))
      }
      const bound = sessions.reduce((n, s) => n + (s.upstream.bound !== SHARED), 0)
      if (bound > seen.mostBound) seen.mostBound = bound
    }
    for (const s of sessions) s.client.drain()
    t.equal(sessions.reduce((n, s) => n + s.client.corrupted, 0), 0, 'no chunk changed while a client held it')
    for (const s of sessions) s.upstreamReads.letGo(false) // back to the shared buffer, for the next test
  })
}

t.test('the runs above took every path', async t => {
  t.ok(seen.shared > 1000, `reads into the shared buffer: ${seen.shared}`)
  t.ok(seen.own > 1000, `reads into a socket's own buffer: ${seen.own}`)
  t.ok(seen.ownHeld > 100, `own-buffer reads written to a stalled client: ${seen.ownHeld}`)
  t.equal(seen.mostBound, OWN_MAX, `at most ${OWN_MAX} sockets read into buffers of their own at once, and that many did`)
})
