'use strict'

// Consistent hashing shared by the hash modes: weighted rendezvous (highest random
// weight) hashing. Every backend scores the key; the highest score wins. Removing a
// backend moves only the keys it owned, and the result depends on nothing but the key
// and the backend addresses, so every lila process agrees on it.

// 32-bit FNV-1a over UTF-16 code units, finished with murmur3's mixer for avalanche.
function hashString (text, seed = 0x811c9dc5) {
  let h = seed
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return mix32(h)
}

function mix32 (h) {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

// The score of `backend` for a key, as in "Weighted distributed hash tables"
// (Schindelhauer & Schomaker): -weight / ln(u), u uniform in (0, 1).
function score (keyHash, backend) {
  const u = (mix32(keyHash ^ backend.hashSeed) + 0.5) / 4294967296
  return -backend.effectiveWeight / Math.log(u)
}

function pickByKey (candidates, key) {
  const keyHash = hashString(key)
  let best = null
  let bestScore = -Infinity
  for (let i = 0; i < candidates.length; i++) {
    const s = score(keyHash, candidates[i])
    if (s > bestScore) {
      best = candidates[i]
      bestScore = s
    }
  }
  return best
}

module.exports = { hashString, mix32, pickByKey }
