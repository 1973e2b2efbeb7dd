'use strict'

// --sticky cookie[=NAME] and the key hashes header-hash:NAME and cookie-hash:NAME: the
// pure parts (cookie parsing, the cookie's value and attributes, upstream.js's
// preference, the queue's pinned waiters, the modes), then the real executable with
// curl and Node's client over HTTP/1.1 and HTTP/2, two lila processes agreeing with
// nothing shared, a dead sticky backend, TLS, routes, HTTP/2 backends and a reload.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { fieldValue, cookieValues, cookieValue } = require('../lib/fields')
const { Stickiness, setCookie, cookiePath } = require('../lib/proxy/http/sticky')
const { h1Response } = require('./fixtures/rewrite')
const { parseResponseHead } = require('../lib/proxy/http1/parse')
// A response head as an HTTP/1.1 client gets it with `cookie` (--sticky's Set-Cookie).
const withCookie = (text, cookie) => {
  const buf = Buffer.from(text)
  return h1Response(parseResponseHead(buf, 0, buf.length, 'GET'), {}, null, null, -1, cookie)
}
const { stickyId } = require('../lib/upstream/backend')
const { createMode, modeName, isModeWord } = require('../lib/upstream/balancers')
const { parseCommandLine } = require('../lib/config/argv')
const {
  httpBackend, spawnLila, curl, request, statusJson, closeServer, makeUpstream, backendSpec
} = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { tmpDir } = require('./fixtures/tmp')

const base = ['--host', '127.0.0.1', '--port', '0', '--check', 'none', '--protocol', 'http']

// A head's fields as parse.js lists them: name, lower-case name, value.
const fieldsOf = pairs => pairs.flatMap(([name, value]) => [name, name.toLowerCase(), value])

// ---- the pure parts ----

t.test('fields: a header\'s first value, a cookie\'s values in the order sent', async t => {
  const fields = fieldsOf([
    ['Host', 'a'], ['X-User', 'ann'], ['x-user', 'bob'],
    ['Cookie', 'theme=dark; lila=abc; SID="s 1"'], ['Cookie', 'lila=def;lila2=x; =odd; flag']
  ])
  t.equal(fieldValue(fields, 'x-user'), 'ann')
  t.equal(fieldValue(fields, 'x-none'), null)
  t.same(cookieValues(fields, 'lila'), ['abc', 'def'], 'every cookie field, every value of the name')
  t.same(cookieValues(fields, 'lila', 1), ['abc'], 'at most max')
  t.equal(cookieValue(fields, 'SID'), 's 1', 'quotes taken off')
  t.equal(cookieValue(fields, 'sid'), null, 'cookie names are case-sensitive')
  t.equal(cookieValue(fields, 'flag'), null, 'a cookie without = has no value')
  t.same(cookieValues(fieldsOf([['Host', 'a']]), 'lila'), [])
  const many = fieldsOf([['Cookie', Array.from({ length: 200 }, (_, i) => `c${i}=${i}`).join('; ')]])
  t.equal(cookieValue(many, 'c150'), null, 'a hostile header costs a bounded scan')
})

t.test('the cookie\'s value: a short hash of the address, the same everywhere', async t => {
  const id = stickyId('127.0.0.1:3001')
  t.match(id, /^[0-9a-f]{12}$/)
  t.equal(id, crypto.createHash('sha256').update('127.0.0.1:3001').digest('hex').slice(0, 12), 'SHA-256, first 12 hex digits')
  t.not(stickyId('127.0.0.1:3002'), id)
  t.notMatch(id, /127|3001/, 'not the address itself')
})

t.test('Set-Cookie: attributes, Path per pool, added to HTTP/1.1 heads', async t => {
  t.equal(setCookie('lila', 'abc', '/', false), 'lila=abc; Path=/; HttpOnly; SameSite=Lax')
  t.equal(setCookie('SID', 'abc', '/api', true), 'SID=abc; Path=/api; HttpOnly; SameSite=Lax; Secure')
  t.equal(cookiePath({ match: { host: null, wildcard: false, path: '/api' } }), '/api')
  t.equal(cookiePath({ match: { host: 'a.test', wildcard: false, path: null } }), '/')
  t.equal(cookiePath({}), '/', 'the listener\'s own backends')
  t.equal(withCookie('HTTP/1.1 200 OK\r\nA: b\r\n\r\n', 'x=1'), 'HTTP/1.1 200 OK\r\nA: b\r\nSet-Cookie: x=1\r\n\r\n')
  t.equal(withCookie('HTTP/1.1 200 OK\r\nSet-Cookie: app=1\r\n\r\n', ['x=1', 'c=2']),
    'HTTP/1.1 200 OK\r\nSet-Cookie: app=1\r\nSet-Cookie: x=1\r\nSet-Cookie: c=2\r\n\r\n', 'the backend\'s stay; a list: each')
})

