'use strict'

// --route: requests matched by Host and path prefix go to their own pools. The matching
// in isolation (router.js), the config from both sources, then real lila processes and
// backends: HTTP/1.1 and HTTP/2 clients, health per route, status, metrics, the runtime
// API and a reload.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { Router, hostName } = require('../lib/proxy/router')
const { parseRouteMatch } = require('../lib/config/route-spec')
const { parseCommandLine } = require('../lib/config/argv')
const { parseConfigFile } = require('../lib/config/file')
const { spawnLila, runLila, startLila, httpBackend, request, curl, deadPort } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')

const HTTP = ['--protocol', 'http', '--host', '127.0.0.1', '--port', '0']
const routeOf = text => ({ name: text, match: parseRouteMatch(text) })
const body = res => res.body.toString().trim()

t.test('router: the most specific match wins; paths match whole segments', async t => {
  const router = new Router(['/static', 'api.localhost', '*.localhost', 'api.localhost/v1', '*.b.localhost', '/'].map(routeOf))
  const pick = (host, path) => { const r = router.match(host, path); return r === null ? null : r.name }
  t.equal(pick('api.localhost', '/v1/users'), 'api.localhost/v1', 'host and path over host alone')
  t.equal(pick('api.localhost', '/v10'), 'api.localhost', '/v1 does not match /v10')
  t.equal(pick('API.localhost:8080', '/static/x'), 'api.localhost', 'a host over a path; case and port ignored')
  t.equal(pick('x.b.localhost', '/'), '*.b.localhost', 'the longer wildcard')
  t.equal(pick('x.localhost', '/static'), '*.localhost', 'a wildcard host over a path')
  t.equal(pick('localhost', '/static?v=2'), '/static', 'the wildcard does not match the bare name; ? ends a segment')
  t.equal(pick('localhost', '/statically'), '/', 'a prefix matches whole segments only')
  t.equal(pick(null, '/static/a.js'), '/static', 'no Host: paths still match')
  t.equal(new Router([routeOf('api.localhost')]).match('other', '/'), null, 'nothing matches: null')
  t.equal(hostName('Example.COM.'), 'example.com')
  t.equal(hostName('[::1]:8080'), '[::1]')
  t.equal(hostName(''), null)
})

t.test('router: a header, cookie or query condition goes before a route of the same host and path', async t => {
  const router = new Router(['/api', '/api header:X-Canary=always', 'cookie:canary', 'query:beta=1', '/', 'api.localhost'].map(routeOf))
  const fields = (...pairs) => pairs.flatMap(([name, value]) => [name, name.toLowerCase(), value])
  // A head's path has no query; its target has.
  const pick = (host, target, f = []) => { const r = router.match(host, target.split('?')[0], f, target); return r === null ? null : r.name }
  t.equal(pick('x', '/api/v1'), '/api', 'no header: the path route')
  t.equal(pick('x', '/api/v1', fields(['X-Canary', 'always'])), '/api header:X-Canary=always', 'its header and value: the condition first')
  t.equal(pick('x', '/api/v1', fields(['X-Canary', 'never'])), '/api', 'another value: the path route')
  t.equal(pick('x', '/api', fields(['Cookie', 'a=1; canary=x'])), '/api', 'a route of a longer path still wins over a condition alone')
  t.equal(pick('x', '/other', fields(['Cookie', 'a=1; canary=x'])), 'cookie:canary', 'a cookie with any value')
  t.equal(pick('x', '/other', fields(['Cookie', 'canaryx=1'])), '/', 'another cookie: no')
  t.equal(pick('x', '/other?a=2&beta=1'), 'query:beta=1', 'a query parameter and its value')
  t.equal(pick('x', '/other?beta=%31'), 'query:beta=1', 'percent-decoded')
  t.equal(pick('x', '/other?beta=2'), '/', 'another value: no')
  t.equal(pick('api.localhost', '/', fields(['Cookie', 'canary=1'])), 'api.localhost', 'a host route over a condition without one')
  t.same(parseRouteMatch('api.localhost/v1 cookie:c=1'), { host: 'api.localhost', wildcard: false, path: '/v1', condition: { kind: 'cookie', name: 'c', value: '1' } })
  t.same(parseRouteMatch('header:X-Beta').condition, { kind: 'header', name: 'x-beta', value: null }, 'a header\'s name in lower case')
  for (const bad of ['header:', 'header:=1', 'cookie:a b=1', 'query:', '/api /v2 header:X', 'a b']) {
    t.throws(() => parseRouteMatch(bad), /^invalid route match/, bad)
  }
})

