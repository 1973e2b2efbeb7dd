'use strict'

// Which certificates a config wants lila to get itself (--tls local, --tls acme), pure:
// what the keeper keeps, and whether a process needs a keeper at all (loading none of
// tls/ when not).

const { challengeTypes } = require('./http01')

// Does this config need a keeper at all?
function wanted (config) {
  return config.listeners.some(l => l.tls !== null && l.tls.source !== 'files')
}

// The certificates this config wants: key -> { source, names, listeners, types }. One
// per distinct (source, names): listeners that ask for the same certificate share it;
// `types`: the ACME challenges lila can answer for it, in the order to try them
// (http01.js).
function wants (config) {
  const out = new Map()
  const served = new Map() // key -> the configs of the listeners that serve it
  for (const l of config.listeners) {
    if (l.tls === null || l.tls.source === 'files') continue
    const key = `${l.tls.source} ${l.tls.names.join(',')}`
    if (!out.has(key)) out.set(key, { source: l.tls.source, names: l.tls.names, listeners: [], types: null })
    if (!served.has(key)) served.set(key, [])
    out.get(key).listeners.push(l.name)
    served.get(key).push(l)
  }
  for (const [key, want] of out) want.types = challengeTypes(config, served.get(key))
  return out
}

module.exports = { wanted, wants }