t.test('Stickiness: keys of a request; a cookie only when the backend differs; counted', async t => {
  const sticky = new Stickiness()
  const head = { fields: fieldsOf([['Cookie', 'lila=aaaaaaaaaaaa']]) }
  t.equal(sticky.keys(head), null, 'off: nothing read')
  sticky.configure({ cookie: 'lila' }, false)
  t.same(sticky.keys(head), ['aaaaaaaaaaaa'])
  t.equal(sticky.keys({ fields: [] }), null)
  const backend = { stickyId: 'aaaaaaaaaaaa' }
  const other = { stickyId: 'bbbbbbbbbbbb' }
  const ctx = (stickTo, b, route = {}) => ({ stickTo, route, attempt: { backend: b } })
  t.equal(sticky.cookieFor(ctx(['aaaaaaaaaaaa'], backend)), null, 'honoured: no Set-Cookie')
  t.equal(sticky.cookieFor(ctx(['aaaaaaaaaaaa'], other)), 'lila=bbbbbbbbbbbb; Path=/; HttpOnly; SameSite=Lax', 'reassigned')
  t.equal(sticky.cookieFor(ctx(null, other)), 'lila=bbbbbbbbbbbb; Path=/; HttpOnly; SameSite=Lax', 'new')
  t.equal(sticky.cookieFor(ctx(null, null)), null, 'lila\'s own answer: none')
  t.same(sticky.snapshot(), { sticky: 'cookie=lila', stickyResponses: { honoured: 1, reassigned: 1, new: 1 } })
  sticky.configure({ cookie: 'SID' }, true)
  const text = withCookie('HTTP/1.1 200 OK\r\n\r\n', sticky.cookieFor(ctx(null, backend, { match: { path: '/v1' } })))
  t.equal(text, 'HTTP/1.1 200 OK\r\nSet-Cookie: SID=aaaaaaaaaaaa; Path=/v1; HttpOnly; SameSite=Lax; Secure\r\n\r\n')
  t.equal(sticky.snapshot().stickyResponses.new, 2, 'counts carry over a reload')
  sticky.configure(null, false)
  t.equal(sticky.cookieFor(ctx(null, backend)), null)
  t.same(sticky.snapshot().sticky, null)
})

// An upstream of three backends for choose(): round-robin, and a queue when asked.
function three (t, config = {}) {
  const made = makeUpstream(t, {
    backends: ['10.0.0.1', '10.0.0.2', '10.0.0.3'].map(host => backendSpec(host)), ...config
  })
  return { ...made, backends: made.upstream.backends }
}

t.test('upstream: the cookie\'s backend first, while it may take traffic', async t => {
  const { upstream, backends: [a, b, c] } = three(t)
  const ctx = { clientAddress: '1', stickTo: [b.stickyId] }
  for (let i = 0; i < 6; i++) t.equal(upstream.choose(ctx), b, 'every time')
  t.equal(upstream.choose({ clientAddress: '1', stickTo: ['000000000000', c.stickyId] }), c, 'the value that names one')
  t.equal(upstream.choose(ctx, new Set([b])).address === b.address, false, 'a retry goes elsewhere')
  upstream.drain(b)
  t.not(upstream.choose(ctx), b, 'drained: balanced as without a cookie')
  await upstream.enable(b)
  t.equal(upstream.choose(ctx), b)
  upstream.disable(b)
  t.not(upstream.choose(ctx), b, 'disabled')
  await upstream.enable(b)
  b.setWeight(0)
  t.not(upstream.choose(ctx), b, 'weight 0')
  b.setWeight(1)
  const seen = new Set()
  for (let i = 0; i < 6; i++) seen.add(upstream.choose({ clientAddress: '1', stickTo: ['ffffffffffff'] }))
  t.same([...seen].sort(), [a, b, c].sort(), 'a cookie naming no backend: the mode decides')
})