t.test('config: --route and "routes" build the same pools; bad ones are named', async t => {
  const cli = parseCommandLine(['rr', '127.0.0.1:1', ...HTTP, '--retries', '1',
    '--route', 'api.localhost=lc 127.0.0.1:2 127.0.0.1:3,weight=2', '--route', '/static=127.0.0.1:4'])
  const [api, statics] = cli.config.listeners[0].routes
  t.same(api.match, { host: 'api.localhost', wildcard: false, path: null, condition: null })
  t.equal(api.pool.mode, 'least-connections')
  t.same(api.pool.backends.map(b => [b.port, b.weight]), [[2, 1], [3, 2]])
  t.equal(statics.pool.mode, 'round-robin', 'a route without a mode takes the listener\'s')
  t.equal(statics.pool.retries, 1, 'and its settings')

  const file = parseConfigFile(JSON.stringify({
    protocol: 'http',
    retries: 1,
    listeners: [{
      port: 0,
      routes: [{ match: '*.localhost', name: 'wild', mode: 'lc', backends: ['127.0.0.1:2'], retries: 0, check: 'http:/up' }]
    }]
  }), 'lila.json')
  const [wild] = file.listeners[0].routes
  t.equal(wild.name, 'wild')
  t.same(file.listeners[0].backends, [], 'backends may be left out when there are routes')
  t.equal(wild.pool.retries, 0, 'a route\'s own option')
  t.equal(wild.pool.check.type, 'http')

  const bad = [
    [['rr', '127.0.0.1:1', '--route', 'x=127.0.0.1:2'], /routes need --protocol http/],
    [[...HTTP, '--route', 'api.localhost'], /invalid route "api.localhost" for --route: expected MATCH=\[MODE\] BACKEND/],
    [[...HTTP, '--route', 'api.localhost:80=127.0.0.1:2'], /invalid route match "api.localhost:80": expected a host name without a port/],
    [[...HTTP, '--route', '/a b=127.0.0.1:2'], /invalid route/],
    [[...HTTP, '--route', '/a=127.0.0.1:2', '--route', '/a/=127.0.0.1:3'], /duplicate route "\/a\/"/],
    [[...HTTP, '--route', '/a=nope'], /invalid backend "nope"/]
  ]
  for (const [args, message] of bad) {
    const { code, stderr } = await runLila(args)
    t.equal(code, 2, args.join(' '))
    t.match(stderr, message)
    t.equal(stderr.split('\n')[0].startsWith('lila: '), true, 'one line first, no stack')
  }
  t.throws(() => parseConfigFile(JSON.stringify({ listeners: [{ protocol: 'http', routes: [{ match: '/a', backends: ['127.0.0.1:1'], timeout: '1s' }] }] }), 'f.json'),
    /^f\.json: listeners\[0\]\.routes\[0\]\.timeout: unknown key "timeout" in a route/)
  t.throws(() => parseConfigFile(JSON.stringify({ listeners: [{ protocol: 'http', routes: [{ backends: ['127.0.0.1:1'] }] }] }), 'f.json'),
    /listeners\[0\]\.routes\[0\]: missing "match"/)
})

