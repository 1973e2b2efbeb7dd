'use strict'

// Port ranges (a backend host:3000-3009): the ports that listen are the backends. The
// parser and PortRange alone, then the real `lila` with dev servers started and stopped
// on fixed ports of a range after it started: they join (after --rise) and take
// traffic, leave (after --fall) and take none; /status.json, /metrics, the start-up
// table and the log say how many ports are live and idle; ranges from a config file,
// kept across a reload, and added and removed through the admin API.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const http = require('http')
const { parseBackend } = require('../lib/config/backend-spec')
const { specAddress } = require('../lib/address')
const { formatPorts } = require('../lib/format')
const { PortRange, IDLE_PER_SCAN } = require('../lib/upstream/port-range')
const { spawnLila, runLila, restartablePorts, closeServer } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')

// A dev server on a fixed port, answering with its port: { port, requests, stop() }.
async function devServer (t, port) {
  const dev = { port, requests: 0 }
  const server = http.createServer((req, res) => {
    dev.requests++
    res.end(`${port}\n`)
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port }, resolve)
  })
  dev.stop = () => {
    server.closeAllConnections()
    return closeServer(server)
  }
  t.teardown(() => server.listening ? dev.stop() : null)
  return dev
}

function get (port, urlPath = '/') {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: urlPath, agent: false }, res => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', chunk => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    }).on('error', reject)
  })
}

// Who answered `n` requests through lila: the sorted distinct bodies.
async function servedBy (port, n) {
  const seen = new Set()
  for (let i = 0; i < n; i++) seen.add((await get(port)).body.trim())
  return [...seen].sort()
}

async function statusJson (lila) {
  return JSON.parse((await get(lila.statusPort, '/status.json')).body)
}

const escape = text => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

t.test('parseBackend: a port range, its settings, and what is refused', async t => {
  const spec = parseBackend(':3000-3009,weight=2')
  t.same(spec.range, { first: 3000, last: 3009 })
  t.equal(spec.host, '127.0.0.1')
  t.equal(spec.port, null)
  t.equal(spec.weight, 2)
  t.equal(specAddress(spec), '127.0.0.1:3000-3009', 'matched by reloads and the API as written')
  t.equal(specAddress(parseBackend('[::1]:8000-8001')), '[::1]:8000-8001')
  t.equal(specAddress(parseBackend('localhost:1-1024')), 'localhost:1-1024', '1024 ports is the cap, allowed')
  const refused = {
    ':3009-3000': 'expected a port range from low to high, e.g. 3000-3009',
    ':1-1025': 'expected a port range of at most 1024 ports (1-1025 has 1025)',
    ':3000-': 'expected a port range FIRST-LAST of ports from 1 to 65535 after the ":", e.g. :3000-3009',
    ':0-10': 'expected a port range FIRST-LAST',
    ':3000-70000': 'expected a port range FIRST-LAST',
    ':1-2-3': 'expected a port range FIRST-LAST'
  }
  for (const [text, message] of Object.entries(refused)) {
    t.throws(() => parseBackend(text), { code: 'LILA_USAGE', message: new RegExp(`^invalid backend "${escape(text)}": ${escape(message)}`) }, text)
  }
  t.equal(formatPorts([3000, 3001, 3002, 3005, 3007, 3008]), '3000-3002, 3005, 3007-3008')
})

t.test('PortRange: what listens at once, then rise and fall in a row; idle ports in turns', async t => {
  const ports = await restartablePorts(3)
  const range = new PortRange('127.0.0.1', { first: ports[0], last: ports[2] })
  const options = { rise: 2, fall: 2, timeout: 2000 }
  const a = await devServer(t, ports[0])
  t.same(await range.scan(options), [ports[0]], 'the first scan takes what listens, without waiting for rise')
  t.equal(range.live, 1)
  t.equal(range.idle, 2)
  await devServer(t, ports[2])
  t.same(await range.scan(options), [ports[0]], 'one accepted connect is not enough with --rise 2')
  t.same(await range.scan(options), [ports[0], ports[2]], 'the second one is')
  await a.stop()
  t.same(await range.scan(options), [ports[0], ports[2]], 'one refused connect is not enough with --fall 2')
  t.same(await range.scan(options), [ports[2]], 'the second one is')
  t.same(range.ports(false), [ports[0], ports[1]], 'the idle ones')

  // A big range probes at most IDLE_PER_SCAN idle ports a scan, in turns, so a port that
  // starts listening is seen within size / IDLE_PER_SCAN scans.
  const wide = await restartablePorts(IDLE_PER_SCAN * 2 + 10)
  const big = new PortRange('127.0.0.1', { first: wide[0], last: wide[wide.length - 1] })
  t.same(await big.scan({ ...options, rise: 1 }), [])
  await devServer(t, wide[wide.length - 1])
  let scans = 0
  while (big.live === 0 && scans < 10) {
    await big.scan({ ...options, rise: 1 })
    scans++
  }
  t.same(big.ports(), [wide[wide.length - 1]])
  t.ok(scans >= 2 && scans <= 3, `found in ${scans} scans of at most ${IDLE_PER_SCAN} idle ports (a third of them each)`)
})

