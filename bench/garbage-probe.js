'use strict'

// Loaded into the lila being measured (`node --require bench/garbage-probe.js lila ...`)
// by garbage.js. On the first SIGWINCH it starts V8's sampling heap profiler, keeping
// objects that minor and major GCs collected (garbage is what is measured); on the
// second it stops and writes the profile, reduced to bytes by function, to
// $LILA_GARBAGE_PROBE.

const inspector = require('inspector')
const fs = require('fs')

const file = process.env.LILA_GARBAGE_PROBE
const session = new inspector.Session()
session.connect()
let sampling = false

process.on('SIGWINCH', () => {
  if (!sampling) {
    sampling = true
    session.post('HeapProfiler.startSampling', {
      samplingInterval: 256,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true
    })
    return
  }
  sampling = false
  session.post('HeapProfiler.stopSampling', (err, { profile } = {}) => {
    if (err) return fs.writeFileSync(file, JSON.stringify({ error: err.message }))
    const byFunction = new Map()
    let total = 0
    // Each sample is charged to the function that allocated; a builtin's (Map, push,
    // exec: no file) to the first function with a file above it too.
    const walk = (node, caller) => {
      const { functionName, url, lineNumber } = node.callFrame
      const own = url === '' ? null : `${functionName || '(anonymous)'} ${url.split('/').pop()}:${lineNumber + 1}`
      const where = own !== null ? own : `${functionName || '(anonymous)'} < ${caller}`
      if (node.selfSize > 0) {
        total += node.selfSize
        byFunction.set(where, (byFunction.get(where) || 0) + node.selfSize)
      }
      for (const child of node.children) walk(child, own !== null ? own : caller)
    }
    walk(profile.head, '(root)')
    const top = [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 40)
    fs.writeFileSync(file, JSON.stringify({ total, top }))
  })
})
