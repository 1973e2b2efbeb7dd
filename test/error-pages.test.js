'use strict'

// --error-page and maintenance through the real executable and real clients (curl,
// Node's http and http2): lila's own 503, 504, 413, 429 and 431 with the user's page
// (its IDs filled in, the status and Retry-After kept); a backend's own 502 passed
// as it is unless --intercept-errors; maintenance switched on and off through the
// control API (every request 503 with its page but from --maintenance-allow, no
// connection dropped), per route, from the config file and its reload; the status page
// and /metrics saying so.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const http = require('http')
const { spawnLila, httpBackend, request, curl, settled, deadPort } = require('./fixtures/helpers')
const { h2connect, h2request, h2Backend } = require('./fixtures/h2')
const { TYPE, FLAG, frame, encodeBlock, hpackInt, rawClient } = require('./fixtures/h2-frames')
const { tmpDir } = require('./fixtures/tmp')

const HTTP = ['--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--status-port', '0']

function tempDir (t) {
  const dir = tmpDir(t, 'lila-error-pages-')
  return dir
}

// Pages in a fresh folder: { dir, '5xx': path, ... }.
function pages (t) {
  const dir = tempDir(t)
  const write = (name, text) => {
    const file = path.join(dir, name)
    fs.writeFileSync(file, text)
    return file
  }
  return {
    dir,
    down: write('5xx.html', '<h1>We are down</h1><p>request {{request_id}}, trace {{trace_id}}</p>\n'),
    timeout: write('504.html', '<h1>Too slow</h1>\n'),
    big: write('413.txt', 'too big, sorry\n'),
    slowdown: write('429.html', '<h1>Slow down</h1>\n'),
    maintenance: write('maintenance.html', '<h1>Back soon</h1>\n'),
    routeMaintenance: write('admin-maintenance.html', '<h1>Admin back soon</h1>\n')
  }
}

const control = (lila, method, target) => request(lila.statusPort, { method, path: target })

t.test('no backend: 503 with the page, its IDs filled in, Retry-After kept (HTTP/1.1 and HTTP/2)', async t => {
  const p = pages(t)
  const backend = `127.0.0.1:${await deadPort()}`
  const lila = await spawnLila(t, [backend, ...HTTP, '--check', 'none', '--error-page', `502,503=${p.down}`, '--request-id', '--trace'])
  t.equal((await control(lila, 'POST', `/backends/${backend}/disable`)).status, 200, 'its one backend disabled')
  const res = await request(lila.port, { path: '/' })
  t.equal(res.status, 503)
  t.equal(res.headers['content-type'], 'text/html; charset=utf-8', 'its type by its extension')
  t.equal(res.headers['retry-after'], '5', 'Retry-After kept')
  const id = res.headers['x-request-id']
  t.match(res.body.toString(), new RegExp(`^<h1>We are down</h1><p>request ${id}, trace [0-9a-f]{32}</p>\n$`), 'the file\'s bytes, the IDs in place')
  const session = await h2connect(t, lila.port)
  const h2 = await h2request(session, { path: '/x', headers: { 'x-request-id': 'abc-123' } })
  t.equal(h2.status, 503)
  t.match(h2.body.toString(), /^<h1>We are down<\/h1><p>request abc-123, trace [0-9a-f]{32}<\/p>\n$/, 'HTTP/2: the same page')
  const head = await curl(['-sI', `http://127.0.0.1:${lila.port}/`])
  t.match(head.stdout, /^content-length: \d+\r$/im, 'HEAD: the length, no body')
  session.close()
})

