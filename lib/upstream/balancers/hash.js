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

// The candidate that owns `key`. With a balance factor c (consistent hashing with
// bounded loads, Mirrokni, Thorup and Zadimoghaddam), a backend may hold at most
// ceil(c × average load) connections, counting the new one and scaled by weight; the
// key then goes to the next backend in its own rendezvous order that has room. So a
// hot key spills over instead of piling onto one backend, every process still agrees on
// the order, and with c >= 1 some backend always has room.
function pickByKey (candidates, key, balanceFactor = null) {
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
  if (balanceFactor === null || candidates.length < 2) return best

  let load = 1 // the new connection
  let weights = 0
  for (let i = 0; i < candidates.length; i++) {
    load += candidates[i].live
    weights += candidates[i].effectiveWeight
  }
  const room = backend => backend.live + 1 <= Math.ceil(balanceFactor * load * backend.effectiveWeight / weights)
  if (room(best)) return best
  const ranked = candidates.map(backend => ({ backend, score: score(keyHash, backend) }))
  ranked.sort((a, b) => b.score - a.score)
  for (const { backend } of ranked) if (room(backend)) return backend
  return best // rounding only; with c >= 1 the loop has found one
}

module.exports = { hashString, pickByKey }
