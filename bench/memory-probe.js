'use strict'

// Loaded into the process being measured (`node --require bench/memory-probe.js lila
// ...`), by memory.js. It changes nothing until asked: on SIGWINCH it reads a request
// from $LILA_MEMORY_PROBE (a file path) and writes its answer to the same path with
// ".out" appended: the process's memory figures, after a full GC when the request says
// so and the process runs with --expose-gc, and a heap snapshot when asked for one.
//
//   request: { "seq": 3, "gc": false, "maps": false, "snapshot": null | "/tmp/x.heapsnapshot" }
//
// An answer allocates little (the figures and a file write); `maps` (resident bytes by
// kind of mapping, from /proc/self/smaps) allocates a few hundred KiB of text, which is
// enough to bring on a GC in an idle process: asked for only where that cannot matter.
//   answer:  { "seq": 3, rss, heapUsed, heapTotal, external, arrayBuffers,
//              spaces: { new_space: { used, committed }, old_space: ... }, ... }

const fs = require('fs')
const v8 = require('v8')

const file = process.env.LILA_MEMORY_PROBE

// Time spent in GC pauses, by kind, since the start: what a heap setting costs in CPU,
// read apart from the noise of a shared machine.
const gcTime = { minor: 0, major: 0, incremental: 0, weak: 0, count: 0 }
if (file) {
  const { PerformanceObserver, constants: c } = require('perf_hooks')
  const KINDS = {
    [c.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [c.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [c.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [c.NODE_PERFORMANCE_GC_WEAKCB]: 'weak'
  }
  new PerformanceObserver(list => {
    for (const e of list.getEntries()) {
      const kind = KINDS[e.detail ? e.detail.kind : e.kind] || 'minor'
      gcTime[kind] += e.duration
      gcTime.count++
    }
  }).observe({ entryTypes: ['gc'] })
}

function answer () {
  let request
  try {
    request = JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch {
    return
  }
  if (request.gc && typeof global.gc === 'function') {
    global.gc()
    global.gc() // a second pass frees what the first one's finalizers let go
  }
  if (request.snapshot) v8.writeHeapSnapshot(request.snapshot)
  const mem = process.memoryUsage()
  const heap = v8.getHeapStatistics()
  const spaces = {}
  for (const s of v8.getHeapSpaceStatistics()) {
    spaces[s.space_name] = { used: s.space_used_size, committed: s.physical_space_size, size: s.space_size }
  }
  const out = {
    seq: request.seq,
    gc: Boolean(request.gc && typeof global.gc === 'function'),
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    heapTotal: mem.heapTotal,
    heapCommitted: heap.total_physical_size,
    mallocedMemory: heap.malloced_memory,
    external: mem.external,
    arrayBuffers: mem.arrayBuffers,
    spaces,
    maps: request.maps ? residentByMapping() : null,
    gcTime: { ...gcTime }
  }
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(out))
  fs.renameSync(`${file}.tmp`, `${file}.out`)
}

// Resident bytes by kind of mapping (Linux): `brk` is malloc's main heap, `anon` the
// anonymous mappings (V8's heap pages, large mallocs, thread arenas), `file` code and
// data of node and its libraries. null without /proc.
function residentByMapping () {
  let text
  try {
    text = fs.readFileSync('/proc/self/smaps', 'utf8')
  } catch {
    return null
  }
  const kib = { brk: 0, anon: 0, file: 0 }
  let kind = 'anon'
  for (const line of text.split('\n')) {
    const m = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line)
    if (m) {
      kind = m[2] === '[heap]' ? 'brk' : m[2].startsWith('/') ? 'file' : 'anon'
    } else if (line.startsWith('Rss:')) {
      kib[kind] += Number(line.slice(4).trim().split(' ')[0])
    }
  }
  return { brk: kib.brk * 1024, anon: kib.anon * 1024, file: kib.file * 1024 }
}

if (file) process.on('SIGWINCH', answer)
