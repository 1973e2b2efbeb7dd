'use strict'

// Which certificates a config wants lila to get itself (--tls local, --tls acme), pure:
// what the keeper keeps, and whether a process needs a keeper at all (loading none of
// tls/ when not).

// Does this config need a keeper at all?
function wanted (config) {
  return config.listeners.some(l => l.tls !== null && l.tls.source !== 'files')
}

// The certificates this config wants: key -> { source, names, listeners, http }. One
// per distinct (source, names): listeners that ask for the same certificate share it;
// `http`: one of them has --redirect-http, so HTTP-01 can be answered.
function wants (config) {
  const out = new Map()
  for (const l of config.listeners) {
    if (l.tls === null || l.tls.source === 'files') continue
    const key = `${l.tls.source} ${l.tls.names.join(',')}`
    if (!out.has(key)) out.set(key, { source: l.tls.source, names: l.tls.names, listeners: [], http: false })
    const want = out.get(key)
    want.listeners.push(l.name)
    if (l.redirectHttp !== null) want.http = true
  }
  return out
}

module.exports = { wanted, wants }