t.test('lila rr :A-D: a dev server started later joins and takes traffic, one stopped leaves', async t => {
  const ports = await restartablePorts(4)
  const range = `127.0.0.1:${ports[0]}-${ports[3]}`
  await devServer(t, ports[0])
  const lila = await spawnLila(t, [
    'rr', `:${ports[0]}-${ports[3]}`, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--check-interval', '100ms', '--rise', '2', '--fall', '2', '--status-port', '0'
  ])
  // The start-up table: a row for the range, one for the port that listens; none for
  // the idle ones.
  t.ok(lila.lines.some(l => new RegExp(`^lila: ${escape(range)}\\s+1 live\\s+3 idle \\(${ports[1]}-${ports[3]}\\): a port joins when it listens$`).test(l)), 'the range row')
  t.ok(lila.lines.some(l => new RegExp(`^lila: 127\\.0\\.0\\.1:${ports[0]}\\s+up\\s+tcp connect ok$`).test(l)), 'the live port is a backend')
  t.match(lila.listening, /\(http, round-robin, 1 backend\)$/)
  t.same(await servedBy(lila.port, 4), [String(ports[0])])

  let json = await statusJson(lila)
  t.same(json.listeners[0].ranges, [{ range, ports: 4, live: 1, idle: 3, listening: [ports[0]] }])
  t.same(json.listeners[0].backends.map(b => b.address), [`127.0.0.1:${ports[0]}`], 'idle ports are not backends')

  // rise: a dev server started on the next port joins, is checked, then takes traffic.
  const b = await devServer(t, ports[2])
  await lila.waitForLine(new RegExp(`^lila: range ${escape(range)}: ${ports[2]} listens, joining \\(2 live, 2 idle\\)$`))
  await lila.waitForLine(new RegExp(`^lila: backend 127\\.0\\.0\\.1:${ports[2]} up: tcp connect ok$`))
  t.same(await servedBy(lila.port, 6), [String(ports[0]), String(ports[2])])
  t.ok(b.requests > 0, 'the new dev server was sent requests')

  json = await statusJson(lila)
  t.same(json.listeners[0].ranges, [{ range, ports: 4, live: 2, idle: 2, listening: [ports[0], ports[2]] }])
  const metrics = (await get(lila.statusPort, '/metrics')).body
  t.match(metrics, `lila_range_ports{listener="127.0.0.1:${lila.port}",range="${range}",state="live"} 2\n`)
  t.match(metrics, `lila_range_ports{listener="127.0.0.1:${lila.port}",range="${range}",state="idle"} 2\n`)
  const page = (await get(lila.statusPort, '/status')).body
  t.match(page, `port range ${range}: 2 live (${ports[0]}, ${ports[2]}), 2 idle`)

  // fall: stopped, it leaves and is sent nothing more.
  await b.stop()
  await lila.waitForLine(new RegExp(`^lila: range ${escape(range)}: ${ports[2]} stopped listening, leaving \\(1 live, 3 idle\\)$`))
  const before = b.requests
  t.same(await servedBy(lila.port, 6), [String(ports[0])])
  t.equal(b.requests, before)
  json = await statusJson(lila)
  t.same(json.listeners[0].ranges[0].live, 1)
  t.same(json.listeners[0].backends.map(b => b.address), [`127.0.0.1:${ports[0]}`], 'gone from the backends')

  // The idle ports were never said to be down, nor named in the log but in the table.
  for (const port of [ports[1], ports[3]]) {
    t.notOk(lila.lines.some(l => l.includes(`:${port}`) && !l.includes(range)), `no line about idle port ${port}`)
  }
  t.notOk(lila.lines.some(l => /panic/.test(l)), 'no panic over idle ports')
  t.equal((await lila.stop()).code, 0)
})

