'use strict'

// /status: a stats snapshot as one self-contained HTML page (no script, no external
// asset) that reloads itself every few seconds. Pure: snapshot in, text out. It shows
// first what is wrong (backends not up, panic), then each listener with its backends:
// where the traffic goes (share of the requests, live count) and how it goes
// (failures, bytes, response-time percentiles). An injected fault is said with what is
// left of it, among what is wrong and in its backend's row.

const { describeFault, describeMirror, formatPorts } = require('../format')
const { telemetrySection } = require('./status-telemetry')
const { maintenanceNotes, forwardAuthFact, canaryTable } = require('./status-edge')

const { fleetSection } = require('./fleet-view')

const REFRESH_S = 2

const STYLE = '\n' + [
  'body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}',
  'h1{font-size:1.3em;margin:0}h2{font-size:1.1em;margin:1.6em 0 .3em}h2 small{font-weight:normal;color:#666}',
  '.meta,.facts{color:#555;margin:.2em 0}' +
    '.problems{background:#fff3f0;border-left:4px solid #c0392b;padding:.4em .8em;margin:1em 0}',
  '.ok{background:#f0faf2;border-left:4px solid #27ae60;padding:.4em .8em;margin:1em 0}',
  'table{border-collapse:collapse;background:#fff;box-shadow:0 0 0 1px #ddd}' +
    'th,td{padding:.3em .7em;text-align:right;white-space:nowrap}',
  'th{background:#f0f0f0;font-weight:600}' +
    'td:first-child,th:first-child,td.st,th.st{text-align:left}tr+tr td{border-top:1px solid #eee}',
  '.st b{display:inline-block;min-width:5.5em;padding:0 .4em;' +
    'border-radius:3px;color:#fff;text-align:center;font-weight:600}',
  '.up b{background:#27ae60}.down b{background:#c0392b}.pending b{background:#7f8c8d}' +
    '.draining b,.drained b{background:#d68910}.disabled b{background:#5d6d7e}',
  'td.st{white-space:normal;max-width:24em}.why{color:#666;display:block;margin-top:.2em;font-size:13px}' +
    '.why.fault{color:#b9770e;font-weight:600}',
  '.bar{display:inline-block;height:.7em;background:#3498db;vertical-align:middle;margin-right:.4em}' +
    '.panic{color:#c0392b;font-weight:600}',
  'footer{margin-top:2em;color:#777}a{color:#2471a3}',
  '.charts{display:flex;flex-wrap:wrap;gap:1em;margin:.4em 0}.chart{margin:0;background:#fff;' +
    'box-shadow:0 0 0 1px #ddd;padding:.3em .5em}.chart figcaption{color:#555;font-size:12px}',
  '.chart polyline{fill:none;stroke:#3498db;stroke-width:1.5}.chart.err polyline{stroke:#c0392b}' +
    '.chart line{stroke:#ddd}',
  '.spark{vertical-align:middle;background:#f7f9fb}.spark polyline{fill:none;stroke:#3498db;stroke-width:1.2}' +
    '.spark polyline.err{stroke:#c0392b}'
].join('\n')

