'use strict'

// Smooth weighted round robin, the interleaving nginx uses: weights 3:1 give
// A A B A rather than A A A B. Each pick raises every candidate's running score by its
// weight and takes the highest, which then pays back the total. Backends that are not
// candidates this time (down, full) keep their score, so they are not starved later.

function createRoundRobin () {
  const scores = new WeakMap()

  function pick (candidates) {
    let best = null
    let bestScore = -Infinity
    let total = 0
    for (let i = 0; i < candidates.length; i++) {
      const backend = candidates[i]
      const weight = backend.effectiveWeight
      const score = (scores.get(backend) || 0) + weight
      scores.set(backend, score)
      total += weight
      if (score > bestScore) {
        best = backend
        bestScore = score
      }
    }
    if (best) scores.set(best, bestScore - total)
    return best
  }

  return { pick }
}

module.exports = createRoundRobin
