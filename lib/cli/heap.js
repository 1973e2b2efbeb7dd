'use strict'

const v8 = require('v8')
const vm = require('vm')

// Giving memory back once traffic stops, when lila runs as the executable (never when
// it is required: the heap is then the embedding program's to manage).
//
// Under load V8 grows its young generation (two semi-spaces, up to 16 MiB each) and
// fills the old one with objects that lived across a few scavenges (requests in
// flight, connections being set up), and gives both back only at a garbage collection
// that comes while little is allocated. A proxy that has gone quiet allocates nearly
// nothing, so no collection comes: V8's own memory reducer took 30 to 45 s to run,
// and until then lila kept 40 to 50 MiB it no longer used (bench/RESULTS-memory.md).
//
// So lila watches its heap once a second. Once it has grown by GROWTH bytes since the
// last collection and then stayed quiet for a second (no collection, under QUIET_BYTES
// allocated), lila collects: two full collections in a row, the first freeing the old
// generation's garbage and emptying the young generation, the second releasing the
// pages the first emptied. V8 shrinks the young generation only at a collection after
// 5 s in which little was allocated (what a collection moves into the old generation
// counts as allocated), so after SECOND_TICKS more quiet seconds lila collects twice
// more: the young generation goes back to its first size and the old generation's
// emptied pages are released. 7 to 8 s after traffic stopped, lila is back near where
// it started. A busy process is never quiet, so lila never collects under load; a
// quiet one is collected four times per growth, each a pause of a few milliseconds
// (tens with 10,000 connections open).
const TICK_MS = 1000
const FIRST_TICKS = 1
const SECOND_TICKS = 6
const QUIET_BYTES = 256 * 1024
const GROWTH = 4 * 1024 * 1024

// stats() -> { used, committed } (bytes of V8's heap in use, and resident); collect()
// runs a full collection. Both are injectable for tests; tick() is what the timer runs.
class IdleCollector {
  constructor ({ stats = heapStats, collect = gcFunction(), growth = GROWTH } = {}) {
    this.stats = stats
    this.collect = collect
    this.growth = growth
    const now = stats()
    this.floor = now.committed // committed heap after the last collection (or at the start)
    this.lastUsed = now.used
    this.quiet = 0 // ticks in a row without a collection and with little allocated
    this.second = false // the first collection ran; the second waits for SECOND_TICKS
    this.collections = 0
    this.timer = null
  }

  // One look at the heap: 0, or which collection (1, 2) it ran.
  tick () {
    const { used, committed } = this.stats()
    const allocated = used - this.lastUsed // negative: V8 collected since the last tick
    this.lastUsed = used
    this.quiet = allocated >= 0 && allocated < QUIET_BYTES ? this.quiet + 1 : 0
    if (this.collect === null) return 0
    if (this.second) {
      if (this.quiet < SECOND_TICKS) return 0
      this.second = false
      this.#run(2)
      this.floor = this.stats().committed
      return 2
    }
    if (this.quiet < FIRST_TICKS || committed < this.floor + this.growth) return 0
    this.second = true
    this.#run(2)
    return 1
  }

  #run (times) {
    for (let i = 0; i < times; i++) this.collect()
    this.collections += times
    this.lastUsed = this.stats().used
    this.quiet = 0
  }

  start () {
    if (this.timer !== null || this.collect === null) return this
    this.timer = setInterval(() => this.tick(), TICK_MS)
    this.timer.unref() // never what keeps the process alive
    return this
  }

  stop () {
    clearInterval(this.timer)
    this.timer = null
  }
}

function heapStats () {
  const h = v8.getHeapStatistics()
  return { used: h.used_heap_size, committed: h.total_physical_size }
}

// V8's gc(): the global one when node runs with --expose-gc, else taken from a context
// made while the flag is briefly on (the flag only adds gc() to contexts made while it
// is set, so the program's own global stays as it was). null if V8 refuses.
function gcFunction () {
  if (typeof globalThis.gc === 'function') return globalThis.gc
  try {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    return typeof gc === 'function' ? gc : null
  } catch {
    return null
  } finally {
    v8.setFlagsFromString('--no-expose-gc')
  }
}

// What the executable runs before serving (bin.js asks main for it).
function startIdleCollector () {
  return new IdleCollector().start()
}

module.exports = { IdleCollector, startIdleCollector, gcFunction, FIRST_TICKS, SECOND_TICKS, QUIET_BYTES, GROWTH }
