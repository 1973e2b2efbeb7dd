'use strict'

// The pure renderers of the status listener: the response-time histogram, the
// Prometheus text (checked by promtool itself), the HTML page. Snapshots are built by
// hand, so every field and every awkward value is under the test's control.

const t = require('tap')
const histogram = require('../lib/histogram')
const { makeBackend } = require('./fixtures/helpers')
const { renderMetrics, escapeLabel } = require('../lib/admin/metrics')
const { renderPage } = require('../lib/admin/status-page')
const { linesOf, backendRow } = require('./fixtures/page')
const { promtoolAccepts } = require('./fixtures/promtool')

t.test('histogram: buckets, quantiles, the cumulative form and back', async t => {
  t.equal(histogram.bucketOf(0), 0)
  t.equal(histogram.bucketOf(0.25), 0, 'a sample equal to a bound falls in its bucket')
  t.equal(histogram.bucketOf(0.26), 1)
  t.equal(histogram.bucketOf(10000), histogram.BOUNDS_MS.length - 1)
  t.equal(histogram.bucketOf(10001), histogram.BOUNDS_MS.length, 'above the last bound: the overflow bucket')

  const counts = histogram.createCounts()
  t.equal(histogram.quantile(counts, 0.5), null, 'no samples: no estimate')
  for (let i = 0; i < 100; i++) counts[histogram.bucketOf(i < 90 ? 0.8 : 40)]++ // 90 in (0.5, 1], 10 in (25, 50]
  t.equal(histogram.quantile(counts, 0.5), 0.778, 'interpolated inside its bucket (0.5 + 0.5 × 50/90), to the µs')
  t.equal(histogram.quantile(counts, 0.9), 1)
  t.equal(histogram.quantile(counts, 0.99), 25 + 25 * 9 / 10)
  const over = histogram.createCounts()
  over[histogram.bucketOf(60000)] = 3
  t.equal(histogram.quantile(over, 0.5), 10000, 'past the last bound: reported at it ("at least")')

  const cumulative = histogram.cumulative(counts)
  t.equal(cumulative.length, histogram.BOUNDS_MS.length + 1)
  t.equal(cumulative[cumulative.length - 1], 100)
  t.same([...histogram.fromCumulative(cumulative)], [...counts])
})

t.test('a backend records each latency sample in its histogram', async t => {
  const backend = makeBackend({ host: '10.0.0.1' })
  for (const ms of [0.1, 0.4, 3, 3, 700]) backend.observeLatency(ms)
  const { responseTime } = backend.snapshot()
  t.equal(responseTime.count, 5)
  t.equal(responseTime.sum, 706.5)
  t.same(responseTime.bounds, histogram.BOUNDS_MS)
  t.same(responseTime.counts, [1, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5])
  t.equal(responseTime.p50, 2.5 + 2.5 * 0.5 / 2)
})

// A snapshot as index.js stats() makes it, with the values a test wants.
function backendSnapshot (address, extra = {}) {
  const backend = makeBackend({ host: '10.0.0.1' })
  return { ...backend.snapshot(), address, ...extra }
}

function snapshotOf (listeners) {
  return {
    startedAt: 1700000000000,
    listeners: listeners.map(([name, backends, extra = {}]) => ({
      name, protocol: 'http', mode: 'round-robin', active: 2, waiting: 0, accepted: 40, unserved: 1, panic: false, queued: 3, queueTimeouts: 4, backends, ...extra
    }))
  }
}