t.test('upstream: a cookie\'s backend at its max-conn is waited for, with a queue; else balanced', async t => {
  await t.test('with a queue: choose() gives null (wait), then the backend once a slot frees', async t => {
    const { upstream, backends: [a, b] } = three(t, { queueTimeout: 5000 })
    b.maxConn = 1
    const first = upstream.acquire({ clientAddress: '1', stickTo: [b.stickyId] })
    t.equal(first.backend, b)
    const ctx = { clientAddress: '2', stickTo: [b.stickyId] }
    t.equal(upstream.choose(ctx), null, 'full: waits for it (as HAProxy queues on the server)')
    t.equal(upstream.acquire(ctx), null)
    let got = null
    const waiter = upstream.enqueue(ctx, null, lease => { got = lease })
    t.ok(waiter, 'queued')
    t.equal(upstream.queue.pinned, 1)
    const other = upstream.acquire({ clientAddress: '3', stickTo: null })
    t.ok(other, 'a newcomer for any backend is not held up by a waiter pinned to one')
    t.not(other.backend, b)
    other.release()
    first.release()
    t.equal(got && got.backend, b, 'the slot that freed went to the waiter pinned to it')
    t.equal(upstream.queue.pinned, 0)
    got.release()
    t.not(a, b)
  })

  await t.test('without a queue (--queue-timeout 0): balanced elsewhere', async t => {
    const { upstream, backends: [, b] } = three(t, { queueTimeout: 0 })
    b.maxConn = 1
    const first = upstream.acquire({ clientAddress: '1', stickTo: [b.stickyId] })
    const next = upstream.choose({ clientAddress: '2', stickTo: [b.stickyId] })
    t.ok(next)
    t.not(next, b)
    first.release()
  })

  await t.test('a waiter pinned to a backend that is drained goes elsewhere at once', async t => {
    const { upstream, backends } = three(t, { queueTimeout: 5000 })
    for (const backend of backends) backend.maxConn = 1
    const leases = backends.map(backend => upstream.acquire({ clientAddress: '1', stickTo: [backend.stickyId] }))
    const b = backends[1]
    let got = null
    upstream.enqueue({ clientAddress: '2', stickTo: [b.stickyId] }, null, lease => { got = lease })
    leases[0].release()
    t.equal(got, null, 'a slot on another backend: still waiting for its own')
    upstream.drain(b)
    t.equal(got && got.backend, backends[0], 'drained: the free slot elsewhere')
    got.release()
    for (const lease of leases) lease.release()
  })
})

t.test('upstream: a backup named by a cookie only while backups serve', async t => {
  const { upstream } = makeUpstream(t, {
    backends: [backendSpec('10.0.0.1'), backendSpec('10.0.0.2', { backup: true })]
  })
  const [primary, backup] = upstream.backends
  const ctx = { clientAddress: '1', stickTo: [backup.stickyId] }
  t.equal(upstream.choose(ctx), primary, 'primaries serve: the backup\'s cookie is not honoured')
  upstream.drain(primary)
  t.equal(upstream.choose(ctx), backup)
})

t.test('modes with an argument: names, and the same key to the same backend', async t => {
  t.equal(modeName('header-hash:X-User'), 'header-hash:x-user', 'header names are case-insensitive')
  t.equal(modeName('cookie-hash:SessionID'), 'cookie-hash:SessionID', 'cookie names are not')
  t.equal(modeName('header-hash'), null, 'the argument is needed')
  t.equal(modeName('header-hash:'), null)
  t.equal(modeName('header-hash:a b'), null)
  t.equal(modeName('rr:x'), null, 'rr takes none')
  t.ok(isModeWord('header-hash'), 'meant as a mode (and refused with a reason)')
  t.notOk(isModeWord('rr:80'), 'a backend named rr')
  t.ok(isModeWord('rr'))

  const { upstream } = makeUpstream(t, {
    backends: ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'].map(host => backendSpec(host))
  })
  const candidates = upstream.backends
  const header = createMode('header-hash:x-user')
  const cookie = createMode('cookie-hash:SID')
  const owners = new Set()
  for (let user = 0; user < 40; user++) {
    const byHeader = { head: { fields: fieldsOf([['X-User', `u${user}`]]) } }
    const byCookie = { head: { fields: fieldsOf([['Cookie', `a=1; SID=u${user}`]]) } }
    const owner = header.pick(candidates, byHeader)
    owners.add(owner)
    for (let i = 0; i < 3; i++) t.equal(header.pick(candidates, byHeader), owner)
    t.equal(createMode('header-hash:x-user').pick(candidates, byHeader), owner, 'another instance agrees')
    t.equal(cookie.pick(candidates, byCookie), owner, 'the same key hashes the same whichever carries it')
  }
  t.equal(owners.size, 4, 'keys spread over every backend')
  const without = new Set()
  for (let i = 0; i < 4; i++) without.add(header.pick(candidates, { head: { fields: [] } }))
  t.equal(without.size, 4, 'no header: round-robin')
  t.equal(createMode('header-hash:x-user', { hashBalanceFactor: 1.25 }).pick(candidates, { head: { fields: fieldsOf([['X-User', 'u1']]) } }) !== null, true)
})

