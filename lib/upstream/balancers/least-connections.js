'use strict'

// Fewest live connections (or in-flight requests) relative to weight. The load of a
// backend is counted as if the new connection were already on it, (live + 1) / weight,
// as HAProxy does, so that weights matter even when everything is idle. Ties rotate:
// the scan starts one place further each time, so idle backends share the work.

function createLeastConnections () {
  let start = 0

  function pick (candidates) {
    const n = candidates.length
    if (n === 0) return null
    start = start >= n - 1 ? 0 : start + 1
    let best = null
    let bestLoad = Infinity
    for (let i = 0; i < n; i++) {
      const backend = candidates[(start + i) % n]
      const load = (backend.live + 1) / backend.effectiveWeight
      if (load < bestLoad) {
        best = backend
        bestLoad = load
      }
    }
    return best
  }

  return { pick }
}

module.exports = createLeastConnections
