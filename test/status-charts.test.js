'use strict'

// The status page's charts: the History (lib/admin/history.js) turns snapshots into
// requests/s, errors/s and p99 per interval; the page draws them as inline SVG; a
// headless Chromium renders the page after real traffic and finds the charts there.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { History } = require('../lib/admin/history')
const { createStatusServer } = require('../lib/admin/status-server')
const { parseBackend } = require('../lib/config/backend-spec')
const histogram = require('../lib/histogram')
const { startLila, httpBackend, deadPort, request, outputOf } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')

// A snapshot of one listener with one backend: `total` requests, `failures`, and
// `fast`/`slow` response-time samples (1 ms, 400 ms).
function snapshotOf ({ total, failures = 0, unserved = 0, fast = 0, slow = 0 }) {
  const counts = histogram.createCounts()
  counts[histogram.bucketOf(1)] = fast
  counts[histogram.bucketOf(400)] = slow
  return {
    listeners: [{
      name: 'web',
      unserved,
      backends: [{ total, failures, responseTime: { counts: histogram.cumulative(counts) } }]
    }]
  }
}

t.test('History: rates and p99 per interval, at most `points` of them', async t => {
  const history = new History({ stats: null, points: 3 })
  history.add(snapshotOf({ total: 0 }), 0)
  t.same(history.series(), {}, 'one sample: nothing to draw yet')
  history.add(snapshotOf({ total: 100, failures: 5, unserved: 5, fast: 100 }), 10000)
  history.add(snapshotOf({ total: 300, failures: 5, unserved: 5, fast: 100, slow: 200 }), 20000)
  const [first, second] = history.series().web.points
  t.match(first, { at: 10000, rps: 10, eps: 1 })
  t.ok(first.p99 <= 1, `fast interval: p99 ${first.p99} ms`)
  t.match(second, { rps: 20, eps: 0 })
  t.ok(second.p99 > 250, `slow interval: p99 ${second.p99} ms, from this interval's samples only`)
  for (let i = 3; i < 10; i++) history.add(snapshotOf({ total: 300 + i }), i * 10000)
  t.equal(history.series().web.points.length, 3, 'the ring keeps the last `points`')
})

t.test('History: each backend has its own points, and is forgotten when it goes', async t => {
  const history = new History({ stats: null })
  const backend = (address, total, failures, fast, slow) => {
    const counts = histogram.createCounts()
    counts[histogram.bucketOf(1)] = fast
    counts[histogram.bucketOf(400)] = slow
    return { address, total, failures, responseTime: { counts: histogram.cumulative(counts) } }
  }
  const snapshot = backends => ({ listeners: [{ name: 'web', unserved: 0, backends }] })
  history.add(snapshot([backend('a:1', 0, 0, 0, 0), backend('b:1', 0, 0, 0, 0)]), 0)
  history.add(snapshot([backend('a:1', 100, 0, 100, 0), backend('b:1', 50, 10, 0, 50)]), 10000)
  const { web } = history.series()
  t.match(web.points, [{ rps: 15, eps: 1 }], 'the listener: both backends added up')
  t.match(web.backends['a:1'], [{ rps: 10, eps: 0 }])
  t.ok(web.backends['a:1'][0].p99 <= 1, 'a:1 answered fast')
  t.match(web.backends['b:1'], [{ rps: 5, eps: 1 }])
  t.ok(web.backends['b:1'][0].p99 > 250, 'b:1 answered slowly: its own p99, not the listener\'s')

  history.add(snapshot([backend('a:1', 200, 0, 200, 0)]), 20000)
  t.same(Object.keys(history.series().web.backends), ['a:1'], 'b:1 left the configuration: its ring is gone')
  t.notOk(history.last.has('web\nb:1'), 'and so are its last counters')
})

