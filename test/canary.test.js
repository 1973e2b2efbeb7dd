'use strict'

// Canary routes and the weighted canary through the real executable and real clients
// (curl, Node's http and http2): a header, a cookie and a query parameter each select
// a route's pool before the pool of the same host and path; --canary's share of fresh
// clients, the cookie that keeps a client on its side, the header and cookie that force
// one; the share changed through the control API (new clients only) and by a reload
// (without dropping a connection); the status page and /metrics side by side; a
// route's own canary; HTTP/2 backends.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const http = require('http')
const { spawnLila, httpBackend, request, curl, statusJson, settled } = require('./fixtures/helpers')
const { h2connect, h2request, h2Backend } = require('./fixtures/h2')
const { tmpDir } = require('./fixtures/tmp')

const HTTP = ['--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--status-port', '0']

const named = async (t, name) => httpBackend(t, name, (req, res, b) => res.end(b.name))
const cookieOf = res => {
  const set = res.headers['set-cookie'] || []
  const line = set.find(c => c.startsWith('lila-canary='))
  return line === undefined ? null : line.split(';')[0]
}

// `count` requests over one kept-alive connection, each with `headers(i)` -> the
// bodies (backend names) and their cookies.
async function many (port, count, headers = () => ({})) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const out = []
  try {
    for (let i = 0; i < count; i++) {
      const res = await request(port, { path: `/${i}`, headers: headers(i), agent })
      out.push({ name: res.body.toString(), cookie: cookieOf(res), socket: res.socket })
    }
  } finally {
    agent.destroy()
  }
  return out
}
const tally = list => list.reduce((counts, { name }) => ({ ...counts, [name]: (counts[name] || 0) + 1 }), {})

t.test('a header, a cookie and a query parameter each select the canary route, before the pool of the same host and path', async t => {
  const stable = await named(t, 'stable')
  const canary = await named(t, 'canary')
  const lila = await spawnLila(t, [stable.address, ...HTTP,
    '--route', `header:X-Canary=always=${canary.address}`,
    '--route', `cookie:canary=1=${canary.address}`,
    '--route', `query:beta=${canary.address}`,
    '--route', `/api=${stable.address}`,
    '--route', `/api header:X-Beta=${canary.address}`])
  const get = async (target, args = []) => (await curl([...args, `http://127.0.0.1:${lila.port}${target}`])).stdout
  t.equal(await get('/'), 'stable', 'none of them: the listener\'s backends')
  t.equal(await get('/', ['-H', 'X-Canary: always']), 'canary', 'header and value')
  t.equal(await get('/', ['-H', 'X-Canary: sometimes']), 'stable', 'another value: no')
  t.equal(await get('/', ['-b', 'canary=1']), 'canary', 'cookie and value')
  t.equal(await get('/', ['-b', 'canary=2']), 'stable')
  t.equal(await get('/x?a=1&beta'), 'canary', 'query parameter, any value')
  t.equal(await get('/x?a=1&betamax=1'), 'stable')
  t.equal(await get('/api/v1', ['-H', 'X-Beta: yes']), 'canary', '/api with the header: before /api')
  t.equal(await get('/api/v1'), 'stable', '/api without it')
  t.equal(await get('/api/v1', ['-H', 'X-Canary: always']), 'stable', 'a longer path wins over a condition alone')
  const session = await h2connect(t, lila.port)
  t.equal((await h2request(session, { path: '/', headers: { 'x-canary': 'always' } })).body.toString(), 'canary', 'HTTP/2: the header')
  t.equal((await h2request(session, { path: '/', headers: { cookie: 'a=b; canary=1' } })).body.toString(), 'canary', 'HTTP/2: the cookie')
  t.equal((await h2request(session, { path: '/?beta=1' })).body.toString(), 'canary', 'HTTP/2: the query')
  session.close()
})

