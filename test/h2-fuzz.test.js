'use strict'

// Fuzzing lila's HTTP/2 codec (lib/wire/h2) with no socket: generated conversations
// (test/fixtures/h2-fuzz.js: valid frames, then mutated) fed to both roles, in one read
// and cut into many. For every case: nothing thrown, nothing left growing (output,
// streams, the HPACK table, a partial frame or header block all within their limits),
// and the same meaning whatever the reads (the same events and the same frames out,
// window updates aside, which follow how DATA was cut). Then the HPACK decoder alone on
// random and mutated blocks: a list, or a COMPRESSION_ERROR, never anything else.
//   H2_FUZZ_CASES=20000 FUZZ_SEED=7 npx tap test/h2-fuzz.test.js   (a longer run)

const t = require('tap')
const { harness, describe, parseFrames, C } = require('./fixtures/h2-codec')
const { fuzzCase, hpackCase } = require('./fixtures/h2-fuzz')
const { HpackDecoder } = require('../lib/wire/h2/hpack')
const { DEFAULTS } = require('../lib/wire/h2/connection')

const CASES = Number(process.env.H2_FUZZ_CASES || process.env.FUZZ_CASES || 3000)
const SEED = Number(process.env.FUZZ_SEED || 1)
const GET = [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'x.test']

// A connection of `role` past its preface and SETTINGS (client: three streams open).
function open (role) {
  const h = harness(role)
  if (role === 'server') h.feed(C.PREFACE)
  h.feed(Buffer.from([0, 0, 0, C.SETTINGS, 0, 0, 0, 0, 0]))
  if (role === 'client') for (let i = 0; i < 3; i++) h.conn.request(h.r.handler, GET, i === 0)
  h.out()
  h.events()
  return h
}

// Feed `bytes` cut at `splits`; `act(h)` after each read (answers, resets, pauses).
// Returns what it meant: events (DATA merged per stream: its total and its end), the
// frames written (window updates aside), each stream's body.
function run (role, bytes, splits, act = null) {
  const h = open(role)
  const out = []
  let from = 0
  for (const cut of [...splits, bytes.length]) {
    if (cut < from) continue
    h.feed(bytes.subarray(from, cut))
    from = cut
    if (act !== null) act(h)
    const taken = h.conn.output.take()
    if (taken !== null) out.push(...[].concat(taken))
    check(h)
  }
  const events = h.r.events.filter(e => !e.startsWith('data ') || e.endsWith(' es')).map(e => e.startsWith('data ') ? `end ${e.split(' ')[1]}` : e)
  const frames = parseFrames(Buffer.concat(out)).filter(f => f.type !== C.WINDOW_UPDATE).map(describe)
  const bodies = [...h.r.bodies].map(([id, body]) => `${id}:${body.length}`).sort()
  return { h, events, frames, bodies }
}

// Nothing grows past its limit.
function check (h) {
  const conn = h.conn
  if (conn.output.length > 4 * 1024 * 1024) throw new Error(`output holds ${conn.output.length} bytes`)
  if (conn.streams.size > DEFAULTS.maxConcurrentStreams) throw new Error(`${conn.streams.size} streams open`)
  if (conn.inbound.decoder.size > conn.inbound.decoder.max || conn.inbound.decoder.max > DEFAULTS.headerTableSize) throw new Error('the HPACK table past its size')
  if (conn.inbound.pending !== null && conn.inbound.pending.length >= 9 + 16384) throw new Error(`a partial frame of ${conn.inbound.pending.length} bytes`)
  if (conn.inbound.blockLength > DEFAULTS.maxHeaderListSize) throw new Error('a header block past the limit')
  if (conn.outbound.blocked.length > conn.streams.size || conn.outbound.waiting.length > conn.streams.size) {
    throw new Error(`lists of streams growing: blocked ${conn.outbound.blocked.map(s => s.id)}, waiting ${conn.outbound.waiting.map(s => s.id)}`)
  }
}

t.test(`${CASES} generated conversations (seed ${SEED})`, async t => {
  let closed = 0
  let streams = 0
  for (let i = 0; i < CASES; i++) {
    const { role, bytes, splits, rand } = fuzzCase(SEED, i)
    const where = `case ${i} (${role}, ${bytes.length} bytes)`
    let whole, cut
    try {
      whole = run(role, bytes, [])
      cut = run(role, bytes, splits)
    } catch (err) {
      t.fail(`${where}: ${err.stack}`)
      break
    }
    const meaning = run => JSON.stringify([run.events, run.frames, run.bodies])
    if (meaning(whole) !== meaning(cut)) {
      const what = `${where}: the same in one read and in ${splits.length + 1}`
      t.same([cut.events, cut.frames, cut.bodies], [whole.events, whole.frames, whole.bodies], what)
      break
    }
    // Once more, cut, with the owner answering, resetting, pausing as it goes.
    try {
      const acted = run(role, bytes, splits, h => act(h, rand))
      if (acted.h.closed) closed++
      streams += acted.h.r.streams.length
    } catch (err) {
      t.fail(`${where}, answered: ${err.stack}`)
      break
    }
  }
  t.pass(`${CASES} cases: ${closed} ended the connection, ${streams} streams opened`)
})

// What an owner might do with its open streams after a read.
function act (h, rand) {
  const conn = h.conn
  for (const s of [...conn.streams.values()]) {
    const r = rand()
    if (r < 0.2) conn.headers(s, conn.server ? [':status', '200'] : ['x-trailer', 'y'], rand() < 0.5)
    else if (r < 0.4) conn.write(s, Buffer.alloc(Math.floor(rand() * 40000), 0x63), rand() < 0.5)
    else if (r < 0.45) conn.reset(s)
    else if (r < 0.55) conn.pause(s)
    else if (r < 0.65) conn.resume(s)
  }
  if (rand() < 0.05) conn.setCongested(rand() < 0.5)
  if (rand() < 0.05) conn.sweep()
  if (rand() < 0.02) conn.shutdown()
  if (!conn.server && rand() < 0.2 && conn.canOpen()) conn.request(h.r.handler, GET, rand() < 0.5)
}

t.test(`${CASES} HPACK blocks, random and mutated (seed ${SEED})`, async t => {
  let lists = 0
  let refused = 0
  for (let i = 0; i < CASES; i++) {
    const decoder = new HpackDecoder(4096)
    for (const block of hpackCase(SEED, i)) {
      try {
        const list = decoder.decode(block, 0, block.length, 65536, 128)
        if (list.length % 2 !== 0 || list.some(x => typeof x !== 'string')) throw new Error('not a list of names and values')
        lists++
      } catch (err) {
        if (err.code !== C.COMPRESSION_ERROR) {
          t.fail(`case ${i}: ${err.stack}`)
          return
        }
        refused++
        break // a connection error: the table is not used again
      }
      if (decoder.size > decoder.max || decoder.max > 4096) {
        t.fail(`case ${i}: the table at ${decoder.size} of ${decoder.max}`)
        return
      }
    }
  }
  t.pass(`${lists} blocks decoded, ${refused} refused`)
})