t.test('History, http: a backend answering 500 is an error in the charts, though no failure', async t => {
  const history = new History({ stats: null })
  const snapshot = (total, ok, served, refused, unserved) => ({
    listeners: [{
      name: 'web',
      unserved,
      responses: { '2xx': ok, '5xx': served + refused },
      backends: [{ address: 'a:1', total, failures: 0, responses: { '2xx': ok, '5xx': served }, responseTime: { counts: histogram.cumulative(histogram.createCounts()) } }]
    }]
  })
  history.add(snapshot(0, 0, 0, 0, 0), 0)
  // 100 requests: 70 answered 200, 30 answered 500 by the backend; 10 more answered
  // 503 by lila (no backend could take them: unserved, among the listener's 5xx).
  history.add(snapshot(100, 70, 30, 10, 10), 10000)
  t.match(history.series().web.points, [{ rps: 10, eps: 4 }], 'the listener: the 5xx its clients got, lila\'s own among them')
  t.match(history.series().web.backends['a:1'], [{ rps: 10, eps: 3 }], 'the backend: its 500s')
})

t.test('headless Chromium renders the charts with data after traffic', async t => {
  const chromium = tool('chromium')
  if (chromium.skip) return t.skip(chromium.skip)
  const good = await httpBackend(t, 'good')
  const dead = await deadPort()
  const { lb, port: lilaPort } = await startLila(t, ['rr', good.address, `127.0.0.1:${dead}`, '--protocol', 'http'])
  const status = createStatusServer({ stats: lb.stats, parseBackend, port: 0, historyEvery: 100 })
  await status.listen()
  t.teardown(() => status.close())
  const port = status.server.address().port

  // Traffic until the history has a few points with requests and errors in them.
  const name = lb.stats().listeners[0].name
  const seen = () => (status.history.series()[name] || { points: [] }).points
  const ready = () => seen().filter(p => p.rps > 0).length >= 3 && seen().some(p => p.eps > 0)
  const deadline = Date.now() + 10000
  for (let i = 0; i < 10000 && !ready() && Date.now() < deadline; i++) await request(lilaPort)
  t.ok(ready(), 'three intervals with traffic, one with errors')

  const dir = tmpDir(t, 'lila-chromium-')
  const args = ['--headless', '--no-sandbox', '--disable-gpu', `--user-data-dir=${dir}`, '--window-size=1400,700']
  const url = `http://127.0.0.1:${port}/status`
  const dom = await outputOf(chromium.path, [...args, '--dump-dom', url])
  const charts = [...dom.matchAll(/<figure class="chart[^"]*"><svg[^>]*aria-label="([^"]*)"[\s\S]*?<polyline points="([^"]*)"/g)]
  t.equal(charts.length, 3, 'three charts: requests/s, errors/s, p99')
  if (charts.length !== 3) return
  for (const [, label, points] of charts) {
    t.ok(points.trim().split(' ').length >= 2, `${label}: a line of at least two points`)
  }
  t.match(charts[0][1], /^requests\/s over the last 15 minutes: now [\d.]+, peak [\d.]+$/)
  t.notMatch(charts[1][1], /peak 0$/, 'the errors chart has errors in it')
  const sparks = [...dom.matchAll(/<svg class="spark"[^>]*aria-label="([^"]*)"[\s\S]*?<polyline points="([^"]*)"/g)]
  t.equal(sparks.length, 2, 'each backend\'s row has its own line of the last 15 minutes')
  t.match(sparks[0]?.[1], /^requests\/s now [\d.]+, peak [1-9][\d.]*.* · p99 now /, 'the good backend served requests')
  t.ok(sparks[0]?.[2].trim().split(' ').length >= 2, 'drawn with at least two points')
  const screenshot = path.join(os.tmpdir(), 'lila-status-charts.png')
  await outputOf(chromium.path, [...args, `--screenshot=${screenshot}`, url])
  t.ok(fs.statSync(screenshot).size > 10000, `a screenshot, to look at: ${screenshot}`)
})