t.test('a Host route and a path route go to their own pools, the rest to the default', async t => {
  const fallback = await httpBackend(t, 'default')
  const api = [await httpBackend(t, 'api-1'), await httpBackend(t, 'api-2')]
  const statics = await httpBackend(t, 'static')
  const lila = await spawnLila(t, ['rr', fallback.address, ...HTTP, '--status-port', '0', '--status-host', '127.0.0.1',
    '--route', `api.localhost=rr ${api[0].address} ${api[1].address}`, '--route', `/static=${statics.address}`])
  t.match(lila.listening, /\(http, round-robin, 1 backend, 2 routes\)/)
  const got = []
  for (let i = 0; i < 4; i++) got.push(body(await request(lila.port, { headers: { host: 'api.localhost' } })))
  t.same(got.sort(), ['api-1', 'api-1', 'api-2', 'api-2'], 'the Host route balances over its own backends')
  t.equal(body(await request(lila.port, { path: '/static/app.js' })), 'static')
  t.equal(statics.last.url, '/static/app.js', 'the path goes on unchanged')
  t.equal(body(await request(lila.port, { path: '/other' })), 'default')
  t.equal(body(await request(lila.port, { path: '/staticfile' })), 'default', 'a prefix matches whole segments')

  // HTTP/2 streams are routed the same way (curl, prior knowledge).
  const h2 = await curl(['--http2-prior-knowledge', '-H', 'Host: api.localhost', `http://127.0.0.1:${lila.port}/`])
  t.match(h2.stdout, /^api-\d$/m, 'an HTTP/2 stream goes to the route')

  const status = JSON.parse((await request(lila.statusPort, { path: '/status.json' })).body)
  const [listener] = status.listeners
  t.same(listener.routes.map(r => [r.name, r.match, r.mode, r.backends.length]),
    [['api.localhost', 'api.localhost', 'round-robin', 2], ['/static', '/static', 'round-robin', 1]])
  t.equal(listener.routes[0].backends.reduce((n, b) => n + b.total, 0), 5, 'the route counts its requests')
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, `lila_backend_requests_total{listener="${listener.name}",route="api.localhost",backend="${api[0].address}"}`)
  t.match(metrics, `lila_route_queue_length{listener="${listener.name}",route="/static"} 0`)
  const page = (await request(lila.statusPort, { path: '/status' })).body.toString()
  t.match(page, '<h3>route api.localhost')
  t.match(page, '<h3>route /static')
})

