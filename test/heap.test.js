'use strict'

// Giving memory back once traffic stops (lib/cli/heap.js): when the idle collector
// collects, on a hand-fed heap (no timers), and that its collections give real memory
// back in a Node process of its own.

const t = require('tap')
const path = require('path')
const { spawnSync } = require('child_process')
const { IdleCollector, FIRST_TICKS, SECOND_TICKS, TRIES, QUIET_BYTES, QUIET_CPU_US, GROWTH } = require('../lib/cli/heap')

const MiB = 1024 * 1024

// A process driven by hand: heap bytes in use and committed, the young generation's
// size, CPU µs. A collection brings the heap down to `live` and the young generation
// back to 2 MiB, unless `keepsYoung` says how many collections keep it grown.
function fakeProcess () {
  const p = { used: 10 * MiB, committed: 12 * MiB, young: 2 * MiB, cpu: 0, live: 8 * MiB }
  Object.assign(p, { keepsYoung: 0, collections: 0 })
  const collector = new IdleCollector({
    stats: () => ({ used: p.used, committed: p.committed, young: p.young, cpu: p.cpu }),
    collect: () => {
      p.collections++
      p.used = p.live
      p.committed = p.live + MiB
      if (p.keepsYoung > 0) p.keepsYoung--
      else p.young = 2 * MiB
    }
  })
  return { p, collector }
}

// `n` ticks, each after `allocated` bytes and `cpu` µs of work; which collections ran.
function ticks (p, collector, n, allocated = 0, cpu = 0) {
  const ran = []
  for (let i = 0; i < n; i++) {
    p.used += allocated
    p.cpu += cpu
    p.committed = Math.max(p.committed, p.used + MiB)
    if (allocated > MiB) p.young = 32 * MiB
    const which = collector.tick()
    if (which !== 0) ran.push(which)
  }
  return ran
}

const LOAD = [3 * MiB, 900 * 1000] // a second under load: allocation and CPU

t.test('a busy process is never collected, however big its heap grows', async t => {
  const { p, collector } = fakeProcess()
  t.same(ticks(p, collector, 60, ...LOAD), [])
  t.equal(p.collections, 0)
})

t.test('a heap that grew and went quiet is collected, and again once V8 can shrink it', async t => {
  const { p, collector } = fakeProcess()
  ticks(p, collector, 10, ...LOAD)
  t.same(ticks(p, collector, FIRST_TICKS), [1], 'the first collection once quiet')
  t.equal(p.used, p.live)
  t.equal(p.young, 2 * MiB)
  p.young = 32 * MiB // V8 kept it: it shrinks it only after 5 s of little allocation
  t.same(ticks(p, collector, SECOND_TICKS - 1, 1024, 1000), [], 'the second waits for that')
  t.same(ticks(p, collector, 1, 1024, 1000), [2])
  t.same(ticks(p, collector, 120, 1024, 1000), [], 'nothing more while nothing grows')
  t.equal(p.collections, 4, 'two, then two')
})

t.test('a collection V8 made itself (less in use than a second ago) is not quiet', async t => {
  const { p, collector } = fakeProcess()
  ticks(p, collector, 5, ...LOAD)
  p.used -= 10 * MiB // a scavenge between two ticks
  t.same(ticks(p, collector, 1), [], 'that tick is not quiet')
  t.same(ticks(p, collector, FIRST_TICKS), [1])
})

t.test('busy moving bodies (CPU, little heap allocated) is not quiet', async t => {
  const { p, collector } = fakeProcess()
  ticks(p, collector, 5, ...LOAD)
  t.same(ticks(p, collector, 30, QUIET_BYTES / 2, 2 * QUIET_CPU_US), [], 'never collected while busy')
  t.same(ticks(p, collector, FIRST_TICKS, QUIET_BYTES / 2, QUIET_CPU_US / 2), [1], 'then quiet')
})

t.test('steady light traffic counts as quiet; a heap that did not grow is not collected', async t => {
  const { p, collector } = fakeProcess()
  t.same(ticks(p, collector, 30, QUIET_BYTES / 4, 5000), [], 'growth below GROWTH')
  t.ok(30 * QUIET_BYTES / 4 < GROWTH)
  t.same(ticks(p, collector, 40, QUIET_BYTES / 2, 5000), [1, 2], 'then, grown by GROWTH, collected')
})

t.test('traffic coming back between the two collections delays the second', async t => {
  const { p, collector } = fakeProcess()
  ticks(p, collector, 5, ...LOAD)
  t.same(ticks(p, collector, FIRST_TICKS), [1])
  t.same(ticks(p, collector, 20, ...LOAD), [], 'busy again')
  t.same(ticks(p, collector, SECOND_TICKS), [2], 'quiet again: the second')
})

t.test('a young generation V8 kept is tried again after another quiet spell, TRIES times at most', async t => {
  const { p, collector } = fakeProcess()
  ticks(p, collector, 5, ...LOAD)
  p.keepsYoung = 4 // the first collection's two and the second's two keep it
  t.same(ticks(p, collector, FIRST_TICKS + SECOND_TICKS), [1, 2])
  t.equal(p.young, 32 * MiB, 'still grown')
  t.same(ticks(p, collector, SECOND_TICKS), [2], 'tried again')
  t.equal(p.young, 2 * MiB, 'shrunk')
  t.same(ticks(p, collector, 60), [], 'then done')

  const stubborn = fakeProcess()
  ticks(stubborn.p, stubborn.collector, 5, ...LOAD)
  stubborn.p.keepsYoung = 1000
  const ran = ticks(stubborn.p, stubborn.collector, FIRST_TICKS + 10 * SECOND_TICKS)
  t.same(ran, [1, ...Array(TRIES).fill(2)], `given up after ${TRIES} tries`)
})

t.test('without gc() (V8 refused it) the collector does nothing', async t => {
  const stats = () => ({ used: 1, committed: 100 * MiB, young: 0, cpu: 0 })
  const collector = new IdleCollector({ stats, collect: null })
  for (let i = 0; i < 20; i++) t.equal(collector.tick(), 0)
  t.equal(collector.start().timer, null, 'and starts no timer')
})

// In a process of its own (no --expose-gc): garbage made after the collector started
// is given back by its collections, and the program's global has no gc().
t.test('real heap: the collections give the garbage back; no global gc() appears', async t => {
  const script = `
    const v8 = require('v8')
    const { IdleCollector, FIRST_TICKS, SECOND_TICKS } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'cli', 'heap.js'))})
    const collector = new IdleCollector()
    let junk = []
    for (let i = 0; i < 300000; i++) junk.push({ i, s: 'x' + i })
    junk = null
    const before = v8.getHeapStatistics().used_heap_size
    const ran = []
    for (let i = 0; i < FIRST_TICKS + SECOND_TICKS + 2 && ran.length < 2; i++) { const w = collector.tick(); if (w) ran.push(w) }
    const after = v8.getHeapStatistics().used_heap_size
    console.log(JSON.stringify({ ran, before, after, globalGc: typeof globalThis.gc }))
  `
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 })
  t.equal(r.status, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  t.same(out.ran, [1, 2], 'both collections ran')
  t.ok(out.before - out.after > 10 * MiB, `heap in use went from ${out.before} to ${out.after} bytes`)
  t.equal(out.globalGc, 'undefined', 'the global object was left as it was')
})
