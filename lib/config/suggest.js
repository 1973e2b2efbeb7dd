'use strict'

// "did you mean": the one place a misspelt word (a config key, a mode, an option) is
// matched against the words that were expected.

// `did you mean "x"?` for the candidate nearest to `word`, or null when none is near.
function didYouMean (word, candidates) {
  const suggestion = closest(word, candidates)
  return suggestion === null ? null : `did you mean ${JSON.stringify(suggestion)}?`
}

// The candidate nearest to `word`, or null: at most two edits away, and fewer than half
// the word's length, so that "x" is not taken for "rr". Ties go to the first candidate.
// A word of three letters or more that begins one candidate only is taken for it
// first: "--proto" is "--protocol", not "--port" two edits away.
function closest (word, candidates) {
  if (word.length > 40) return null
  const lower = word.toLowerCase()
  if (lower.replace(/^-+/, '').length >= 3) {
    const starting = [...candidates].filter(candidate => candidate.startsWith(lower))
    if (starting.length === 1) return starting[0]
  }
  let best = null
  let bestDistance = Math.min(3, Math.ceil(word.length / 2))
  for (const candidate of candidates) {
    const d = distance(lower, candidate)
    if (d < bestDistance) {
      best = candidate
      bestDistance = d
    }
  }
  return best
}

// Edit distance counting a swap of two neighbours as one edit ("retires" is one from
// "retries"): optimal string alignment.
function distance (a, b) {
  let before = null
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
      if (before !== null && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        current[j] = Math.min(current[j], before[j - 2] + 1)
      }
    }
    before = previous
    previous = current
  }
  return previous[b.length]
}

module.exports = { didYouMean, closest, distance }
