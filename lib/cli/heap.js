'use strict'

// Node's v8 and vm modules, and the context gc() comes from, are required with the
// collector's first look, a tick after the start: none of it is part of start-up.

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
// So lila watches once a second. Once its heap has grown by GROWTH bytes since the
// last collection and lila has then been quiet for a second (under QUIET_CPU_US of CPU,
// under QUIET_BYTES allocated, no collection by V8), it collects: two full collections
// in a row, the first freeing the old generation's garbage and emptying the young
// generation, the second releasing the pages the first emptied. V8 shrinks the young
// generation only at a collection after 5 s in which little was allocated (what a
// collection moves into the old generation counts as allocated), so after SECOND_TICKS
// more quiet seconds lila collects twice again, and the young generation goes back to
// its first size; should V8 still have kept it, lila tries again after another quiet
// spell, up to TRIES times. 7 to 8 s after traffic stopped lila is back near where it
// started. A busy process is never quiet (CPU counts, so bodies moved as Buffers do
// too), so lila never collects under load; each collection is a pause of a few
// milliseconds (tens with 10,000 connections open), four or so per growth.
const TICK_MS = 1000
const FIRST_TICKS = 1
const SECOND_TICKS = 6
const TRIES = 3
const QUIET_BYTES = 256 * 1024
const QUIET_CPU_US = 100 * 1000 // a tenth of a core
const GROWTH = 4 * 1024 * 1024

// stats() -> { used, committed, young, cpu }: bytes of V8's heap in use, resident, and
// of its young generation, and the process's CPU time in µs; collect() runs a full
// collection. Both injectable for tests; tick() is what the timer runs.
class IdleCollector {
  constructor ({ stats = processStats, collect = gcFunction(), growth = GROWTH } = {}) {
    this.stats = stats
    this.collect = collect
    this.growth = growth
    const now = stats()
    this.last = now
    this.floor = now.committed // committed heap after the last collection (or at the start)
    this.young = now.young // the young generation's first size, which it shrinks back to
    this.quiet = 0 // quiet ticks in a row
    this.second = false // collected once; collecting again after SECOND_TICKS
    this.tries = 0 // second collections that left the young generation grown
    this.collections = 0
    this.timer = null
  }

  // One look: 0, or which collection (1, 2) it ran.
  tick () {
    const now = this.stats()
    const allocated = now.used - this.last.used // negative: V8 collected since the last tick
    const busy = now.cpu - this.last.cpu
    this.last = now
    const quiet = allocated >= 0 && allocated < QUIET_BYTES && busy < QUIET_CPU_US
    this.quiet = quiet ? this.quiet + 1 : 0
    if (this.collect === null) return 0
    if (!this.second) {
      if (this.quiet < FIRST_TICKS || now.committed < this.floor + this.growth) return 0
      this.#run()
      this.second = true
      this.tries = 0
      return 1
    }
    if (this.quiet < SECOND_TICKS) return 0
    const after = this.#run()
    // Still four times its first size or more: V8 kept it; again, after more quiet.
    if (after.young >= 4 * this.young && ++this.tries < TRIES) return 2
    this.second = false
    this.floor = after.committed
    return 2
  }

  #run () {
    this.collect()
    this.collect()
    this.collections += 2
    this.last = this.stats() // the collections' own CPU and freeing are not traffic
    this.quiet = 0
    return this.last
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

function processStats () {
  const v8 = require('v8')
  const h = v8.getHeapStatistics()
  const young = v8.getHeapSpaceStatistics().find(space => space.space_name === 'new_space')
  const cpu = process.cpuUsage()
  return {
    used: h.used_heap_size,
    committed: h.total_physical_size,
    young: young === undefined ? 0 : young.space_size,
    cpu: cpu.user + cpu.system
  }
}

// V8's gc(): the global one when node runs with --expose-gc, else taken from a context
// made while the flag is briefly on (the flag only adds gc() to contexts made while it
// is set, so the program's own global stays as it was). null if V8 refuses.
function gcFunction () {
  if (typeof globalThis.gc === 'function') return globalThis.gc
  const v8 = require('v8')
  try {
    v8.setFlagsFromString('--expose-gc')
    const gc = require('vm').runInNewContext('gc')
    return typeof gc === 'function' ? gc : null
  } catch {
    return null
  } finally {
    v8.setFlagsFromString('--no-expose-gc')
  }
}

// What the executable runs before serving (bin.js asks main for it). The collector is
// made a tick later: its first look at the heap then comes after start-up.
function startIdleCollector () {
  setTimeout(() => new IdleCollector().start(), TICK_MS).unref()
}

module.exports = {
  IdleCollector, startIdleCollector, gcFunction, FIRST_TICKS, SECOND_TICKS, TRIES, QUIET_BYTES, QUIET_CPU_US, GROWTH
}
