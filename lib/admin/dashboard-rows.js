'use strict'

// What the dashboard shows, as rows (pure): every backend of a snapshot in the order
// shown, each row's key, and the rates between two snapshots' totals.

// Every backend of every listener, in the order shown: [{ listener, route, backend }],
// route null for a listener's own backends, else the route (--route) they serve.
function backendRows (snapshot) {
  const rows = []
  for (const listener of snapshot.listeners) {
    for (const backend of listener.backends) rows.push({ listener, route: null, backend })
    for (const route of listener.routes || []) {
      for (const backend of route.backends) rows.push({ listener, route, backend })
    }
  }
  return rows
}

const rowKey = ({ listener, route, backend }) =>
  route === null ? `${listener.name} ${backend.address}` : `${listener.name} ${route.name} ${backend.address}`

// Totals per backend, to turn two snapshots into rates.
function totals (snapshot) {
  const out = new Map()
  for (const row of backendRows(snapshot)) out.set(rowKey(row), row.backend.total)
  return out
}

// Requests (or connections) per second per backend between two totals() taken
// `elapsedMs` apart; a backend new since the first has no rate yet.
function rates (before, after, elapsedMs) {
  const out = new Map()
  if (before === null || elapsedMs <= 0) return out
  for (const [key, total] of after) {
    if (before.has(key)) out.set(key, Math.max(0, total - before.get(key)) * 1000 / elapsedMs)
  }
  return out
}

const clamp = (i, n) => n === 0 ? 0 : Math.min(Math.max(i, 0), n - 1)

module.exports = { backendRows, rowKey, totals, rates, clamp }