t.test('config: --sticky and the modes from argv, the file and LILA_STICKY', async t => {
  const { parseConfigFile } = require('../lib/config/file')
  const argv = parseCommandLine(['cookie-hash:SID', ':9001', '--protocol', 'http', '--sticky', 'cookie=S', '--hash-balance-factor', '1.25']).config
  const file = parseConfigFile(JSON.stringify({
    listeners: [{ protocol: 'http', mode: 'cookie-hash:SID', sticky: 'cookie=S', 'hash-balance-factor': 1.25, backends: [':9001'] }]
  }), 'lila.json')
  t.same(file.listeners[0], argv.listeners[0])
  t.same(argv.listeners[0].sticky, { cookie: 'S' })
  t.equal(argv.listeners[0].mode, 'cookie-hash:SID')
  t.same(parseCommandLine([':9001', '--protocol', 'http', '--sticky', 'cookie']).config.listeners[0].sticky, { cookie: 'lila' }, 'the default name')
  t.same(parseCommandLine([':9001', '--protocol', 'http'], { LILA_STICKY: 'cookie=E' }).config.listeners[0].sticky, { cookie: 'E' })
  const routed = parseCommandLine([':9001', '--protocol', 'http', '--route', '/api=header-hash:X-Tenant :9002']).config
  t.equal(routed.listeners[0].routes[0].pool.mode, 'header-hash:x-tenant', 'a route\'s own mode')
})

// ---- the real executable ----

// Three backends that answer with their name.
async function backends (t, names = ['a', 'b', 'c']) {
  const list = []
  for (const name of names) list.push(await httpBackend(t, name))
  return list
}

function jarFile (t) {
  const dir = tmpDir(t, 'lila-sticky-')
  return path.join(dir, 'jar')
}

// curl with a cookie jar: { body, cookies: [Set-Cookie values] }.
async function curlJar (t, jar, url, extra = []) {
  const result = await curl(['-b', jar, '-c', jar, '-D', '-', ...extra, url])
  t.equal(result.code, 0, `curl ${url}: ${result.stderr}`)
  const [head, ...rest] = result.stdout.split('\r\n\r\n')
  const cookies = head.split('\r\n').filter(line => /^set-cookie:/i.test(line)).map(line => line.slice(line.indexOf(':') + 1).trim())
  return { body: rest.join('\r\n\r\n').trim(), cookies, head }
}

const idOf = backend => stickyId(backend.address)

