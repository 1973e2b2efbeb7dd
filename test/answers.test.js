'use strict'

// Passive health that reads the answers (issue 11), through the lila executable on
// real sockets: a backend that answers 503 to everything leaves and comes back through
// the trial; requests that every backend chokes on blame the request, not the backends;
// the retry budget caps retries when everything fails; what happened is counted in
// /status.json and /metrics.

const t = require('tap')
const http = require('http')
const { httpBackend, spawnLila, statusJson, settled, request, runLila, curl, until } = require('./fixtures/helpers')

const FIRST_COOL_OFF_MS = 5000

// A GET (or any request) from a chosen local address: 127.0.0.1 and 127.0.0.2 are two
// clients as lila sees them.
function from (localAddress, port, { method = 'GET', path = '/', body = null } = {}) {
  return new Promise(resolve => {
    const headers = body === null ? {} : { 'Content-Length': Buffer.byteLength(body) }
    const req = http.request({ host: '127.0.0.1', port, method, path, localAddress, agent: false, headers }, res => {
      let text = ''
      res.on('data', c => { text += c })
      res.on('end', () => resolve({ status: res.statusCode, body: text }))
    })
    req.on('error', error => resolve({ error }))
    req.end(body)
  })
}

async function sequential (n, send) {
  const out = []
  for (let i = 0; i < n; i++) out.push(await send(i))
  return out
}

// { 200: 98, 502: 2 }: how many of each status (or error code).
function statuses (results) {
  const counts = {}
  for (const r of results) {
    const key = r.status || r.error.code
    counts[key] = (counts[key] || 0) + 1
  }
  return counts
}
const backendOf = (snapshot, address) => snapshot.listeners[0].backends.find(b => b.address === address)

t.test('a backend answering 503 to everything gets a handful of requests, leaves, and comes back through the trial', async t => {
  const good = await httpBackend(t, 'good')
  let failing = true
  const sick = await httpBackend(t, 'sick', (req, res) => {
    res.statusCode = failing ? 503 : 200
    res.end(failing ? 'unavailable\n' : 'sick is well\n')
  })
  const lila = await spawnLila(t, ['rr', good.address, sick.address, '--protocol', 'http', '--check', 'none',
    '--host', '127.0.0.1', '--port', '0', '--status-port', '0'])

  // curl, 20 requests on one keep-alive connection; then 80 more from Node's client.
  const url = `http://127.0.0.1:${lila.port}/`
  const viaCurl = await curl(['-w', '%{http_code}\\n', ...Array(20).fill(['-o', '/dev/null', url]).flat()])
  t.same(viaCurl.stdout.trim().split('\n'), Array(20).fill('200'), 'curl got 20 times 200')
  const results = await sequential(80, () => request(lila.port))
  t.same(statuses(results), { 200: 80 }, 'every client got a 200: the 503s were retried on the good backend')
  t.equal(sick.requests, 5, 'the sick backend got --eject-after (5) requests, then no more')
  await lila.waitForLine(/backend 127\.0\.0\.1:\d+ down: 5 answers of 503 in a row; next try in 5s/)

  let snapshot = await statusJson(lila)
  const listener = snapshot.listeners[0]
  t.match(backendOf(snapshot, sick.address), {
    status: 'down',
    reason: 'ejected: 5 answers of 503 in a row; next try in 5s',
    failures: 5,
    ejections: { 503: 1 }
  }, '/status.json says why, and counts the ejection by cause')
  t.same(listener.retries, { 503: 5 }, 'five retries, on answers of 503')
  t.equal(listener.failedEverywhere, 0)

  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, `lila_backend_ejections_total{listener="${listener.name}",backend="${sick.address}",cause="503"} 1`)
  t.match(metrics, `lila_listener_retries_total{listener="${listener.name}",cause="503"} 5`)
  t.match(metrics, `lila_listener_retry_budget_exhausted_total{listener="${listener.name}"} 0`)
  const page = (await request(lila.statusPort, { path: '/status' })).body.toString()
  t.match(page, 'retries 5 (503: 5)', 'the status page shows the retries by cause')
  t.match(page, 'ejected 1× (503)', 'and the ejection')

  // It answers 200 again: after the cool-off, one request is its trial, and passes.
  failing = false
  const before = sick.requests
  const meanwhile = []
  await until(async () => {
    meanwhile.push(await request(lila.port))
    return sick.requests !== before
  }, 'the trial request', { timeout: FIRST_COOL_OFF_MS + 5000, every: 20 }).catch(() => {}) // asserted below
  t.same(Object.keys(statuses(meanwhile)), ['200'], 'all served meanwhile')
  t.equal(sick.requests, before + 1, 'one trial request after the cool-off')
  await lila.waitForLine(/backend 127\.0\.0\.1:\d+ up: a connection succeeded/)
  const shares = await sequential(20, () => request(lila.port))
  t.ok(shares.some(r => r.body.toString() === 'sick is well\n'), 'back in the rotation')
  snapshot = await settled(lila)
  t.equal(backendOf(snapshot, sick.address).status, 'up')
})

