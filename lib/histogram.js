'use strict'

// A fixed-bucket histogram of response times, kept per backend: one typed array of
// counts, so recording a sample allocates nothing and costs a few comparisons. The
// buckets are fixed and the same everywhere, so histograms add up (several workers,
// several backends) and Prometheus can aggregate them; percentiles are estimated
// from the buckets, as Prometheus' histogram_quantile() does.

// Upper bounds in ms (a sample equal to a bound falls in that bucket). One more
// bucket holds what is above the last bound.
const BOUNDS_MS = Object.freeze([0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000])

function createCounts () {
  return new Float64Array(BOUNDS_MS.length + 1) // Float64: exact up to 2^53 samples
}

// The bucket a sample in ms falls in.
function bucketOf (ms) {
  let i = 0
  while (i < BOUNDS_MS.length && ms > BOUNDS_MS[i]) i++
  return i
}

// Estimate the q-quantile (0 < q <= 1) in ms from per-bucket counts: find the bucket
// holding the q-th sample and interpolate linearly inside it. Samples above the last
// bound are reported at that bound (the estimate says "at least"). null without samples.
function quantile (counts, q) {
  let total = 0
  for (let i = 0; i < counts.length; i++) total += counts[i]
  if (total === 0) return null
  const rank = q * total
  let below = 0
  for (let i = 0; i < counts.length; i++) {
    if (counts[i] > 0 && below + counts[i] >= rank) {
      if (i === BOUNDS_MS.length) return BOUNDS_MS[i - 1]
      const lower = i === 0 ? 0 : BOUNDS_MS[i - 1]
      const estimate = lower + (BOUNDS_MS[i] - lower) * Math.max(0, rank - below) / counts[i]
      return Math.round(estimate * 1000) / 1000
    }
    below += counts[i]
  }
  return BOUNDS_MS[BOUNDS_MS.length - 1]
}

// Per-bucket counts -> the cumulative form of /status.json and /metrics: element i
// counts the samples up to BOUNDS_MS[i]; the one more at the end counts them all.
function cumulative (counts) {
  const out = new Array(counts.length)
  let sum = 0
  for (let i = 0; i < counts.length; i++) {
    sum += counts[i]
    out[i] = sum
  }
  return out
}

// The inverse, for whoever adds snapshots up (the cluster primary): cumulative -> per bucket.
function fromCumulative (cumulativeCounts) {
  const counts = createCounts()
  let previous = 0
  for (let i = 0; i < counts.length; i++) {
    counts[i] = cumulativeCounts[i] - previous
    previous = cumulativeCounts[i]
  }
  return counts
}

module.exports = { BOUNDS_MS, createCounts, bucketOf, quantile, cumulative, fromCumulative }
