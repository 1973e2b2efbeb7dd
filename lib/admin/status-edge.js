'use strict'

// What the status page and the dashboard say of the second round of rules at the edge
// (pure, words only; status-page.js and dashboard-table.js lay them out): maintenance,
// --forward-auth's questions, and a --canary beside its pool, side by side.

const { quantile, fromCumulative } = require('../histogram')

// "under maintenance since 12:03:04 (page /srv/m.html)" per pool that is: [[where, words]].
function maintenanceNotes (listener) {
  const m = listener.maintenance
  if (!m) return []
  const allow = m.allow.length === 0 ? '' : `, but for ${m.allow.join(', ')}`
  const words = state => 'under maintenance: every request answered 503' +
    `${state.page === null ? '' : ` with ${state.page}`}${allow}`
  const notes = []
  if (m.listener !== null) notes.push([listener.name, words(m.listener)])
  for (const [route, state] of Object.entries(m.routes)) notes.push([`${listener.name} route ${route}`, words(state)])
  return notes
}

// "forward auth: asked 120, let in 118, remembered 40", or null before any.
function forwardAuthFact (listener) {
  const f = listener.forwardAuth
  if (!f || f.asked + f.cached === 0) return null
  return `forward auth: asked ${f.asked}, let in ${f.allowed}, remembered ${f.cached}`
}

// A canary and the pool beside it, side by side: { title, rows: [[what, stable, canary]] }.
function canaryTable (canary) {
  const side = s => {
    const counts = fromCumulative(s.time.counts)
    return {
      requests: String(s.requests),
      errors: String(s.errors),
      rate: s.requests === 0 ? '–' : `${(s.errors / s.requests * 100).toFixed(2)}%`,
      p50: ms(quantile(counts, 0.5)),
      p99: ms(quantile(counts, 0.99))
    }
  }
  const [stable, other] = [side(canary.stable), side(canary.canary)]
  const rows = [
    ['requests', stable.requests, other.requests],
    ['errors (5xx)', stable.errors, other.errors],
    ['error rate', stable.rate, other.rate],
    ['p50', stable.p50, other.p50],
    ['p99', stable.p99, other.p99]
  ]
  const title = `canary ${canary.share}% of new clients · cookie ${canary.cookie}`
  return { title, rows }
}

function ms (value) {
  if (value === null) return '–'
  return value < 10 ? `${Math.round(value * 100) / 100} ms` : `${Math.round(value)} ms`
}

module.exports = { maintenanceNotes, forwardAuthFact, canaryTable }
