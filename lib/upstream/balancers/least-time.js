'use strict'

// Lowest expected wait: each backend's decaying peak average of response time (peak-EWMA,
// as in Finagle and Linkerd; see Backend#latencyEstimate) times its in-flight count as
// if the new connection were already there, relative to weight:
//   cost = latency × (live + 1) / weight
// A slow backend gets less, a busy one too, and an idle one whose estimate has decayed is
// tried again. A backend with no sample yet counts as the average of those that have
// one, so a newcomer is neither flooded nor starved. Ties (all unmeasured, or all idle)
// fall back to fewest connections, then rotate as least-connections does.

function createLeastTime () {
  let start = 0
  // Each candidate's estimate, by index, computed once per pick (it reads the clock and
  // takes an exp); reused from pick to pick.
  const latencies = []

  function pick (candidates) {
    const n = candidates.length
    if (n === 0) return null
    let known = 0
    let sum = 0
    latencies.length = n
    for (let i = 0; i < n; i++) {
      const latency = candidates[i].latencyEstimate()
      latencies[i] = latency
      if (latency !== null) {
        known++
        sum += latency
      }
    }
    const unknown = known === 0 ? 0 : sum / known
    start = start >= n - 1 ? 0 : start + 1
    let best = null
    let bestCost = Infinity
    let bestLoad = Infinity
    for (let i = 0; i < n; i++) {
      const j = (start + i) % n
      const backend = candidates[j]
      const latency = latencies[j]
      const load = (backend.live + 1) / backend.effectiveWeight
      const cost = (latency === null ? unknown : latency) * load
      if (cost < bestCost || (cost === bestCost && load < bestLoad)) {
        best = backend
        bestCost = cost
        bestLoad = load
      }
    }
    return best
  }

  return { pick }
}

module.exports = createLeastTime