t.test('a 504 from --timeout, a 413, a 429 and a 431 each with its page', async t => {
  const p = pages(t)
  const silent = await httpBackend(t, 'silent', () => {})
  const lila = await spawnLila(t, [silent.address, ...HTTP, '--check', 'none', '--timeout', '300ms',
    '--max-body-size', '100', '--rate-limit', '1/m,burst=2',
    '--error-page', `504=${p.timeout}`, '--error-page', `413=${p.big}`, '--error-page', `429=${p.slowdown}`,
    '--error-page', `431=${p.big}`])
  const slow = await request(lila.port, { path: '/' })
  t.equal(slow.status, 504)
  t.equal(slow.body.toString(), '<h1>Too slow</h1>\n', '504: its page')
  const big = await request(lila.port, { method: 'POST', path: '/', body: 'x'.repeat(1000) })
  t.equal(big.status, 413)
  t.equal(big.headers['content-type'], 'text/plain; charset=utf-8', '.txt: text/plain')
  t.equal(big.body.toString(), 'too big, sorry\n', '413: its page')
  const huge = await curl(['-s', '-o', '-', '-w', '|%{http_code}', '-H', `X-Big: ${'y'.repeat(70000)}`, `http://127.0.0.1:${lila.port}/`])
  t.equal(huge.stdout, 'too big, sorry\n|431', '431 (a head refused before any route): the listener\'s page')
  // HTTP/2: a header list past 64 KiB (curl and Node's client keep to lila's
  // SETTINGS_MAX_HEADER_LIST_SIZE and never send one: a client of raw frames does),
  // a 4,000-byte field and 17 references to it.
  const client = rawClient(lila.port)
  t.teardown(() => client.socket.destroy())
  const name = Buffer.from('x-big')
  const value = Buffer.alloc(4000, 'y')
  const block = Buffer.concat([
    encodeBlock([':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'localhost']),
    Buffer.from([0x40]), hpackInt(name.length, 7, 0), name, hpackInt(value.length, 7, 0), value,
    Buffer.alloc(17, 0x80 | 62)
  ])
  client.send(frame(TYPE.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, block))
  t.equal(await client.status(1), 431, 'HTTP/2: 431')
  const end = await client.waitFor(f => f.type === TYPE.DATA && f.stream === 1 && (f.flags & FLAG.END_STREAM) !== 0,
    'the 431\'s body')
  const body = Buffer.concat(client.frames.filter(f => f.type === TYPE.DATA && f.stream === 1).map(f => f.payload))
  t.ok(end !== null, 'its body ends the stream')
  t.equal(body.toString(), 'too big, sorry\n', 'HTTP/2: the listener\'s page too')
  let limited = null // the first GET took a token, the 413 and the 431 none: one more, then 429
  for (let i = 0; i < 3 && limited === null; i++) {
    const res = await request(lila.port, { path: '/' })
    if (res.status === 429) limited = res
  }
  t.ok(limited !== null, 'over --rate-limit: 429')
  t.equal(limited && limited.body.toString(), '<h1>Slow down</h1>\n', '429: its page')
  t.ok(limited && Number(limited.headers['retry-after']) >= 1, 'with Retry-After')
})

t.test('a backend\'s own 502 passes as it is; with --intercept-errors it gets the page, its Retry-After kept (h1 and h2 backends)', async t => {
  const p = pages(t)
  const failing = await httpBackend(t, 'failing', (req, res) => {
    res.writeHead(502, { 'content-type': 'text/plain', 'retry-after': '7' })
    res.end('the backend says 502\n')
  })
  const plain = await spawnLila(t, [failing.address, ...HTTP, '--check', 'none', '--error-page', `502=${p.down}`])
  const passed = await request(plain.port, { path: '/' })
  t.equal(passed.status, 502)
  t.equal(passed.body.toString(), 'the backend says 502\n', 'without --intercept-errors: the backend\'s own')
  const intercepting = await spawnLila(t, [failing.address, ...HTTP, '--check', 'none', '--error-page', `502=${p.down}`, '--intercept-errors'])
  const replaced = await request(intercepting.port, { path: '/' })
  t.equal(replaced.status, 502, 'the status kept')
  t.match(replaced.body.toString(), /^<h1>We are down<\/h1>/, 'the page in place of the backend\'s body')
  t.equal(replaced.headers['retry-after'], '7', 'the backend\'s Retry-After kept')
  const ok = await request(intercepting.port, { path: '/', headers: { 'x-ok': '1' } })
  t.equal(ok.status, 502, 'every such answer')
  await settled(intercepting)
  // Counted as the backend's answers (their status is), as the listener's too.
  const metrics = (await request(intercepting.statusPort, { path: '/metrics' })).body.toString()
  const counted = name => Number((new RegExp(`^${name}\\{[^}]*code="5xx"[^}]*\\} (\\d+)$`, 'm').exec(metrics) || [])[1])
  t.equal(counted('lila_backend_responses_total'), 2, 'the backend\'s 5xx, its body replaced: the backend\'s')
  t.equal(counted('lila_listener_responses_total'), 2, 'and the listener\'s')

  const h2failing = await h2Backend(t, 'h2failing', stream => {
    stream.respond({ ':status': 502, 'content-type': 'text/plain' })
    stream.end('h2 backend says 502\n')
  })
  const h2lila = await spawnLila(t, [h2failing.address, ...HTTP, '--check', 'none', '--backend-protocol', 'h2',
    '--error-page', `502=${p.down}`, '--intercept-errors'])
  const session = await h2connect(t, h2lila.port)
  const viaH2 = await h2request(session, { path: '/' })
  t.equal(viaH2.status, 502)
  t.match(viaH2.body.toString(), /^<h1>We are down<\/h1>/, 'an h2 backend\'s 502, replaced too')
  session.close()
  await settled(h2lila)
})

t.test('maintenance through the API: 503 with the page for all but --maintenance-allow, then served again; no connection dropped', async t => {
  const p = pages(t)
  const backend = await httpBackend(t, 'app')
  const lila = await spawnLila(t, [backend.address, ...HTTP, '--check', 'none', '--maintenance-allow', '127.0.0.2',
    '--route', `/admin=${backend.address}`])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const sockets = new Set()
  const viaAgent = async target => {
    const res = await request(lila.port, { path: target, agent })
    sockets.add(res.socket)
    return res
  }
  const session = await h2connect(t, lila.port)
  t.equal((await viaAgent('/')).status, 200, 'before: served')
  t.equal((await h2request(session, { path: '/' })).status, 200)

  const on = await control(lila, 'POST', `/maintenance?page=${encodeURIComponent(p.maintenance)}`)
  t.equal(on.status, 200)
  t.match(on.body.toString(), /: under maintenance \(page .*maintenance\.html\)\n$/)
  const held = await viaAgent('/')
  t.equal(held.status, 503, 'HTTP/1.1: 503')
  t.equal(held.body.toString(), '<h1>Back soon</h1>\n', 'with the page')
  t.ok(Number(held.headers['retry-after']) > 0, 'and Retry-After')
  const heldH2 = await h2request(session, { path: '/admin' })
  t.equal(heldH2.status, 503, 'HTTP/2, a route too: 503')
  t.equal(heldH2.body.toString(), '<h1>Back soon</h1>\n')
  const team = await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: lila.port, path: '/', localAddress: '127.0.0.2', agent: false }, res => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    }).on('error', reject)
  })
  t.equal(team, 200, 'a client on --maintenance-allow is served')
  const page = await request(lila.statusPort, { path: '/status' })
  t.match(page.body.toString(), /under maintenance: every request answered 503 with [^<]*maintenance\.html, but for 127\.0\.0\.2\/32/, 'the status page says so')
  const metrics = await request(lila.statusPort, { path: '/metrics' })
  t.match(metrics.body.toString(), /^lila_maintenance\{listener="[^"]+"\} 1$/m, '/metrics too')

  const off = await control(lila, 'DELETE', '/maintenance')
  t.match(off.body.toString(), /: served again\n$/)
  t.equal((await viaAgent('/')).status, 200, 'off: served again')
  t.equal((await h2request(session, { path: '/admin' })).status, 200, 'on the same HTTP/2 connection')
  t.equal(sockets.size, 1, 'on the same HTTP/1.1 connection throughout')
  t.equal(backend.requests, 5, 'the backend saw the requests served, and only those')

  // A route alone, with a page of its own; a page that cannot be read is named.
  const routeOn = await control(lila, 'POST', `/maintenance?route=/admin&page=${encodeURIComponent(p.routeMaintenance)}`)
  t.match(routeOn.body.toString(), /route \/admin: under maintenance/)
  t.equal((await viaAgent('/admin/x')).body.toString(), '<h1>Admin back soon</h1>\n', 'the route: its page')
  t.equal((await viaAgent('/')).status, 200, 'the rest: served')
  const missing = await control(lila, 'POST', '/maintenance?page=/nonexistent/page.html')
  t.equal(missing.status, 400)
  t.equal(missing.body.toString(), 'cannot read page file "/nonexistent/page.html": no such file\n')
  t.equal((await control(lila, 'DELETE', '/maintenance?route=/admin')).status, 200)
  t.equal((await viaAgent('/admin/x')).status, 200, 'the route served again')
  session.close()
  agent.destroy()
  await settled(lila)
})