t.test('requests every backend drops: the request is blamed, every backend stays up, the backup idles', async t => {
  // A request to /poison makes a backend drop the connection without answering (as a
  // parser that rejects it would); anything else is served.
  const dropper = name => (req, res, b) => req.url.startsWith('/poison') ? req.socket.destroy() : res.end(`${b.name}\n`)
  const a = await httpBackend(t, 'a', dropper('a'))
  const b = await httpBackend(t, 'b', dropper('b'))
  const backup = await httpBackend(t, 'backup')
  const lila = await spawnLila(t, ['rr', a.address, b.address, `${backup.address},backup`, '--protocol', 'http',
    '--check', 'none', '--host', '127.0.0.1', '--port', '0', '--status-port', '0'])

  const first = await curl(['-w', '%{http_code}', `http://127.0.0.1:${lila.port}/poison`])
  t.match(first.stdout, /the request failed on every backend it tried: 127\.0\.0\.1:\d+ closed the connection without answering; 127\.0\.0\.1:\d+ closed the connection without answering\n502$/,
    'curl is answered 502, saying the request failed on every backend it tried')
  const gets = await sequential(19, () => request(lila.port, { path: '/poison' }))
  t.same(statuses(gets), { 502: 19 }, 'and so is each GET after it')
  // A POST is not sent again: it fails on one backend, and counts there only as this
  // one client's doing, which alone never ejects.
  const posts = await sequential(20, () => request(lila.port, { method: 'POST', path: '/poison', body: 'x' }))
  t.same(statuses(posts), { 502: 20 })

  const snapshot = await settled(lila)
  const listener = snapshot.listeners[0]
  for (const backend of [a, b]) {
    t.equal(backendOf(snapshot, backend.address).status, 'up', `${backend.name} stays up`)
  }
  t.equal(backup.requests, 0, 'the backup never got a request')
  // The retry budget (20% of 40 requests, plus 10) lets 14 GETs be tried a second time;
  // the others failed on one backend only, counted there as this one client's doing.
  const retried = listener.retries.closed
  t.equal(retried, 14, 'GETs were tried on a second backend while the budget allowed, never a third')
  t.equal(listener.failedEverywhere, retried, 'each one retried failed everywhere')
  t.equal(a.requests + b.requests, 40 + retried, 'one try per request, plus the retries')
  const served = await sequential(4, () => request(lila.port))
  t.same(served.map(r => r.status), [200, 200, 200, 200], 'ordinary requests are served by a and b')
  t.notOk(served.some(r => r.body.toString() === 'backup\n'))
})

t.test('failures that may be the request\'s doing eject only with more than one client behind them', async t => {
  // POSTs (not retried, so not compared with another backend) that a backend answers
  // 503: from one client they never eject it; from two, they do.
  const good = await httpBackend(t, 'good', (req, res) => req.resume().on('end', () => res.end('good\n')))
  const sick = await httpBackend(t, 'sick', (req, res) => { res.statusCode = 503; req.resume().on('end', () => res.end()) })
  const lila = await spawnLila(t, ['rr', good.address, sick.address, '--protocol', 'http', '--check', 'none',
    '--host', '127.0.0.1', '--port', '0', '--status-port', '0'])

  const post = address => from(address, lila.port, { method: 'POST', body: 'order' })
  const one = await sequential(20, () => post('127.0.0.1'))
  t.same(statuses(one), { 200: 10, 503: 10 }, 'the 503s go to the client: a POST is not sent again')
  let snapshot = await settled(lila)
  t.equal(backendOf(snapshot, sick.address).status, 'up', 'ten 503s to one client: still up')

  await sequential(12, i => post(i % 4 < 2 ? '127.0.0.1' : '127.0.0.2')) // each backend sees both
  snapshot = await settled(lila)
  t.match(backendOf(snapshot, sick.address), { status: 'down', ejections: { 503: 1 } }, 'from two clients: ejected')
})

