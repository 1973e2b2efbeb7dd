'use strict'

// Power of two random choices: draw two different backends at random (in proportion
// to their weights) and take the less loaded one. Almost as even as least-connections,
// without every balancer instance herding onto the same "least" backend.

function createRandom ({ random = Math.random } = {}) {
  function draw (candidates, total, skip) {
    let r = random() * total
    let last = null
    for (let i = 0; i < candidates.length; i++) {
      const backend = candidates[i]
      if (backend === skip) continue
      last = backend
      r -= backend.effectiveWeight
      if (r < 0) return backend
    }
    return last // rounding left r a hair above zero
  }

  function pick (candidates) {
    if (candidates.length < 2) return candidates[0] || null
    let total = 0
    for (let i = 0; i < candidates.length; i++) total += candidates[i].effectiveWeight
    const first = draw(candidates, total, null)
    const second = draw(candidates, total - first.effectiveWeight, first)
    const firstLoad = (first.live + 1) / first.effectiveWeight
    const secondLoad = (second.live + 1) / second.effectiveWeight
    return secondLoad < firstLoad ? second : first
  }

  return { pick }
}

module.exports = createRandom