// history: { [listener name]: { points, backends: { [address]: points } } } (History#series
// in history.js), for the charts.
function renderPage (snapshot, { version = null, now = Date.now(), history = {} } = {}) {
  const problems = []
  let backends = 0
  let up = 0
  for (const l of snapshot.listeners) {
    for (const [where, words] of maintenanceNotes(l)) problems.push(`<li>${esc(where)}: <b>${esc(words)}</b></li>`)
    if (l.panic) {
      problems.push(`<li class=panic>${esc(l.name)}: panic, every backend is down; traffic goes to them anyway</li>`)
    }
    for (const [where, pool] of [[l.name, l], ...(l.routes || []).map(r => [`${l.name} route ${r.name}`, r])]) {
      if (pool !== l && pool.panic) {
        problems.push(`<li class=panic>${esc(where)}: panic, every backend is down; traffic goes to them anyway</li>`)
      }
      for (const r of pool.ranges || []) {
        if (r.live === 0) problems.push(`<li>${esc(where)} → ${esc(r.range)}: no port listens (${r.idle} idle)</li>`)
      }
      for (const b of pool.backends) {
        backends++
        if (b.fault) {
          problems.push(`<li>${esc(where)} → ${esc(b.address)}: <b>fault injected</b> ` +
            `(${esc(describeFault(b.fault, now))})</li>`)
        }
        if (b.status === 'up') {
          up++
        } else {
          const why = b.reason ? ` (${esc(b.reason)})` : ''
          problems.push(`<li>${esc(where)} → ${esc(b.address)}: <b>${esc(b.status)}</b>${why}</li>`)
        }
      }
    }
  }
  for (const c of snapshot.certificates || []) {
    const what = `${esc(c.listener)}: certificate${c.names.length ? ` for ${esc(c.names.join(', '))}` : ''}`
    if (c.notAfter === null) problems.push(`<li>${what}: <b>none yet</b>; TLS clients get a handshake failure</li>`)
    else if (c.notAfter <= now) problems.push(`<li>${what}: <b>expired</b> ${duration(now - c.notAfter)} ago</li>`)
    if (c.lastError) problems.push(`<li>${what}: renewal failing: ${esc(c.lastError)}</li>`)
  }
  if (snapshot.fleet && !snapshot.fleet.up) {
    problems.push(`<li>fleet ${esc(snapshot.fleet.name)}: <b>Redis unavailable</b>; this lila goes on alone</li>`)
  }
  const uptime = snapshot.startedAt !== undefined ? ` · up ${duration(now - snapshot.startedAt)}` : ''
  const listeners = snapshot.listeners.length
  const summary = `${listeners} listener${listeners === 1 ? '' : 's'}, ` +
    `${up} of ${backends} backend${backends === 1 ? '' : 's'} up`
  const viewport = '<meta name="viewport" content="width=device-width,initial-scale=1">'
  const clock = new Date(now).toISOString().replace('T', ' ').slice(0, 19)
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="${REFRESH_S}">
${viewport}<title>lila: ${esc(summary)}</title><style>${STYLE}</style></head>
<body>
<h1>lila${version ? ` ${esc(version)}` : ''}</h1>
<p class="meta">${esc(summary)}${uptime} · ${clock} UTC · refreshes every ${REFRESH_S}s</p>
${problems.length ? `<ul class="problems">${problems.join('')}</ul>` : '<p class="ok">Every backend is up.</p>'}
${snapshot.listeners.map(l => listenerSection(l, history[l.name] || NO_HISTORY, now)).join('\n')}
${certificateSection(snapshot.certificates || [], now)}
${fleetSection(snapshot.fleet, esc)}
${telemetrySection(snapshot.telemetry, esc)}
<footer><a href="/status.json">/status.json</a> · <a href="/metrics">/metrics</a></footer>
</body></html>
`
}

const NO_HISTORY = { points: [], backends: {}, routes: {} }

// Each certificate presented: for what, by whom, until when; for those lila gets itself,
// its next renewal and what went wrong last. Never a key.
function certificateSection (certificates, now) {
  if (certificates.length === 0) return ''
  const rows = certificates.map(c => {
    const left = c.notAfter === null ? '–' : c.notAfter <= now ? 'expired' : `${c.daysLeft} days`
    const until = c.notAfter === null ? 'none yet' : isoTime(c.notAfter)
    const renewal = c.source === 'files'
      ? 'read again on SIGHUP'
      : [c.nextRenewal === null ? null : `next ${isoTime(c.nextRenewal)}`,
          c.lastRenewal === null ? null : `last ${isoTime(c.lastRenewal)}`].filter(Boolean).join(' · ')
    const why = c.lastError ? `<span class="why">${esc(c.lastError)}</span>` : ''
    const client = c.clientCa ? `<span class="why">client certificates: ${esc(c.clientCa)}</span>` : ''
    return `<tr><td>${esc(c.listener)}</td><td class="st">${esc(c.names.join(', ') || '–')}${client}</td>` +
      `<td class="st">${esc(c.issuer || '–')}</td><td>${esc(until)}</td><td>${esc(left)}</td>` +
      `<td class="st">${esc(c.source === 'files' ? 'file' : c.source)}</td>` +
      `<td class="st">${esc(renewal)}${why}</td></tr>`
  })
  return `<h2>Certificates</h2>
<table><tr><th>listener</th><th class="st">names</th><th class="st">issuer</th><th>not after</th>` +
    `<th>left</th><th class="st">from</th><th class="st">renewal</th></tr>
${rows.join('\n')}
</table>`
}

const isoTime = t => new Date(t).toISOString().replace('T', ' ').slice(0, 16) + ' UTC'

function listenerSection (l, history, now) {
  const facts = [
    `active ${l.active}`, `waiting ${l.waiting}`, `queued ${l.queued}`, `accepted ${l.accepted}`,
    `unserved ${l.unserved}`, `queue timeouts ${l.queueTimeouts}`, `retries ${byCause(l.retries)}`,
    ...(l.retryBudgetExhausted > 0 ? [`retries refused by the budget ${l.retryBudgetExhausted}`] : []),
    ...(l.failedEverywhere > 0 ? [`requests that failed everywhere ${l.failedEverywhere}`] : []),
    ...(limitedCount(l) > 0 ? [`turned away by per-client limits ${byCause(nonZero(l.limited))}`] : []),
    ...(countOf(l.refused) > 0 ? [`refused at the edge ${byCause(l.refused)}`] : []),
    ...Object.entries(l.compression || {}).map(([coding, c]) =>
      `${esc(coding)} ${c.responses} responses, ${bytes(c.bytesIn)} → ${bytes(c.bytesOut)}`),
    ...(l.sticky ? [`sticky ${esc(l.sticky)}: ${byCause(l.stickyResponses)}`] : []),
    ...(forwardAuthFact(l) === null ? [] : [esc(forwardAuthFact(l))])
  ].join(' · ')
  const routes = l.routes || []
  const own = routes.length > 0 && l.backends.length === 0
    ? '<p class="facts">No backends of its own: a request no route matches gets 404.</p>'
    : backendTable(l, l.backends, history.backends, now)
  return `<h2>${esc(l.name)} <small>${esc(l.protocol)} · ${esc(l.mode)}</small></h2>
<p class="facts">${facts}${l.panic ? ' · <span class="panic">PANIC</span>' : ''}${notAccepting(l)}</p>
${(l.ranges || []).map(rangeLine).join('\n')}
${l.app ? appSection(l.app) : ''}
${l.mirror ? mirrorSection(l.mirror, now) : ''}
${charts(history.points, now, perSecond(l))}
${own}
${l.canary ? canarySection(l, l.canary, history, now) : ''}
${routes.map(r => routeSection(l, r, (history.routes || {})[r.name] || {}, now)).join('\n')}`
}

// --mirror: what became of the copies; with --compare, how the answers compared, the
// median times of both sides, and the method and paths that diverged, the latest first.
function mirrorSection (m, now) {
  const r = m.requests
  const copies = `mirror ${esc(describeMirror(m))}: sent ${r.sent} · in flight ${m.inFlight} · ` +
    `dropped ${r.dropped} · too large ${r['too-large']} · failed ${r.failed}`
  const c = m.compare
  if (!c) return `<p class="facts">${copies}</p>`
  const p50 = `p50 ${ms(c.primaryTime.p50)} (primary) vs ${ms(c.mirrorTime.p50)} (mirror)`
  const compared = `compare: same ${c.same} · another status ${c.status} · another body ${c.body} · ${p50}`
  const rows = c.divergences.map(d => `<tr><td>${esc(d.method)} ${esc(d.path)}</td>` +
    `<td class="st">${d.result === 'status' ? 'status' : 'body'}</td>` +
    `<td>${d.primaryStatus}${d.result === 'body' ? ` (${bytes(d.primaryBytes)})` : ''}</td>` +
    `<td>${d.mirrorStatus}${d.result === 'body' ? ` (${bytes(d.mirrorBytes)})` : ''}</td>` +
    `<td>${d.count}</td><td>${duration(now - d.seenAt)} ago</td></tr>`).join('\n')
  const table = rows === ''
    ? ''
    : '<table><tr><th>diverged</th><th class="st">in</th><th>primary</th><th>mirror</th><th>times</th>' +
      `<th>last</th></tr>\n${rows}\n</table>`
  return `<p class="facts">${copies}</p>\n<p class="facts">${compared}</p>\n${table}`
}

// --- lila run (app/): the app's command, its restarts, and a row per instance ---
function appSection (app) {
  const restarts = Object.keys(app.restarts).length === 0 ? 'none' : byCause(app.restarts)
  const facts = `app <code>${esc(app.command)}</code> · ${app.instances} instances` +
    `${app.rolling ? ' · rolling restart under way' : ''} · restarts ${restarts}`
  const rows = app.list.map(i => `<tr><td>app.${i.number}</td><td>${i.pid ?? '–'}</td><td>${i.port}</td>` +
    `<td>${i.generation}</td><td class="st">${esc(i.state)}${i.crashLooping ? ' (crash loop)' : ''}</td>` +
    `<td>${i.uptime > 0 ? duration(i.uptime) : '–'}</td><td>${i.rss === null ? '–' : bytes(i.rss)}</td>` +
    `<td>${i.exit === null ? '' : esc(i.exit)}</td></tr>`).join('\n')
  return `<p class="facts">${facts}</p>
<table><tr><th>instance</th><th>pid</th><th>port</th><th>generation</th><th class="st">state</th><th>uptime</th>` +
  `<th>memory</th><th>last exit</th></tr>
${rows}
</table>`
}

// --route: a route's pool, under its listener.
function routeSection (l, r, history, now) {
  const facts = [`queued ${r.queued}`, `queue timeouts ${r.queueTimeouts}`, `retries ${byCause(r.retries)}`].join(' · ')
  return `<h3>route ${esc(r.name)} <small>${esc(r.match)} · ${esc(r.mode)}</small></h3>
<p class="facts">${facts}${r.panic ? ' · <span class="panic">PANIC</span>' : ''}</p>
${(r.ranges || []).map(rangeLine).join('\n')}
${backendTable(l, r.backends, history, now)}
${r.canary ? canarySection(l, r.canary, history, now) : ''}`
}

// --canary: both sides' requests, errors and latency side by side, then the canary
// pool's backends.
function canarySection (l, canary, history, now) {
  const { title, rows } = canaryTable(canary)
  const body = rows.map(([what, stable, other]) => `<tr><td>${esc(what)}</td><td>${esc(stable)}</td>` +
    `<td>${esc(other)}</td></tr>`).join('\n')
  return `<h3>${esc(title)}</h3>
<table><tr><th></th><th>stable</th><th>canary</th></tr>
${body}
</table>
${backendTable(l, canary.backends, history.backends || {}, now)}`
}

function backendTable (l, backends, history, now) {
  const total = backends.reduce((sum, b) => sum + b.total, 0)
  const times = l.protocol !== 'tcp' ? 'response time' : 'connect + first byte'
  const live = l.protocol !== 'tcp' ? 'in flight' : 'live'
  const header = '<tr><th>backend</th><th class="st">status</th><th>weight</th>' +
    `<th>${live}</th><th>share</th><th>total</th><th>failures</th><th>in</th><th>out</th>` +
    `<th title="${times}">p50</th><th title="${times}">p90</th><th title="${times}">p99</th>` +
    '<th title="the last 15 minutes; hover for figures">15 min</th></tr>'
  return `<table>${header}
${backends.map(b => backendRow(b, total, history[b.address] || [], now, perSecond(l))).join('\n')}
</table>`
}

// "127.0.0.1:3000-3009: 2 live (3000, 3001), 8 idle": a port range, whose idle ports
// have no row.
function rangeLine (r) {
  const live = r.listening.length > 0 ? ` (${formatPorts(r.listening)})` : ''
  return `<p class="facts">port range ${esc(r.range)}: ${r.live} live${esc(live)}, ${r.idle} idle</p>`
}

const limitedCount = l => countOf(l.limited)
const countOf = counts => Object.values(counts || {}).reduce((sum, n) => sum + n, 0)
const nonZero = counts => Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0))

// " · not accepting", while the listener has stopped accepting for a while.
function notAccepting (l) {
  if (l.accepting !== false) return ''
  const cap = l.maxConn === null || l.maxConn === undefined ? '' : ` (max-conn ${l.maxConn})`
  return ` · <span class="panic" title="out of file descriptors, or full${cap}">not accepting</span>`
}

function backendRow (b, total, points, now, what) {
  const share = total === 0 ? 0 : Math.round(b.total / total * 100)
  const notes = [b.name, b.backup ? 'backup' : null].filter(Boolean)
  const weight = b.effectiveWeight !== b.weight ? `${b.weight} (now ${round(b.effectiveWeight)})` : String(b.weight)
  const rt = b.responseTime
  const fault = b.fault ? `<span class="why fault">fault: ${esc(describeFault(b.fault, now))}</span>` : ''
  const why = (b.reason ? `<span class="why">${esc(b.reason)}</span>` : '') + fault
  return `<tr><td>${esc(b.address)}${notes.length ? ` <small>(${esc(notes.join(', '))})</small>` : ''}</td>` +
    `<td class="st ${esc(b.status)}"><b>${esc(b.status)}</b>${why}</td>` +
    `<td>${weight}</td><td>${b.live}${b.maxConn !== null ? ` / ${b.maxConn}` : ''}</td>` +
    `<td><span class="bar" style="width:${share}px"></span>${share}%</td><td>${b.total}</td>` +
    `<td>${b.failures}${ejected(b.ejections)}${injected(b.faultsInjected)}</td>` +
    `<td>${bytes(b.bytesIn)}</td><td>${bytes(b.bytesOut)}</td>` +
    `<td>${ms(rt.p50)}</td><td>${ms(rt.p90)}</td><td>${ms(rt.p99)}</td>` +
    `<td>${sparkline(points, now, what)}</td></tr>`
}

const perSecond = l => l.protocol !== 'tcp' ? 'requests/s' : 'connections/s'

// The last 15 minutes as three small inline SVG charts, or nothing before two samples.
const CHART_W = 240
const CHART_H = 48
const WINDOW_MS = 15 * 60 * 1000

function charts (points, now, what) {
  if (points.length < 2) return ''
  return '<div class="charts">' +
    chart(points, now, p => p.rps, what, v => round(v), '') +
    chart(points, now, p => p.eps, 'errors/s', v => round(v), ' err') +
    chart(points, now, p => p.p99, 'p99', ms, '') +
    '</div>'
}

function chart (points, now, value, label, format, kind) {
  const known = points.filter(p => value(p) !== null)
  const max = Math.max(...known.map(value), 1e-9)
  const xy = known.map(p => {
    const x = Math.max(0, CHART_W - (now - p.at) / WINDOW_MS * CHART_W)
    const y = CHART_H - 2 - value(p) / max * (CHART_H - 4)
    return `${x.toFixed(1)},${y.toFixed(1)}`
  })
  const latest = known.length ? format(value(known[known.length - 1])) : '-'
  const title = `${label} over the last 15 minutes: now ${latest}, peak ${format(max)}`
  return `<figure class="chart${kind}"><svg viewBox="0 0 ${CHART_W} ${CHART_H}" width="${CHART_W}" ` +
    `height="${CHART_H}" role="img" aria-label="${esc(title)}"><title>${esc(title)}</title>` +
    `<line x1="0" y1="${CHART_H - 1}" x2="${CHART_W}" y2="${CHART_H - 1}"/>` +
    `<polyline points="${xy.join(' ')}"/></svg>` +
    `<figcaption>${esc(label)} ${esc(latest)} (peak ${esc(format(max))})</figcaption></figure>`
}

// A backend's last 15 minutes in its row: requests/s, and errors/s in red on the same
// scale; the figures, p99 too, in its title (shown on hover). Empty before two samples.
const SPARK_W = 90
const SPARK_H = 18

function sparkline (points, now, what) {
  if (points.length < 2) return ''
  const max = Math.max(...points.map(p => Math.max(p.rps, p.eps)), 1e-9)
  const line = value => points.map(p => {
    const x = Math.max(0, SPARK_W - (now - p.at) / WINDOW_MS * SPARK_W)
    return `${x.toFixed(1)},${(SPARK_H - 1 - value(p) / max * (SPARK_H - 2)).toFixed(1)}`
  }).join(' ')
  const last = points[points.length - 1]
  const title = `${what} now ${round(last.rps)}, peak ${round(Math.max(...points.map(p => p.rps)))} · ` +
    `errors/s now ${round(last.eps)}, peak ${round(Math.max(...points.map(p => p.eps)))} · ` +
    `p99 now ${ms(last.p99)}, peak ${ms(peak(points.map(p => p.p99)))}`
  const errors = points.some(p => p.eps > 0) ? `<polyline class="err" points="${line(p => p.eps)}"/>` : ''
  return `<svg class="spark" viewBox="0 0 ${SPARK_W} ${SPARK_H}" width="${SPARK_W}" height="${SPARK_H}" ` +
    `role="img" aria-label="${esc(title)}"><title>${esc(title)}</title>` +
    `<polyline points="${line(p => p.rps)}"/>${errors}</svg>`
}

const peak = values => {
  const known = values.filter(v => v !== null)
  return known.length === 0 ? null : Math.max(...known)
}

// "7 (503: 5, connect: 2)", or "0".
function byCause (counts = {}) {
  const causes = Object.keys(counts).sort()
  const total = causes.reduce((sum, cause) => sum + counts[cause], 0)
  return causes.length === 0 ? '0' : `${total} (${esc(causes.map(c => `${c}: ${counts[c]}`).join(', '))})`
}

// " · ejected 2× (503)", or nothing.
function ejected (counts = {}) {
  const causes = Object.keys(counts).sort()
  if (causes.length === 0) return ''
  const total = causes.reduce((sum, cause) => sum + counts[cause], 0)
  return ` <small>· ejected ${total}× (${esc(causes.join(', '))})</small>`
}

// " · faults injected 12 (error: 12)", or nothing.
function injected (counts = {}) {
  const total = Object.values(counts).reduce((sum, n) => sum + n, 0)
  return total === 0 ? '' : ` <small>· faults injected ${byCause(counts)}</small>`
}

function esc (text) {
  return String(text)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
}

const round = n => String(Math.round(n * 100) / 100)

function ms (value) {
  if (value === null) return '–'
  return value < 10 ? `${round(value)} ms` : `${Math.round(value)} ms`
}

function bytes (n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024
    i++
  }
  return i === 0 ? `${n} B` : `${n < 10 ? n.toFixed(1) : Math.round(n)} ${units[i]}`
}

function duration (msTotal) {
  const s = Math.max(0, Math.floor(msTotal / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor(s / 60) % 60}m`
  return `${Math.floor(s / 86400)}d ${Math.floor(s / 3600) % 24}h`
}

module.exports = { renderPage }