t.test('without backends of its own, a request no route matches gets 404 naming the routes', async t => {
  const api = await httpBackend(t, 'api')
  const lila = await spawnLila(t, [...HTTP, '--route', `api.localhost=${api.address}`, '--route', `*.app.localhost=${api.address}`])
  const res = await request(lila.port, { headers: { host: 'www.localhost' }, path: '/x' })
  t.equal(res.status, 404)
  t.equal(body(res), '404 Not Found: no route for www.localhost/x; the routes are api.localhost, *.app.localhost')
  t.equal(api.requests, 0)
  t.equal(body(await request(lila.port, { headers: { host: 'a.app.localhost' } })), 'api')
  const h2 = await curl(['--http2-prior-knowledge', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${lila.port}/`])
  t.equal(h2.stdout, '404', 'an HTTP/2 stream too')
})

t.test('each route has its own health: a dead backend in one route is skipped there only', async t => {
  const good = await httpBackend(t, 'good')
  const dead = `127.0.0.1:${await deadPort()}`
  const lila = await spawnLila(t, ['rr', good.address, ...HTTP, '--check', 'tcp', '--check-interval', '200ms', '--status-port', '0', '--status-host', '127.0.0.1',
    '--route', `/api=${dead} ${good.address}`])
  t.match(lila.stderr, new RegExp(`route /api: ${dead.replace(/\./g, '\\.')} +down`), 'the start-up table names the route')
  for (let i = 0; i < 4; i++) t.equal(body(await request(lila.port, { path: '/api/x' })), 'good')
  const status = JSON.parse((await request(lila.statusPort, { path: '/status.json' })).body)
  t.same(status.listeners[0].routes[0].backends.map(b => b.status), ['down', 'up'])
  t.same(status.listeners[0].backends.map(b => b.status), ['up'])
})

t.test('runtime API: ?route= picks a route\'s backend; the listener\'s own is meant without it', async t => {
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', a.address, ...HTTP, '--status-port', '0', '--status-host', '127.0.0.1',
    '--route', `/api=${a.address} ${b.address}`])
  const post = p => request(lila.statusPort, { method: 'POST', path: p })
  const drained = await post(`/backends/${a.address}/drain?route=/api`)
  t.equal(drained.status, 200)
  await lila.waitForLine(new RegExp(`route /api: backend ${a.address} drain`))
  for (let i = 0; i < 3; i++) t.equal(body(await request(lila.port, { path: '/api' })), 'b', 'the route avoids it')
  t.equal(body(await request(lila.port, { path: '/' })), 'a', 'the listener\'s own is untouched')
  t.equal((await post(`/backends/${b.address}/drain?route=nope`)).status, 404)
  const added = await request(lila.statusPort, { method: 'POST', path: '/backends?route=/api', headers: { 'content-type': 'text/plain' }, body: '127.0.0.1:1' })
  t.equal(added.status, 200, added.body.toString())
  const status = JSON.parse((await request(lila.statusPort, { path: '/status.json' })).body)
  t.equal(status.listeners[0].routes[0].backends.length, 3, 'added to the route')
  t.equal(status.listeners[0].backends.length, 1)
})

t.test('dashboard: a route\'s backends are listed under its line', async t => {
  const { render } = require('../lib/admin/dashboard')
  const a = await httpBackend(t, 'a')
  const { lb } = await startLila(t, ['rr', a.address, '--protocol', 'http', '--route', `/api=${a.address}`])
  const screen = render(lb.stats(), { selected: 1 }, { width: 100, height: 20, colour: false }).join('\n')
  t.match(screen, /route \/api round-robin · queued 0\n.*127\.0\.0\.1/)
  t.match(screen, `route /api › ${a.address}`, 'the selected row says its route')
})

t.test('reload: routes are added, changed and removed in place', async t => {
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const dir = tmpDir(t, 'lila-routes-')
  const file = path.join(dir, 'lila.json')
  const write = routes => fs.writeFileSync(file, JSON.stringify({ protocol: 'http', check: 'none', listeners: [{ host: '127.0.0.1', port: 0, backends: [a.address], routes }] }))
  write([{ match: '/b', backends: [b.address] }])
  const lila = await spawnLila(t, ['--config', file])
  t.equal(body(await request(lila.port, { path: '/b' })), 'b')
  write([{ match: '/b', mode: 'lc', backends: [b.address] }, { match: '/c', backends: [b.address] }])
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/route \/c added/)
  await lila.waitForLine(/route \/b: mode random -> least-connections/)
  t.equal(body(await request(lila.port, { path: '/c' })), 'b')
  write(undefined)
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/route \/b removed/)
  t.equal(body(await request(lila.port, { path: '/b' })), 'a', 'back to the listener\'s own')
})

t.test('with --backend-protocol h2, an HTTP/1.1 request is routed to a route\'s HTTP/2 backends', async t => {
  const http2 = require('http2')
  const { listenOn } = require('./fixtures/helpers')
  const h2Backend = async name => {
    const server = http2.createServer((req, res) => res.end(`${name} ${req.httpVersion}`))
    return `127.0.0.1:${await listenOn(t, server)}`
  }
  const own = await h2Backend('own')
  const api = await h2Backend('api')
  const lila = await spawnLila(t, ['rr', own, ...HTTP, '--backend-protocol', 'h2', '--route', `/api=${api}`])
  t.equal(body(await request(lila.port, { path: '/api/x' })), 'api 2.0')
  t.equal(body(await request(lila.port, { path: '/x' })), 'own 2.0')
})

t.test('the JSON access log names the route a request went to', async t => {
  const { within } = require('./fixtures/helpers')
  const a = await httpBackend(t, 'a')
  const lila = await spawnLila(t, ['rr', a.address, ...HTTP, '--access-log', 'json', '--route', `/api=${a.address}`])
  await request(lila.port, { path: '/api/x' })
  await request(lila.port, { path: '/other' })
  await within(5000, 'two access log lines', new Promise(resolve => {
    const check = () => {
      if (lila.stdout.split('\n').filter(Boolean).length < 2) return
      lila.child.stdout.off('data', check)
      resolve()
    }
    lila.child.stdout.on('data', check)
    check()
  }))
  const records = lila.stdout.split('\n').filter(Boolean).map(line => JSON.parse(line))
  t.same(records.map(r => [r.target, r.route]), [['/api/x', '/api'], ['/other', undefined]])
})
