'use strict'

// Giving memory back once traffic stops (lib/cli/heap.js): when the idle collector
// collects, on a hand-fed heap (no timers), and that its collections give real memory
// back in a Node process of its own.

const t = require('tap')
const path = require('path')
const { spawnSync } = require('child_process')
const { IdleCollector, FIRST_TICKS, SECOND_TICKS, QUIET_BYTES, GROWTH } = require('../lib/cli/heap')

const MiB = 1024 * 1024

// A heap driven by hand: `used` and `committed` in bytes; a collection brings both
// down to `live`.
function fakeHeap () {
  const heap = { used: 10 * MiB, committed: 12 * MiB, live: 8 * MiB, collections: 0 }
  const collector = new IdleCollector({
    stats: () => ({ used: heap.used, committed: heap.committed }),
    collect: () => {
      heap.collections++
      heap.used = heap.live
      heap.committed = heap.live + MiB
    }
  })
  return { heap, collector }
}

// `n` ticks with `allocated` bytes allocated before each; the collections run.
function ticks (heap, collector, n, allocated = 0) {
  const ran = []
  for (let i = 0; i < n; i++) {
    heap.used += allocated
    heap.committed = Math.max(heap.committed, heap.used + MiB)
    const which = collector.tick()
    if (which !== 0) ran.push(which)
  }
  return ran
}

t.test('a busy heap is never collected, however big it grows', async t => {
  const { heap, collector } = fakeHeap()
  t.same(ticks(heap, collector, 60, 2 * MiB), [])
  t.equal(heap.collections, 0)
})

t.test('a heap that grew and went quiet is collected twice, then left alone', async t => {
  const { heap, collector } = fakeHeap()
  ticks(heap, collector, 10, 3 * MiB) // load: 30 MiB more
  t.same(ticks(heap, collector, FIRST_TICKS), [1], 'the first collection once quiet')
  t.equal(heap.used, heap.live)
  t.same(ticks(heap, collector, SECOND_TICKS - 1, 1024), [], 'the second waits for V8 to see 5 s of quiet')
  t.same(ticks(heap, collector, 1, 1024), [2])
  t.same(ticks(heap, collector, 120, 1024), [], 'nothing more while nothing grows')
  t.equal(heap.collections, 4, 'two, then two')
})

t.test('a collection V8 made itself (used went down) is not quiet', async t => {
  const { heap, collector } = fakeHeap()
  ticks(heap, collector, 5, 3 * MiB)
  heap.used -= 10 * MiB // a scavenge between two ticks
  t.same(ticks(heap, collector, 1), [], 'that tick is not quiet')
  t.same(ticks(heap, collector, FIRST_TICKS), [1])
})

t.test('steady light traffic counts as quiet; a heap that did not grow is not collected', async t => {
  const { heap, collector } = fakeHeap()
  t.same(ticks(heap, collector, 30, QUIET_BYTES / 4), [], 'growth below GROWTH')
  t.ok(30 * QUIET_BYTES / 4 < GROWTH)
  t.same(ticks(heap, collector, 40, QUIET_BYTES / 2), [1, 2], 'then, grown by GROWTH, collected')
})

t.test('traffic coming back between the two collections delays the second', async t => {
  const { heap, collector } = fakeHeap()
  ticks(heap, collector, 5, 3 * MiB)
  t.same(ticks(heap, collector, FIRST_TICKS), [1])
  t.same(ticks(heap, collector, 20, 2 * MiB), [], 'busy again')
  t.same(ticks(heap, collector, SECOND_TICKS), [2], 'quiet again: the second')
})

t.test('without gc() (V8 refused it) the collector does nothing', async t => {
  const collector = new IdleCollector({ stats: () => ({ used: 1, committed: 100 * MiB }), collect: null })
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
    for (let i = 0; i < FIRST_TICKS + SECOND_TICKS + 2; i++) { const w = collector.tick(); if (w) ran.push(w) }
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
