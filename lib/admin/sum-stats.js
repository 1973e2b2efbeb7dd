'use strict'

// The workers' snapshots (lb.stats() of each) as one of the same shape, for the
// primary: counts summed, states merged. Pure. Listeners are matched by name and
// backends by address; one that only some workers have (DNS changing under them) is
// still there. The rules go by key, so fields added to the snapshots later are summed
// as counts unless listed here:
// settings: the first worker's
const SAME = new Set([
  'port', 'weight', 'maxConn', 'slowStart', 'family', 'bounds', 'buckets', 'le',
  'delayMs', 'errorStatus', 'rate', // an injected fault's settings (upstream/fault.js)
  'percent', 'primaryStatus', 'mirrorStatus', 'primaryBytes', 'mirrorBytes', // --mirror, a divergence
  'share' // --canary's
])
const MEAN = new Set(['latency', 'effectiveWeight']) // estimates: the mean over workers that have one
const LATEST = new Set(['changedAt', 'endsAt', 'leftMs', 'seenAt', 'since']) // times: the latest
const PERCENTILE = /^p\d+(\.\d+)?$/ // p50, p99: the worst (an upper bound of the true one)
// state: 'up' if any worker has it up, else 'pending' if any, else 'down'.
const STATE_ORDER = ['up', 'pending', 'down']

function sumStats (snapshots) {
  if (snapshots.length === 0) return { listeners: [] }
  return merge(snapshots, null)
}

function merge (values, key) {
  const present = values.filter(v => v !== undefined)
  const first = present[0]
  if (key === 'state' && present.every(v => typeof v === 'string')) {
    return STATE_ORDER.find(state => present.includes(state)) || first
  }
  if (typeof first === 'number' || (first === null && present.some(v => typeof v === 'number'))) {
    const numbers = present.filter(v => typeof v === 'number')
    if (SAME.has(key)) return first
    if (MEAN.has(key)) return numbers.length === 0 ? null : numbers.reduce((a, b) => a + b, 0) / numbers.length
    if (LATEST.has(key) || PERCENTILE.test(key)) return Math.max(...numbers)
    return numbers.reduce((a, b) => a + b, 0)
  }
  if (typeof first === 'boolean') return present.some(Boolean)
  if (Array.isArray(first)) return mergeArrays(present, key)
  if (first !== null && typeof first === 'object') {
    const out = {}
    for (const k of new Set(present.flatMap(v => v === null ? [] : Object.keys(v)))) {
      out[k] = merge(present.map(v => v === null ? undefined : v[k]), k)
    }
    return out
  }
  // Strings and nulls: the first worker's that says something; a backend's reasons
  // come from a worker that has it down.
  if (key === 'downReason' || key === 'downSource') return present.find(v => v !== null) ?? null
  return first ?? present.find(v => v !== null) ?? null
}

// Lists of listeners (by name) or backends (by address) are matched; lists of numbers
// (histogram counts) are added up element by element; anything else is the first's.
function mergeArrays (lists, key) {
  const sample = lists.find(list => list.length > 0)
  if (sample === undefined) return []
  const item = sample[0]
  const by = typeof item !== 'object' || item === null
    ? null
    : typeof item.address === 'string'
      ? 'address' // a backend
      : typeof item.name === 'string'
        ? 'name' // a listener
        : null
  if (by !== null) {
    const groups = new Map()
    for (const list of lists) {
      for (const entry of list) {
        if (!groups.has(entry[by])) groups.set(entry[by], [])
        groups.get(entry[by]).push(entry)
      }
    }
    return [...groups.values()].map(items => merge(items, null))
  }
  if (typeof sample[0] === 'number' && !SAME.has(key)) {
    const length = Math.max(...lists.map(list => list.length))
    return Array.from({ length }, (_, i) => lists.reduce((sum, list) => sum + (list[i] || 0), 0))
  }
  return sample
}

module.exports = { sumStats }