t.test('metrics: names, types, labels, histogram; promtool accepts them', async t => {
  const measured = makeBackend({ host: '10.0.0.2' })
  measured.total = 12
  measured.failures = 2
  measured.bytesIn = 1000
  measured.bytesOut = 5000
  measured.live = 1
  measured.observeLatency(0.4)
  measured.observeLatency(30)
  const odd = 'we"ird\\name\nwith newline'
  const text = renderMetrics(snapshotOf([
    ['127.0.0.1:4444', [measured.snapshot(), backendSnapshot('[::1]:81', { maxConn: 10, status: 'disabled', admin: 'disabled' })]],
    [odd, [backendSnapshot('10.0.0.3:80', { state: 'down', status: 'down' })], { panic: true }]
  ]), { version: '1.2.3' })

  promtoolAccepts(t, text)

  const line = (name, labels) => {
    const match = new RegExp(`^${name}\\{${labels.replace(/[[\]\\^$.|?*+(){}]/g, '\\$&')}\\} (\\S+)$`, 'm').exec(text)
    return match === null ? undefined : Number(match[1])
  }
  const a = 'listener="127.0.0.1:4444",backend="10.0.0.2:80"'
  t.equal(line('lila_build_info', 'version="1.2.3"'), 1)
  t.match(text, /^lila_start_time_seconds 1700000000$/m)
  t.equal(line('lila_listener_accepted_connections_total', 'listener="127.0.0.1:4444"'), 40)
  t.equal(line('lila_listener_queue_length', 'listener="127.0.0.1:4444"'), 3)
  t.equal(line('lila_listener_panic', `listener="${escapeLabel(odd)}"`), 1)
  t.equal(line('lila_backend_requests_total', a), 12)
  t.equal(line('lila_backend_failures_total', a), 2)
  t.equal(line('lila_backend_in_bytes_total', a), 1000)
  t.equal(line('lila_backend_out_bytes_total', a), 5000)
  t.equal(line('lila_backend_live', a), 1)
  t.equal(line('lila_backend_status', `${a},status="up"`), 1)
  t.equal(line('lila_backend_status', `${a},status="draining"`), 0)
  t.equal(line('lila_backend_status', 'listener="127.0.0.1:4444",backend="[::1]:81",status="disabled"'), 1)
  t.equal(line('lila_backend_max_conn', 'listener="127.0.0.1:4444",backend="[::1]:81"'), 10)
  t.equal(line('lila_backend_max_conn', a), undefined, 'no max-conn: no sample')
  t.equal(line('lila_backend_response_time_seconds_bucket', `${a},le="0.0005"`), 1)
  t.equal(line('lila_backend_response_time_seconds_bucket', `${a},le="0.025"`), 1)
  t.equal(line('lila_backend_response_time_seconds_bucket', `${a},le="0.05"`), 2)
  t.equal(line('lila_backend_response_time_seconds_bucket', `${a},le="+Inf"`), 2)
  t.equal(line('lila_backend_response_time_seconds_sum', a), 0.0304)
  t.equal(line('lila_backend_response_time_seconds_count', a), 2)
  t.match(text, /^lila_listener_panic\{listener="we\\"ird\\\\name\\nwith newline"\} 1$/m, 'label values escaped')
  for (const name of text.match(/^# TYPE (\S+) counter$/gm).map(l => l.split(' ')[2])) t.match(name, /_total$/, `${name}: a counter ends in _total`)
  t.equal(text.match(/^# HELP /gm).length, text.match(/^# TYPE /gm).length, 'every family has HELP and TYPE')
})

t.test('the page: what is wrong first, each backend, everything escaped', async t => {
  const html = renderPage(snapshotOf([
    ['127.0.0.1:4444', [
      backendSnapshot('10.0.0.1:80', { total: 30, live: 2, maxConn: 5, bytesOut: 3 * 1024 * 1024 }),
      backendSnapshot('10.0.0.2:80', { total: 10, state: 'down', status: 'down', reason: 'http /health 500 <b>bad</b>' })
    ], { panic: true }]
  ]), { version: '9.9.9', now: 1700000065000 })
  t.match(html, /^<!doctype html>/)
  t.match(html, /<meta http-equiv="refresh" content="\d+">/, 'it reloads itself')
  t.notMatch(html, /<script|<link|src=/, 'self-contained')
  t.notMatch(html, /<b>bad<\/b>/, 'a reason is text, never markup')

  const lines = linesOf(html)
  t.equal(lines[0], 'lila: 1 listener, 1 of 2 backends up', 'the title says how many are up')
  t.ok(lines.some(l => /^lila 9\.9\.9$/.test(l)), 'the version')
  t.ok(lines.some(l => / up 1m 5s · /.test(l)), 'the uptime')
  // What is wrong comes before the listener's table, in words.
  const section = lines.indexOf('127.0.0.1:4444 http · round-robin')
  t.ok(section > 0, 'a heading names the listener, its protocol and mode')
  t.same(lines.slice(0, section).filter(l => /panic|down/.test(l)), [
    '127.0.0.1:4444: panic, every backend is down; traffic goes to them anyway',
    '127.0.0.1:4444 → 10.0.0.2:80: down (http /health 500 <b>bad</b>)'
  ], 'the problems first: the panic, and the down backend with its reason')
  t.match(lines[section + 1], /\bPANIC\b/, 'the listener says it is in panic')

  // Each backend's facts, together in its row.
  const facts = ['status', 'weight', 'in flight', 'share', 'total', 'failures', 'in', 'out']
  t.same(pick(backendRow(html, '10.0.0.1:80'), facts), {
    status: 'up', weight: '1', 'in flight': '2 / 5', share: '75%', total: '30', failures: '0', in: '0 B', out: '3.0 MiB'
  }, 'the up backend: in flight of its max-conn, its share of the requests, bytes')
  t.same(pick(backendRow(html, '10.0.0.2:80'), facts), {
    status: 'down http /health 500 <b>bad</b>', weight: '1', 'in flight': '0', share: '25%', total: '10', failures: '0', in: '0 B', out: '0 B'
  }, 'the down backend reads as down, with its reason')

  const allUp = linesOf(renderPage(snapshotOf([['a', [backendSnapshot('10.0.0.1:80')]]])))
  t.ok(allUp.includes('Every backend is up.'), 'nothing wrong: it says so')
  t.notOk(allUp.some(l => /panic|down/i.test(l)), 'and lists no problem')
})

// The named cells of a row (null when there is no such row).
function pick (row, keys) {
  return row === null ? null : Object.fromEntries(keys.map(key => [key, row[key]]))
}

t.test('the page: --sticky\'s counts in the listener\'s facts', async t => {
  const html = renderPage(snapshotOf([
    ['127.0.0.1:4444', [backendSnapshot('10.0.0.1:80')], { sticky: 'cookie=SID', stickyResponses: { honoured: 9, reassigned: 1, new: 2 } }]
  ]), { now: 1700000065000 })
  t.match(html, 'sticky cookie=SID: 12 (honoured: 9, new: 2, reassigned: 1)')
})