t.test('a range nothing listens on yet: no backend, no panic, the page says so', async t => {
  const ports = await restartablePorts(3)
  const lila = await spawnLila(t, [
    `:${ports[0]}-${ports[2]}`, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--check-interval', '100ms', '--rise', '1', '--status-port', '0'
  ])
  t.ok(lila.lines.some(l => l.includes(`0 live  3 idle (${ports[0]}-${ports[2]}): a port joins when it listens`)))
  t.equal((await get(lila.port)).status, 503, 'nothing to send it to')
  t.match((await get(lila.statusPort, '/status')).body, 'no port listens (3 idle)')
  await devServer(t, ports[1])
  await lila.waitForLine(new RegExp(`^lila: backend 127\\.0\\.0\\.1:${ports[1]} up`))
  t.same(await servedBy(lila.port, 2), [String(ports[1])])
  t.same(lila.lines.filter(l => /panic|down/.test(l)), [], 'no panic, no port said down')
})

t.test('usage errors: a reversed, malformed or too big range is one line, exit 2', async t => {
  for (const [range, expected] of [
    [':3009-3000', 'expected a port range from low to high, e.g. 3000-3009'],
    [':3000-4100', 'expected a port range of at most 1024 ports (3000-4100 has 1101)'],
    [':3000-x', 'expected a port range FIRST-LAST of ports from 1 to 65535 after the ":", e.g. :3000-3009']
  ]) {
    const run = await runLila(['rr', range])
    t.equal(run.code, 2, range)
    t.equal(run.stderr, `lila: invalid backend "${range}": ${expected}\nTry 'lila --help'.\n`)
  }
  const dir = tmpDir(t, 'lila-range-')
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({ listeners: [{ port: 0, backends: [':1-2000'] }] }))
  const run = await runLila(['--config', file])
  t.equal(run.code, 2)
  t.match(run.stderr, /^lila: [^\n]*listeners\[0\]\.backends\[0\][^\n]*expected a port range of at most 1024 ports \(1-2000 has 2000\)\n/)
})

t.test('a range in the config file: a reload keeps its members; changed, the ports in both keep theirs', async t => {
  const ports = await restartablePorts(6)
  const dir = tmpDir(t, 'lila-range-')
  const file = path.join(dir, 'lila.json')
  const write = (backends, weight = 1) => fs.writeFileSync(file, JSON.stringify({
    'check-interval': '100ms',
    rise: 1,
    'status-port': 0,
    listeners: [{ host: '127.0.0.1', port: 0, protocol: 'http', mode: 'rr', backends: backends.map(b => `${b},weight=${weight}`) }]
  }))
  await devServer(t, ports[1])
  write([`:${ports[0]}-${ports[2]}`])
  const lila = await spawnLila(t, ['--config', file])
  lila.statusPort = Number((await lila.waitForLine(/status on http:\/\/127\.0\.0\.1:(\d+)\/status$/))[1])
  t.same(await servedBy(lila.port, 3), [String(ports[1])])
  const member = `127.0.0.1:${ports[1]}`
  const total = async () => (await statusJson(lila)).listeners[0].backends.find(b => b.address === member).total
  t.equal(await total(), 3)

  // The same range, another weight: its member stays (its counters too).
  write([`:${ports[0]}-${ports[2]}`], 3)
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/^lila: reloaded \(1 change\)$/)
  let json = await statusJson(lila)
  t.same(json.listeners[0].backends.map(b => [b.address, b.weight, b.total, b.state]), [[member, 3, 3, 'up']])

  // A wider range: the port in both keeps its backend; nothing of it is said down.
  write([`:${ports[0]}-${ports[5]}`], 3)
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/^lila: reloaded \(2 changes\)$/)
  json = await statusJson(lila)
  t.same(json.listeners[0].backends.map(b => [b.address, b.total, b.state, b.draining]), [[member, 3, 'up', false]])
  t.same(json.listeners[0].ranges.map(r => [r.range, r.live, r.idle]), [[`127.0.0.1:${ports[0]}-${ports[5]}`, 1, 5]])
  t.same(await servedBy(lila.port, 2), [String(ports[1])])
  t.equal(await total(), 5)
  await devServer(t, ports[4])
  await lila.waitForLine(new RegExp(`^lila: backend 127\\.0\\.0\\.1:${ports[4]} up`))
  t.notOk(lila.lines.some(l => new RegExp(`${ports[1]} (down|removed)|drain`).test(l)), 'the kept member never left')
})

