'use strict'

// Where tcp mode's backend sockets read into (lib/proxy/tcp.js READ, tcp-reads.js): the
// buffer all sockets share, whose reads are copied out, and a bulk socket's own buffer,
// written on as it is and kept across small reads until the connection goes quiet. In
// process and without sockets: sessions whose backend socket "reads" as Node's `onread`
// does (into the buffer READ.buffer() gave it, then READ.callback, then READ.buffer()
// again for the next read; a quiet sweep's useUserBuffer binds another), and whose
// client holds on to what it is given while it is stalled, the way a write waiting in
// Node's queue or the kernel's does. Every byte a stalled client holds must still be
// what was written when it drains.

const t = require('tap')
const { TcpSession, READ, SESSION } = require('../lib/proxy/tcp')
const { OWN_MAX } = require('../lib/proxy/read-buffers')
const { BackendReads } = require('../lib/proxy/tcp-reads')

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
// Reads into each buffer; of those into a socket's own: small ones, and ones a stalled
// client kept; sockets put back on the shared buffer by a quiet sweep, and of those
// the ones whose client still held their last read; the most sockets bound to buffers
// of their own at once.
const seen = { shared: 0, own: 0, ownSmall: 0, ownHeld: 0, quietLetGo: 0, quietHeld: 0, mostBound: 0 }

function fakeBackendSocket () {
  const socket = {
    paused: false,
    bound: READ.buffer(), // what Node binds at connect
    [SESSION]: null,
    _handle: { useUserBuffer (buffer) { socket.bound = buffer } }, // bound outside a read
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
      if (own && n < 16 * 1024) seen.ownSmall++
      if (own && this[SESSION].client.stalled) seen.ownHeld++
      this.bound = READ.buffer()
    }
  }
  return socket
}

// Sweeps until one finds the session quiet (the first after a byte counts it idle).
function quietSweeps (s) {
  const own = s.upstream.bound !== SHARED
  s.onIdleSweep(Infinity)
  s.onIdleSweep(Infinity)
  if (own && s.upstream.bound === SHARED) {
    seen.quietLetGo++
    if (s.client.writableLength > 0) seen.quietHeld++
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
    upstreamReads: new BackendReads()
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
      if (roll < 0.003) {
        quietSweeps(s)
      } else if (roll < 0.1) {
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

// The rule step by step (buffers compared by identity: a 64 KiB diff says nothing).
t.test('a backend keeps its own buffer across a small read nothing holds, not one a write holds', async t => {
  const s = pipingSession()
  const socket = s.upstream
  socket.read(64 * 1024, 1) // into the shared buffer: the socket takes one of its own
  const own = socket.bound
  t.not(own, SHARED, 'a bulk read: a buffer of its own next')
  socket.read(100, 2)
  t.equal(socket.bound, own, 'a small read the client took at once: read into it again')
  socket.read(64 * 1024, 3)
  t.equal(socket.bound, own, 'and the next answer\'s first, bulk, read lands in it, not copied')
  s.client.stalled = true
  socket.read(100, 4)
  t.equal(socket.bound, SHARED, 'a small read a stalled client holds: back to the shared buffer')
  socket.read(64 * 1024, 5)
  t.ok(socket.bound !== SHARED && socket.bound !== own, 'the next bulk read: another buffer, not the held one')
  s.client.drain()
  t.equal(s.client.corrupted, 0, 'what the client held was not written over')
  s.upstreamReads.letGo(false)
})

t.test('a quiet connection reads into the shared buffer again, once', async t => {
  const s = pipingSession()
  const socket = s.upstream
  socket.read(64 * 1024, 1)
  socket.read(100, 2)
  const own = socket.bound
  t.not(own, SHARED, 'kept across the answer\'s last, small, read')
  s.onIdleSweep(Infinity)
  t.equal(socket.bound, own, 'one sweep since the last byte: kept')
  s.onIdleSweep(Infinity)
  t.equal(socket.bound, SHARED, 'a sweep that finds it quiet: the shared buffer is bound again')
  t.equal(s.upstreamReads.own, null, 'and it holds none of its own')
  socket.read(64 * 1024, 3)
  t.not(socket.bound, SHARED, 'bulk again: a buffer of its own')
  socket.read(100, 4)
  t.equal(socket.bound, SHARED, 'after a quiet let-go, let go at a small read as other readers do')
  socket.read(64 * 1024, 5)
  socket.read(64 * 1024, 6)
  const last = socket.bound
  s.onIdleSweep(Infinity)
  s.onIdleSweep(Infinity)
  t.equal(socket.bound, last, 'no second rebind on that connection (a listener on its handle each)')
  s.upstreamReads.letGo(false)
})

t.test('a quiet connection whose client still holds its last read: that buffer goes to no other socket', async t => {
  const s = pipingSession()
  s.upstream.read(64 * 1024, 1)
  s.client.stalled = true
  s.upstream.read(64 * 1024, 2) // held; the write is past the high-water mark: paused
  const held = s.upstream.bound
  t.ok(held !== SHARED && s.upstream.paused, 'a bulk read a stalled client holds, the socket paused, keeps its buffer')
  s.onIdleSweep(Infinity)
  s.onIdleSweep(Infinity)
  t.equal(s.upstream.bound, SHARED, 'quiet: back to the shared buffer')
  const others = Array.from({ length: 4 }, pipingSession)
  for (const other of others) {
    other.upstream.read(64 * 1024, 3)
    t.not(other.upstream.bound, held, 'a bulk socket taking a buffer does not get the held one')
    other.upstream.read(64 * 1024, 4)
  }
  s.client.drain()
  t.equal(s.client.corrupted, 0, 'what the client held was not written over')
  for (const x of [s, ...others]) x.upstreamReads.letGo(false)
})

t.test('the runs above took every path', async t => {
  t.ok(seen.shared > 1000, `reads into the shared buffer: ${seen.shared}`)
  t.ok(seen.own > 1000, `reads into a socket's own buffer: ${seen.own}`)
  t.ok(seen.ownSmall > 1000, `small reads into a socket's own buffer: ${seen.ownSmall}`)
  t.ok(seen.ownHeld > 100, `own-buffer reads written to a stalled client: ${seen.ownHeld}`)
  t.ok(seen.quietLetGo > 50, `sockets a quiet sweep put back on the shared buffer: ${seen.quietLetGo}`)
  t.ok(seen.quietHeld > 5, `of those, with their last read still held by a stalled client: ${seen.quietHeld}`)
  t.equal(seen.mostBound, OWN_MAX, `at most ${OWN_MAX} sockets read into buffers of their own at once, and that many did`)
})