t.test('a cookie set by one lila is honoured by a second one with the same backends', async t => {
  const list = await backends(t)
  const addresses = list.map(b => b.address)
  const one = await spawnLila(t, ['rr', ...addresses, ...base, '--sticky', 'cookie', '--status-port', '0'])
  const two = await spawnLila(t, ['rr', ...addresses.slice().reverse(), ...base, '--sticky', 'cookie', '--status-port', '0'])
  const jar = jarFile(t)
  const first = await curlJar(t, jar, `http://127.0.0.1:${one.port}/`)
  t.equal(first.cookies.length, 1, 'a request without the cookie gets one')
  const owner = list.find(b => b.name === first.body)
  t.equal(first.cookies[0], `lila=${idOf(owner)}; Path=/; HttpOnly; SameSite=Lax`, 'names the backend that answered; no Secure without TLS')
  for (let i = 0; i < 6; i++) {
    const again = await curlJar(t, jar, `http://127.0.0.1:${two.port}/`)
    t.equal(again.body, owner.name, 'the second lila sends it to the same backend (round-robin would not)')
    t.same(again.cookies, [], 'and sets no cookie: it is right already')
  }
  for (let i = 0; i < 4; i++) {
    const h2 = await curlJar(t, jar, `http://127.0.0.1:${two.port}/`, ['--http2-prior-knowledge'])
    t.match(h2.head, /^HTTP\/2 200/)
    t.equal(h2.body, owner.name, 'HTTP/2 streams too')
  }
  const fresh = await curlJar(t, jarFile(t), `http://127.0.0.1:${two.port}/`, ['--http2-prior-knowledge'])
  t.equal(fresh.cookies.length, 1, 'an HTTP/2 response gets the cookie')
  t.match(fresh.cookies[0], /^lila=[0-9a-f]{12}; Path=\/; HttpOnly; SameSite=Lax$/)

  const status = await statusJson(two)
  const listener = status.listeners[0]
  t.equal(listener.sticky, 'cookie=lila', '/status.json shows the setting')
  t.same(listener.stickyResponses, { honoured: 10, reassigned: 0, new: 1 })
  t.same(listener.backends.map(b => b.stickyId).sort(), list.map(idOf).sort(), 'and each backend\'s cookie value')
  const metrics = await request(two.statusPort, { path: '/metrics' })
  t.match(metrics.body.toString(), /lila_listener_sticky_total\{listener="[^"]+",outcome="honoured"\} 10/)
})

t.test('a dead sticky backend: the request is retried elsewhere and the cookie replaced', async t => {
  const list = await backends(t)
  const lila = await spawnLila(t, ['rr', ...list.map(b => b.address), ...base, '--sticky', 'cookie=SID', '--status-port', '0'])
  const jar = jarFile(t)
  const first = await curlJar(t, jar, `http://127.0.0.1:${lila.port}/`)
  const dead = list.find(b => b.name === first.body)
  t.equal(first.cookies[0], `SID=${idOf(dead)}; Path=/; HttpOnly; SameSite=Lax`, 'the name given')
  await closeServer(dead.server)
  const moved = await curlJar(t, jar, `http://127.0.0.1:${lila.port}/`)
  t.not(moved.body, dead.name, 'served by another backend')
  const now = list.find(b => b.name === moved.body)
  t.same(moved.cookies, [`SID=${idOf(now)}; Path=/; HttpOnly; SameSite=Lax`], 'the cookie names the one that answered')
  for (let i = 0; i < 3; i++) {
    const again = await curlJar(t, jar, `http://127.0.0.1:${lila.port}/`, i === 2 ? ['--http2-prior-knowledge'] : [])
    t.equal(again.body, now.name, 'and stays there')
    t.same(again.cookies, [])
  }
  const listener = (await statusJson(lila)).listeners[0]
  t.same(listener.stickyResponses, { honoured: 3, reassigned: 1, new: 1 })
})

t.test('behind TLS the cookie is Secure; a route\'s cookie has the route\'s Path', async t => {
  const dir = certDir(t)
  const cert = makeCertificate(dir, 'a.test')
  const [a, b] = await backends(t, ['a', 'b'])
  const api = await httpBackend(t, 'api')
  const lila = await spawnLila(t, [
    a.address, b.address, ...base, '--sticky', 'cookie', '--tls-cert', cert.cert, '--tls-key', cert.key,
    '--route', `/api=${api.address}`
  ])
  const tlsArgs = ['--cacert', cert.cert, '--resolve', `a.test:${lila.port}:127.0.0.1`]
  const jar = jarFile(t)
  const root = await curlJar(t, jar, `https://a.test:${lila.port}/`, tlsArgs)
  t.match(root.cookies, [/^lila=[0-9a-f]{12}; Path=\/; HttpOnly; SameSite=Lax; Secure$/])
  const inApi = await curlJar(t, jar, `https://a.test:${lila.port}/api/x`, [...tlsArgs, '--http2'])
  t.match(inApi.head, /^HTTP\/2 200/, 'HTTP/2 by ALPN')
  t.equal(inApi.body, 'api')
  t.same(inApi.cookies, [`lila=${idOf(api)}; Path=/api; HttpOnly; SameSite=Lax; Secure`],
    'the pool\'s cookie, sent back only under its path')
  const again = await curlJar(t, jar, `https://a.test:${lila.port}/api/y`, tlsArgs)
  t.same(again.cookies, [], 'both cookies come back to /api: its own is honoured')
  const home = await curlJar(t, jar, `https://a.test:${lila.port}/`, tlsArgs)
  t.equal(home.body, root.body, 'and the / pool keeps its own')
  t.same(home.cookies, [])
})

t.test('HTTP/1.1 clients to HTTP/2 backends get and keep the cookie', async t => {
  const list = [await h2Backend(t, 'x'), await h2Backend(t, 'y')]
  const lila = await spawnLila(t, ['rr', ...list.map(b => b.address), ...base, '--backend-protocol', 'h2', '--sticky', 'cookie'])
  const jar = jarFile(t)
  const first = await curlJar(t, jar, `http://127.0.0.1:${lila.port}/`, ['--http1.1'])
  const owner = list.find(b => b.name === first.body)
  t.same(first.cookies, [`lila=${idOf(owner)}; Path=/; HttpOnly; SameSite=Lax`])
  for (let i = 0; i < 4; i++) {
    const again = await curlJar(t, jar, `http://127.0.0.1:${lila.port}/`, ['--http1.1'])
    t.equal(again.body, owner.name)
    t.same(again.cookies, [])
  }
})

// `count` distinct keys, each sent `times` times to each port: the backend that
// answered each key, asserted the same every time. -> Map key -> backend name
async function hashAcross (t, ports, keyed, { count = 12, times = 3 } = {}) {
  const owners = new Map()
  for (let k = 0; k < count; k++) {
    const key = `user-${k}`
    for (const port of ports) {
      for (let i = 0; i < times; i++) {
        const res = await request(port, { headers: keyed(key) })
        const name = res.body.toString().trim()
        if (!owners.has(key)) owners.set(key, name)
        else if (owners.get(key) !== name) t.fail(`${key} went to ${name} and to ${owners.get(key)}`)
      }
    }
  }
  return owners
}

t.test('header-hash:X-User and cookie-hash:SID: a key reaches the same backend across two lilas', async t => {
  const list = await backends(t)
  const addresses = list.map(b => b.address)
  for (const [mode, keyed] of [
    ['header-hash:X-User', key => ({ 'X-User': key })],
    ['cookie-hash:SID', key => ({ Cookie: `theme=dark; SID=${key}` })]
  ]) {
    const one = await spawnLila(t, [mode, ...addresses, ...base])
    const two = await spawnLila(t, [mode, ...addresses.slice().reverse(), ...base, '--hash-balance-factor', '2'])
    const owners = await hashAcross(t, [one.port, two.port], keyed)
    t.equal(owners.size, 12, `${mode}: every key answered the same by both`)
    t.ok(new Set(owners.values()).size > 1, `${mode}: keys spread over the backends`)
    const without = new Set()
    for (let i = 0; i < 3; i++) without.add((await request(one.port)).body.toString().trim())
    t.equal(without.size, 3, `${mode}: a request without the key goes round-robin`)
    const h2 = await curl(['--http2-prior-knowledge', '-H', 'X-User: user-3', '-b', 'SID=user-3', `http://127.0.0.1:${two.port}/`])
    t.equal(h2.stdout.trim(), owners.get('user-3'), `${mode}: an HTTP/2 stream keys the same`)
    await one.stop()
    await two.stop()
  }
})

t.test('a reload changes --sticky; the status shows it', async t => {
  const list = await backends(t, ['a', 'b'])
  const dir = tmpDir(t, 'lila-sticky-')
  const file = path.join(dir, 'lila.json')
  const config = sticky => JSON.stringify({
    'status-port': 0,
    'status-host': '127.0.0.1',
    listeners: [{ host: '127.0.0.1', port: 0, name: 'web', protocol: 'http', check: 'none', sticky, backends: list.map(b => b.address) }]
  })
  fs.writeFileSync(file, config('cookie=SID'))
  const lila = await spawnLila(t, ['--config', file])
  lila.statusPort = Number((await lila.waitForLine(/status on http:\/\/(\S+):(\d+)\/status$/))[2])
  t.equal((await statusJson(lila)).listeners[0].sticky, 'cookie=SID')
  const first = await curlJar(t, jarFile(t), `http://127.0.0.1:${lila.port}/`)
  t.match(first.cookies, [/^SID=/])
  fs.writeFileSync(file, config('cookie=NEXT'))
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/sticky cookie=SID -> cookie=NEXT/)
  t.equal((await statusJson(lila)).listeners[0].sticky, 'cookie=NEXT')
  const second = await curlJar(t, jarFile(t), `http://127.0.0.1:${lila.port}/`)
  t.match(second.cookies, [/^NEXT=[0-9a-f]{12}; /])
  fs.writeFileSync(file, config('none'))
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/sticky cookie=NEXT -> none/)
  const third = await curlJar(t, jarFile(t), `http://127.0.0.1:${lila.port}/`)
  t.same(third.cookies, [], 'off: no cookie')
})