t.test('the admin API adds a range as one entry and removes it as one', async t => {
  const ports = await restartablePorts(4)
  const [other] = await restartablePorts(1)
  await devServer(t, other)
  await devServer(t, ports[0])
  await devServer(t, ports[1])
  const lila = await spawnLila(t, [
    'rr', `:${other}`, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--check-interval', '100ms', '--status-port', '0'
  ])
  const range = `127.0.0.1:${ports[0]}-${ports[3]}`
  const post = await new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: lila.statusPort, method: 'POST', path: `/backends?address=:${ports[0]}-${ports[3]},weight=2` }, res => {
      let body = ''
      res.on('data', chunk => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
  t.equal(post.status, 200, post.body)
  t.match(post.body, `added 127.0.0.1:${ports[0]} up`)
  t.match(post.body, `127.0.0.1:${ports[1]} up`)
  let json = await statusJson(lila)
  t.same(json.listeners[0].backends.map(b => [b.address, b.weight]).sort(),
    [[`127.0.0.1:${other}`, 1], [`127.0.0.1:${ports[0]}`, 2], [`127.0.0.1:${ports[1]}`, 2]].sort())
  t.same(json.listeners[0].ranges.map(r => [r.range, r.live, r.idle]), [[range, 2, 2]])
  t.same(await servedBy(lila.port, 6), [String(ports[0]), String(ports[1]), String(other)].sort())

  const del = await new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: lila.statusPort, method: 'DELETE', path: `/backends/${encodeURIComponent(range)}` }, res => {
      let body = ''
      res.on('data', chunk => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
  t.equal(del.status, 200, del.body)
  t.match(del.body, `removed ${range} (127.0.0.1:${ports[0]}, 127.0.0.1:${ports[1]})`)
  json = await statusJson(lila)
  t.same(json.listeners[0].backends.map(b => b.address), [`127.0.0.1:${other}`])
  t.same(json.listeners[0].ranges, [])
  t.same(await servedBy(lila.port, 3), [String(other)])
})

t.test('the renderings: metrics, the page, the dashboard; summed over workers', async t => {
  const { renderMetrics } = require('../lib/admin/metrics')
  const { renderPage } = require('../lib/admin/status-page')
  const { render } = require('../lib/admin/dashboard')
  const { createView } = require('../lib/admin/dashboard-keys')
  const { sumStats } = require('../lib/admin/sum-stats')
  const range = (live, listening) => ({ range: '127.0.0.1:3000-3009', ports: 10, live, idle: 10 - live, listening })
  const listener = ranges => ({
    name: 'web', protocol: 'http', mode: 'round-robin', active: 0, waiting: 0, accepted: 0, unserved: 0, panic: false, queued: 0, queueTimeouts: 0, backends: [], ranges
  })
  const snapshot = { startedAt: 1700000000000, listeners: [listener([range(2, [3000, 3001])])] }
  const metrics = renderMetrics(snapshot)
  t.match(metrics, '# TYPE lila_range_ports gauge\n')
  t.match(metrics, 'lila_range_ports{listener="web",range="127.0.0.1:3000-3009",state="live"} 2\n')
  t.match(metrics, 'lila_range_ports{listener="web",range="127.0.0.1:3000-3009",state="idle"} 8\n')
  t.match(renderPage(snapshot), 'port range 127.0.0.1:3000-3009: 2 live (3000-3001), 8 idle')
  const empty = { startedAt: 1700000000000, listeners: [listener([range(0, [])])] }
  t.match(renderPage(empty), '<li>web → 127.0.0.1:3000-3009: no port listens (10 idle)</li>', 'nothing listening is said first')
  const lines = render(snapshot, createView(), { width: 120, height: 10, colour: false })
  t.ok(lines.some(l => l.includes('127.0.0.1:3000-3009: 2 live, 8 idle')), 'the dashboard says it on the listener line')
  // Workers probe the same ports: their counts are one worker's, never added up.
  t.same(sumStats([snapshot, snapshot]).listeners[0].ranges, [range(2, [3000, 3001])])
})