t.test('--canary 10%: 2,000 fresh clients split 10% (8-12% asked), a client with its cookie stays on its side, forced sides', async t => {
  const stable = await named(t, 'stable')
  const canary = await named(t, 'canary')
  const lila = await spawnLila(t, [stable.address, ...HTTP, '--canary', `${canary.address} 10%`])
  const fresh = await many(lila.port, 2000)
  const counts = tally(fresh)
  t.ok(counts.canary >= 160 && counts.canary <= 240, `2,000 fresh clients: ${counts.canary} to the canary`)
  t.equal(counts.canary + counts.stable, 2000)
  t.ok(fresh.every(r => r.cookie === `lila-canary=${r.name}`), 'each given the cookie of its side')
  for (const side of ['canary', 'stable']) {
    const cookie = fresh.find(r => r.name === side).cookie
    const kept = await many(lila.port, 100, () => ({ cookie }))
    t.same(tally(kept), { [side]: 100 }, `a ${side} client keeps its side for 100 requests`)
    t.ok(kept.every(r => r.cookie === null), 'and is not given the cookie again')
  }
  const forced = async headers => (await request(lila.port, { path: '/', headers })).body.toString()
  t.equal(await forced({ 'x-lila-canary': 'always' }), 'canary', 'X-Lila-Canary: always')
  t.equal(await forced({ 'x-lila-canary': 'never', cookie: 'lila-canary=canary' }), 'stable', 'the header over the cookie')
  t.equal(await forced({ cookie: 'lila-canary=always' }), 'canary', 'the cookie: always')
  const session = await h2connect(t, lila.port)
  t.equal((await h2request(session, { path: '/', headers: { cookie: 'lila-canary=never' } })).body.toString(), 'stable', 'HTTP/2: the cookie: never')
  session.close()

  const snapshot = await statusJson(lila)
  const c = snapshot.listeners[0].canary
  t.match(c, { share: 10, cookie: 'lila-canary' })
  t.equal(c.stable.requests + c.canary.requests, 2204, 'every request counted on its side')
  t.equal(c.canary.requests, counts.canary + 100 + 2, 'the canary\'s')
  t.equal(c.canary.errors, 0)
  t.same(c.backends.map(b => b.address), [canary.address], 'the canary pool\'s backends')
  const page = (await request(lila.statusPort, { path: '/status' })).body.toString()
  t.match(page, /<h3>canary 10% of new clients · cookie lila-canary<\/h3>\s*<table><tr><th><\/th><th>stable<\/th><th>canary<\/th><\/tr>\s*<tr><td>requests<\/td><td>\d+<\/td><td>\d+<\/td><\/tr>/, 'the status page: both sides, side by side')
  t.match(page, /<tr><td>p99<\/td><td>[\d.]+ ms<\/td><td>[\d.]+ ms<\/td><\/tr>/, 'with their latency')
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, new RegExp(`^lila_canary_requests_total\\{listener="[^"]+",side="canary"\\} ${c.canary.requests}$`, 'm'), '/metrics: by side')
  t.match(metrics, /^lila_canary_share_ratio\{listener="[^"]+"\} 0\.1$/m)
  await settled(lila)
})

t.test('the share changed through the control API moves new clients only', async t => {
  const stable = await named(t, 'stable')
  const canary = await named(t, 'canary')
  const lila = await spawnLila(t, [stable.address, ...HTTP, '--canary', `${canary.address} 10%`])
  const before = await many(lila.port, 20)
  const stableCookie = before.find(r => r.name === 'stable').cookie
  const canaryCookie = before.find(r => r.name === 'canary').cookie
  const changed = await request(lila.statusPort, { method: 'POST', path: '/canary?share=50' })
  t.equal(changed.status, 200)
  t.match(changed.body.toString(), /canary share 50% \(was 10%\); clients with a side keep it\n$/)
  t.same(tally(await many(lila.port, 20, () => ({ cookie: stableCookie }))), { stable: 20 }, 'a stable client stays stable')
  t.same(tally(await many(lila.port, 20, () => ({ cookie: canaryCookie }))), { canary: 20 }, 'a canary client stays')
  const after = tally(await many(lila.port, 100))
  t.ok(after.canary >= 40 && after.canary <= 60, `new clients: ${after.canary} of 100 to the canary`)
  const bad = await request(lila.statusPort, { method: 'POST', path: '/canary?share=101' })
  t.equal(bad.status, 400)
  t.equal(bad.body.toString(), 'invalid share "101": expected ?share=PCT with PCT from 0 to 100, e.g. 20\n')
  await request(lila.statusPort, { method: 'POST', path: '/canary?share=0' })
  t.same(tally(await many(lila.port, 10, () => ({ cookie: canaryCookie }))), { stable: 10 }, '0%: everyone stable, a canary cookie too')
  await settled(lila)
})