t.test('the retry budget holds when every backend answers 503', async t => {
  for (const budget of ['20%', 'off']) {
    t.test(`--retry-budget ${budget}`, async t => {
      const backends = []
      for (const name of ['a', 'b', 'c']) {
        backends.push(await httpBackend(t, name, (req, res) => { res.statusCode = 503; res.end() }))
      }
      const lila = await spawnLila(t, ['rr', ...backends.map(b => b.address), '--protocol', 'http', '--check', 'none',
        '--retry-budget', budget, '--host', '127.0.0.1', '--port', '0', '--status-port', '0'])
      const n = 200
      const started = Date.now()
      const results = await sequential(n, () => request(lila.port))
      const windows = Math.ceil((Date.now() - started) / 10000) // the budget's windows this took
      t.same(statuses(results), { 503: n }, 'the clients get the backends\' 503')
      const sent = backends.reduce((sum, b) => sum + b.requests, 0)
      const snapshot = await settled(lila)
      const listener = snapshot.listeners[0]
      const retries = listener.retries['503'] || 0
      t.equal(sent, n + retries, 'every request the backends got is a request or a counted retry')
      if (budget === 'off') {
        t.equal(retries, n, 'no cap: every request is tried on a second backend (never a third)')
        t.equal(listener.retryBudgetExhausted, 0)
      } else {
        t.ok(retries <= n * 0.2 + 10 * windows, `retries within 20% of the requests plus 10: ${retries} of ${n}`)
        t.ok(retries >= 10, 'the budget was used')
        t.ok(listener.retryBudgetExhausted > 0, `retries refused for want of budget: ${listener.retryBudgetExhausted}`)
      }
      t.equal(listener.failedEverywhere, retries, 'each retried request failed on two backends')
      for (const b of listener.backends) t.equal(b.status, 'up', 'nobody is ejected by requests that fail everywhere')
    })
  }
})

t.test('--eject-on 5xx counts a 500; by default it neither counts nor is retried', async t => {
  for (const extra of [[], ['--eject-on', '5xx', '--retry-on', '5xx']]) {
    t.test(extra.join(' ') || 'defaults', async t => {
      const good = await httpBackend(t, 'good')
      const broken = await httpBackend(t, 'broken', (req, res) => { res.statusCode = 500; res.end('oops\n') })
      const lila = await spawnLila(t, ['rr', good.address, broken.address, '--protocol', 'http', '--check', 'none',
        '--host', '127.0.0.1', '--port', '0', '--status-port', '0', ...extra])
      const results = await sequential(20, () => request(lila.port))
      const snapshot = await settled(lila)
      const b = backendOf(snapshot, broken.address)
      if (extra.length === 0) {
        t.same(statuses(results), { 200: 10, 500: 10 }, 'the 500s reach the client')
        t.match(b, { status: 'up', failures: 0 })
      } else {
        t.same(statuses(results), { 200: 20 }, 'retried elsewhere')
        t.match(b, { status: 'down', failures: 5, ejections: { 500: 1 } })
      }
    })
  }
})

t.test('a bad --retry-on, --eject-on or --retry-budget is a usage error', async t => {
  for (const [flag, value, expected] of [
    ['--retry-on', '404', /invalid status list "404" for --retry-on: expected server-error codes from 500 to 599, 5xx, gateway, none or reset/],
    ['--eject-on', 'reset', /invalid status list "reset" for --eject-on: expected server-error codes from 500 to 599, 5xx, gateway or none,/],
    ['--eject-on', '5xy', /invalid status list "5xy" for --eject-on/],
    ['--retry-budget', '120%', /invalid percentage "120%" for --retry-budget: expected 0 to 100, e.g. 20%, or off/],
    ['--eject-after', 'five', /invalid value "five" for --eject-after: expected a whole number from 0 to 100/]
  ]) {
    const { code, stderr } = await runLila(['rr', '127.0.0.1:9', '--protocol', 'http', flag, value])
    t.equal(code, 2, `${flag} ${value}: exit 2`)
    t.match(stderr, expected)
    t.notMatch(stderr, /\n\s+at /, 'no stack trace')
  }
})