t.test('maintenance and error pages from the config file; a reload applies a change, and refuses a page that cannot be read', async t => {
  const p = pages(t)
  const backend = await httpBackend(t, 'app')
  const file = path.join(p.dir, 'lila.json')
  const config = (maintenance, errorPage = `503=${path.basename(p.down)}`) => JSON.stringify({
    listeners: [{
      port: 0,
      host: '127.0.0.1',
      protocol: 'http',
      check: 'none',
      maintenance,
      'error-page': errorPage,
      backends: [backend.address]
    }]
  })
  fs.writeFileSync(file, config(true))
  const lila = await spawnLila(t, ['--config', file])
  const held = await request(lila.port, { path: '/' })
  t.equal(held.status, 503, '"maintenance": true: 503')
  t.match(held.body.toString(), /^<h1>We are down<\/h1>/, 'with the 503 --error-page (relative to the config file)')
  fs.writeFileSync(file, config(false))
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(/)
  t.equal((await request(lila.port, { path: '/' })).status, 200, 'a reload to false: served')
  fs.writeFileSync(file, config(false, '503=missing.html'))
  lila.child.kill('SIGHUP')
  const refused = await lila.waitForLine(/reload refused: (.*)$/)
  t.equal(refused[1], `cannot read --error-page file "${path.join(p.dir, 'missing.html')}": no such file; keeping the running config`)
  fs.writeFileSync(file, config('maintenance.html'))
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(/, { count: 2 })
  t.equal((await request(lila.port, { path: '/' })).body.toString(), '<h1>Back soon</h1>\n', 'a page of its own')
})