t.test('a reload changes the share without dropping a connection, keeps one set through the API, and refuses 150%', async t => {
  const stable = await named(t, 'stable')
  const canary = await named(t, 'canary')
  const dir = tmpDir(t, 'lila-canary-')
  const file = path.join(dir, 'lila.json')
  const config = share => JSON.stringify({
    'status-port': 0,
    listeners: [{ port: 0, host: '127.0.0.1', protocol: 'http', check: 'none', canary: `${canary.address} ${share}`, backends: [stable.address] }]
  })
  fs.writeFileSync(file, config('10%'))
  const lila = await spawnLila(t, ['--config', file])
  const status = await lila.waitForLine(/status on http:\/\/\S+:(\d+)\/status$/)
  const statusPort = Number(status[1])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const first = await request(lila.port, { path: '/', agent })
  fs.writeFileSync(file, config('100%'))
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(/)
  const second = await request(lila.port, { path: '/', agent })
  t.equal(second.body.toString(), 'canary', '100% after the reload: the canary')
  t.equal(second.socket, first.socket, 'on the connection opened before it')
  t.match(lila.stderr, /canary 127\.0\.0\.1:\d+ 10% -> 127\.0\.0\.1:\d+ 100%/, 'the reload says the change')
  await request(statusPort, { method: 'POST', path: '/canary?share=0' })
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(/, { count: 2 })
  t.equal((await request(lila.port, { path: '/', agent })).body.toString(), 'stable', 'an unchanged file keeps the API\'s 0%')
  fs.writeFileSync(file, config('150%'))
  lila.child.kill('SIGHUP')
  const refused = await lila.waitForLine(/reload refused: (.*)$/)
  t.equal(refused[1], `${file}: listeners[0].canary: invalid canary "${canary.address} 150%": expected a share from 0% to 100%, got 150%; keeping the running config`)
})

t.test('a route\'s own canary, to HTTP/2 backends', async t => {
  const h2 = (name) => h2Backend(t, name, stream => {
    stream.respond({ ':status': 200 })
    stream.end(name)
  })
  const stable = await h2('api-stable')
  const canary = await h2('api-canary')
  const rest = await h2('rest')
  const lila = await spawnLila(t, [rest.address, ...HTTP, '--backend-protocol', 'h2',
    '--route', `/api=canary=50%,${canary.address} ${stable.address}`])
  const res = await many(lila.port, 10)
  t.same(tally(res), { rest: 10 }, 'the rest: the listener\'s own, no canary')
  const api = []
  for (let i = 0; i < 10; i++) {
    const one = await request(lila.port, { path: '/api/x' })
    api.push({ name: one.body.toString(), cookie: cookieOf(one) })
  }
  t.same(tally(api), { 'api-stable': 5, 'api-canary': 5 }, '/api: half and half')
  const setCookie = (await request(lila.port, { path: '/api' })).headers['set-cookie'][0]
  t.match(setCookie, /^lila-canary=(canary|stable); Path=\/api; HttpOnly; SameSite=Lax$/, 'the cookie\'s Path is the route\'s')
  const snapshot = await statusJson(lila)
  t.equal(snapshot.listeners[0].canary, null, 'the listener has none')
  t.match(snapshot.listeners[0].routes[0].canary, { share: 50 }, 'its route has one')
  await settled(lila)
})
