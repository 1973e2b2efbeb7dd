'use strict'

// --forward-auth through the real executable, with a real auth service (a Node HTTP
// server the test starts) and real clients (curl, Node's http and http2, grpcurl):
// a 2xx lets a request in with the headers --forward-auth-copy names, and the client's
// own copies never reach the backend; any other answer goes back as it came; the body
// waits unread; a service down, slow or speaking garbage is a 503 (UNAVAILABLE for gRPC);
// per route, after --allow; the cache on and off; https; a reload that names a bad URL.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const path = require('path')
const http = require('http')
const https = require('https')
const crypto = require('crypto')
const { spawnLila, httpBackend, request, curl, statusJson, settled, listenOn, deadPort } = require('./fixtures/helpers')
const { h2connect, h2request, h2Backend } = require('./fixtures/h2')
const { load, MISSING, grpcBackend, grpcurl } = require('./fixtures/grpc')
const { tool } = require('./fixtures/tools')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { tmpDir } = require('./fixtures/tmp')

const HTTP = ['--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--status-port', '0']
const COPY = ['--forward-auth-copy', 'Remote-User,Remote-Groups']

// An auth service: `decide(req)` -> { status, headers, body }, or a Promise of one (an
// answer held back), or 'never' (no answer). It counts the questions and keeps the
// last one's method, headers and the bytes of body it got.
async function authService (t, decide, { secure = null } = {}) {
  const service = { asked: 0, last: null, bodyBytes: 0, waiting: [], connections: 0 }
  const handler = (req, res) => {
    service.asked++
    let bytes = 0
    req.on('data', chunk => { bytes += chunk.length })
    req.on('end', async () => {
      service.bodyBytes += bytes
      service.last = { method: req.method, url: req.url, headers: req.headers }
      for (const waiter of service.waiting.splice(0)) waiter()
      const answer = await decide(req)
      if (answer === 'never') return
      res.writeHead(answer.status, answer.headers || {})
      res.end(answer.body || '')
    })
  }
  const server = secure === null ? http.createServer(handler) : https.createServer(secure, handler)
  server.on(secure === null ? 'connection' : 'secureConnection', () => { service.connections++ })
  service.port = await listenOn(t, server)
  service.url = `${secure === null ? 'http' : 'https'}://127.0.0.1:${service.port}/verify`
  // Resolves once the service has been asked (again).
  service.question = () => new Promise(resolve => service.waiting.push(resolve))
  return service
}

// The usual decision: session=good is alice; a Bearer token is refused with 401; the
// rest is sent to log in.
function decide (req) {
  if ((req.headers.cookie || '').includes('session=anon')) return { status: 204 } // in, as nobody
  if ((req.headers.cookie || '').includes('session=good')) {
    return { status: 200, headers: { 'Remote-User': 'alice', 'Remote-Groups': 'admins,ops' }, body: 'fine' }
  }
  if (req.headers.authorization) {
    return { status: 401, headers: { 'WWW-Authenticate': 'Bearer realm="lila-test"', 'Content-Type': 'text/plain' }, body: 'who are you?\n' }
  }
  return {
    status: 302,
    headers: { Location: 'https://login.example/?rd=here', 'Set-Cookie': ['flow=1; Path=/', 'nonce=2; Path=/'], 'Content-Type': 'text/html' },
    body: '<a href="https://login.example/">log in</a>\n'
  }
}

// A backend that says which Remote-* headers it got (all of them, as sent) and how many
// body bytes, with their digest.
async function echoBackend (t) {
  return httpBackend(t, 'app', (req, res) => {
    const hash = crypto.createHash('sha256')
    let length = 0
    req.on('data', chunk => { length += chunk.length; hash.update(chunk) })
    req.on('end', () => {
      const remote = []
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        if (/^remote-/i.test(req.rawHeaders[i])) remote.push(`${req.rawHeaders[i].toLowerCase()}: ${req.rawHeaders[i + 1]}`)
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ remote, length, sha: hash.digest('hex') }))
    })
  })
}

const json = res => JSON.parse(res.body.toString())

t.test('a 2xx lets the request in with Remote-User; the client\'s own never reaches the backend (HTTP/1.1 and HTTP/2 clients, h1 and h2 backends)', async t => {
  const auth = await authService(t, decide)
  const backend = await echoBackend(t)
  const lila = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', auth.url, ...COPY])
  const forged = { cookie: 'session=good', 'remote-user': 'mallory', 'remote-groups': 'root' }
  const h1 = await request(lila.port, { path: '/app/x?y=1', headers: forged })
  t.equal(h1.status, 200)
  t.same(json(h1).remote, ['remote-user: alice', 'remote-groups: admins,ops'], 'HTTP/1.1: the auth service\'s values, the client\'s gone')
  t.equal(auth.last.method, 'GET', 'the question is a GET')
  t.match(auth.last.headers, {
    cookie: 'session=good',
    'x-forwarded-method': 'GET',
    'x-forwarded-proto': 'http',
    'x-forwarded-host': `127.0.0.1:${lila.port}`,
    'x-forwarded-uri': '/app/x?y=1',
    'x-forwarded-for': '127.0.0.1',
    host: `127.0.0.1:${auth.port}`
  }, 'with the client\'s headers and where the request was going')
  const session = await h2connect(t, lila.port)
  const h2 = await h2request(session, { method: 'POST', path: '/app', headers: forged, body: 'hello' })
  t.equal(h2.status, 200)
  t.same(JSON.parse(h2.body).remote, ['remote-user: alice', 'remote-groups: admins,ops'], 'HTTP/2: the same')
  t.equal(auth.last.headers['x-forwarded-method'], 'POST')
  t.equal(auth.bodyBytes, 0, 'the auth service never got a body')
  const anon = await request(lila.port, { path: '/app', headers: { ...forged, cookie: 'session=anon' } })
  t.same(json(anon).remote, [], 'a 2xx without the headers: the client\'s own removed all the same')
  const refused = await request(lila.port, { path: '/app', headers: { 'remote-user': 'mallory' } })
  t.equal(refused.status, 302, 'no session: sent to log in, never to the backend')
  t.equal(backend.requests, 3, 'the backend saw only the three let in')
  session.close()
  await settled(lila)

  // HTTP/2 to the backend: the same headers on its stream.
  const h2app = await h2Backend(t, 'h2app', (stream, headers) => {
    stream.respond({ ':status': 200, 'content-type': 'application/json' })
    stream.end(JSON.stringify({ user: headers['remote-user'], groups: headers['remote-groups'] }))
  })
  const lila2 = await spawnLila(t, [h2app.address, ...HTTP, '--backend-protocol', 'h2', '--forward-auth', auth.url, ...COPY])
  const viaH1 = await request(lila2.port, { path: '/', headers: forged })
  t.same(json(viaH1), { user: 'alice', groups: 'admins,ops' }, 'h1 client, h2 backend: one value, the auth service\'s')
  const session2 = await h2connect(t, lila2.port)
  const viaH2 = await h2request(session2, { path: '/', headers: forged })
  t.same(JSON.parse(viaH2.body), { user: 'alice', groups: 'admins,ops' }, 'h2 client, h2 backend')
  session2.close()
  await settled(lila2)
})

t.test('a 302 to a login page and a 401 with WWW-Authenticate reach the client as the auth service gave them, body included', async t => {
  const auth = await authService(t, decide)
  const backend = await echoBackend(t)
  const lila = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', auth.url])
  for (const version of [[], ['--http2-prior-knowledge']]) {
    const login = await curl([...version, '-i', `http://127.0.0.1:${lila.port}/account`])
    const [head, body] = login.stdout.split('\r\n\r\n')
    t.match(head, /^HTTP\/[12](\.1)? 302/, `${version[0] || 'HTTP/1.1'}: 302`)
    t.match(head, /^location: https:\/\/login\.example\/\?rd=here$/im, 'its Location')
    t.match(head, /^set-cookie: flow=1; Path=\/$/im, 'its first cookie')
    t.match(head, /^set-cookie: nonce=2; Path=\/$/im, 'and its second')
    t.match(head, /^content-type: text\/html$/im, 'its type')
    t.equal(body, '<a href="https://login.example/">log in</a>\n', 'its body')
    const who = await curl([...version, '-i', '-H', 'Authorization: Bearer nope', `http://127.0.0.1:${lila.port}/api`])
    const [head401, body401] = who.stdout.split('\r\n\r\n')
    t.match(head401, /^HTTP\/[12](\.1)? 401/, '401')
    t.match(head401, /^www-authenticate: Bearer realm="lila-test"$/im, 'its WWW-Authenticate')
    t.equal(body401, 'who are you?\n', 'its body')
  }
  t.equal(backend.requests, 0, 'the backend was never asked')
  const snapshot = await statusJson(lila)
  t.match(snapshot.listeners[0].refused, { 'forward-auth': 4 }, 'counted by reason')
  t.match(snapshot.listeners[0].forwardAuth, { asked: 4, allowed: 0, cached: 0 })
})

t.test('the auth service never sees the body; a 1 MiB upload waits unread and arrives whole after the 2xx', async t => {
  let release = null
  const auth = await authService(t, () => new Promise(resolve => { release = () => resolve(decide({ headers: { cookie: 'session=good' } })) }))
  const backend = await echoBackend(t)
  const lila = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', auth.url, ...COPY])
  const body = crypto.randomBytes(1024 * 1024)
  const sha = crypto.createHash('sha256').update(body).digest('hex')

  let asked = auth.question()
  const h1 = request(lila.port, { method: 'POST', path: '/upload', headers: { cookie: 'session=good', 'content-type': 'application/octet-stream' }, body })
  await asked
  t.equal(backend.requests, 0, 'HTTP/1.1: while the auth service thinks, no backend has the request')
  release()
  const res1 = await h1
  t.same(json(res1), { remote: ['remote-user: alice', 'remote-groups: admins,ops'], length: body.length, sha }, 'then all of the body, byte for byte')

  asked = auth.question()
  const session = await h2connect(t, lila.port)
  const h2 = h2request(session, { method: 'PUT', path: '/upload', headers: { cookie: 'session=good' }, body })
  await asked
  t.equal(backend.requests, 1, 'HTTP/2: the same')
  release()
  const res2 = await h2
  t.match(JSON.parse(res2.body), { length: body.length, sha }, 'the whole body after the 2xx')
  t.equal(auth.bodyBytes, 0, 'the auth service got none of either body')
  t.equal(auth.last.headers['content-length'], undefined, 'nor was told of one')
  session.close()
  await settled(lila)
})

t.test('an auth service down, slow or speaking garbage: 503 saying why, the backend never asked', async t => {
  const backend = await echoBackend(t)
  const down = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', `http://127.0.0.1:${await deadPort()}/verify`])
  const refused = await request(down.port, { path: '/', headers: { cookie: 'session=good' } })
  t.equal(refused.status, 503, 'down: 503')
  t.match(refused.body.toString(), /the auth service http:\/\/127\.0\.0\.1:\d+\/verify refused the connection/)
  await down.waitForLine(/refused 127\.0\.0\.1: answered 503 for --forward-auth: the auth service .* refused the connection/)

  const silent = await authService(t, () => 'never')
  const slow = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', silent.url, '--forward-auth-timeout', '300ms'])
  const late = await request(slow.port, { path: '/', headers: { cookie: 'session=good' } })
  t.equal(late.status, 503, 'slow: 503 once --forward-auth-timeout passed')
  t.match(late.body.toString(), /did not answer within --forward-auth-timeout \(300ms\)/)
  const session = await h2connect(t, slow.port)
  const lateH2 = await h2request(session, { path: '/' })
  t.equal(lateH2.status, 503, 'HTTP/2 too')
  session.close()

  const garbage = net.createServer(socket => socket.once('data', () => socket.end('hello, this is no HTTP\r\n\r\n')))
  const port = await listenOn(t, garbage)
  const confused = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', `http://127.0.0.1:${port}/`])
  const bad = await request(confused.port, { path: '/', headers: { cookie: 'session=good' } })
  t.equal(bad.status, 503, 'garbage: 503')
  t.match(bad.body.toString(), /the auth service http:\/\/127\.0\.0\.1:\d+\/ failed \(HPE_/)
  t.equal(backend.requests, 0, 'no backend was asked, ever')
  await settled(slow)
})

t.test('per route, after --allow: a route\'s forward-auth asks for its own requests only', async t => {
  const auth = await authService(t, decide)
  const app = await echoBackend(t)
  const admin = await echoBackend(t)
  const lila = await spawnLila(t, [app.address, ...HTTP, ...COPY,
    '--route', `/admin=forward-auth=${auth.url} ${admin.address}`,
    '--route', `/ops=allow=10.0.0.0/8 forward-auth=${auth.url} ${admin.address}`])
  const open = await request(lila.port, { path: '/', headers: { 'remote-user': 'mallory' } })
  t.equal(open.status, 200, 'the listener\'s own pool: no auth')
  t.equal(auth.asked, 0, 'and no question')
  const let_ = await request(lila.port, { path: '/admin/x', headers: { cookie: 'session=good', 'remote-user': 'mallory' } })
  t.same(json(let_).remote, ['remote-user: alice', 'remote-groups: admins,ops'], '/admin: asked, let in with the copied headers')
  const login = await request(lila.port, { path: '/admin' })
  t.equal(login.status, 302, '/admin without a session: the auth service\'s 302')
  t.equal(auth.asked, 2)
  const ops = await request(lila.port, { path: '/ops', headers: { cookie: 'session=good' } })
  t.equal(ops.status, 403, '/ops: refused by its --allow first')
  t.equal(auth.asked, 2, 'and the auth service not asked')
})

t.test('--forward-auth-cache remembers a 2xx per Cookie and Authorization; without it, every request asks', async t => {
  const auth = await authService(t, decide)
  const backend = await echoBackend(t)
  const cached = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', auth.url, ...COPY, '--forward-auth-cache', '1m'])
  for (let i = 0; i < 3; i++) {
    const res = await request(cached.port, { path: `/${i}`, headers: { cookie: 'session=good' } })
    t.same(json(res).remote, ['remote-user: alice', 'remote-groups: admins,ops'], `request ${i}: let in, with the headers`)
  }
  t.equal(auth.asked, 1, 'cache on: asked once for three requests with the same cookie')
  await request(cached.port, { path: '/', headers: { cookie: 'session=good; other=1' } })
  t.equal(auth.asked, 2, 'another Cookie: asked again')
  await request(cached.port, { path: '/' })
  await request(cached.port, { path: '/' })
  t.equal(auth.asked, 4, 'a refusal is never remembered')
  const snapshot = await statusJson(cached)
  t.match(snapshot.listeners[0].forwardAuth, { asked: 4, allowed: 2, cached: 2 })
  const metrics = await request(cached.statusPort, { path: '/metrics' })
  t.match(metrics.body.toString(), /^lila_listener_forward_auth_total\{listener="[^"]+",result="cached"\} 2$/m, 'on /metrics')

  const uncached = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', auth.url])
  await request(uncached.port, { path: '/', headers: { cookie: 'session=good' } })
  await request(uncached.port, { path: '/', headers: { cookie: 'session=good' } })
  t.equal(auth.asked, 6, 'cache off: every request asks')
})

t.test('an https auth service, over a kept-alive connection', async t => {
  const dir = certDir(t)
  const cert = makeCertificate(dir, 'auth.test', ['IP:127.0.0.1'])
  const auth = await authService(t, decide, { secure: { cert: cert.pem, key: cert.keyPem } })
  const backend = await echoBackend(t)
  const lila = await spawnLila(t, [backend.address, ...HTTP, '--forward-auth', auth.url, ...COPY],
    { env: { ...process.env, NODE_EXTRA_CA_CERTS: cert.cert } })
  for (let i = 0; i < 3; i++) {
    const res = await request(lila.port, { path: '/', headers: { cookie: 'session=good' } })
    t.same(json(res).remote, ['remote-user: alice', 'remote-groups: admins,ops'], `request ${i} let in over https`)
  }
  t.equal(auth.asked, 3)
  t.equal(auth.connections, 1, 'one connection, kept alive')
})

t.test('gRPC: the auth service\'s 401 is UNAUTHENTICATED, its absence UNAVAILABLE; a 2xx serves the call', { skip: (load() === null && MISSING) || tool('grpcurl').skip }, async t => {
  const auth = await authService(t, decide)
  const backend = await grpcBackend(t, 'g1')
  const lila = await spawnLila(t, [backend.address, '--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--forward-auth', auth.url])
  const ok = await grpcurl(lila.port, 'lila.test.Echo/Unary', { text: 'hi' }, ['-H', 'cookie: session=good'])
  t.equal(ok.code, 0, 'let in: served')
  t.match(ok.stdout, /g1: hi/)
  const no = await grpcurl(lila.port, 'lila.test.Echo/Unary', { text: 'hi' }, ['-H', 'authorization: Bearer nope'])
  t.match(no.stderr, /Code: Unauthenticated/, '401: Unauthenticated')
  const dead = await spawnLila(t, [backend.address, '--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--forward-auth', `http://127.0.0.1:${await deadPort()}/`])
  const down = await grpcurl(dead.port, 'lila.test.Echo/Unary', { text: 'hi' })
  t.match(down.stderr, /Code: Unavailable/, 'down: Unavailable')
  t.equal(backend.calls, 1, 'the backend served only the call let in')
})

t.test('a reload with a forward-auth URL that is not http(s) is refused with the start\'s words; the old config goes on', async t => {
  const auth = await authService(t, decide)
  const backend = await echoBackend(t)
  const dir = tmpDir(t, 'lila-forward-auth-')
  const file = path.join(dir, 'lila.json')
  const config = url => JSON.stringify({
    listeners: [{ port: 0, host: '127.0.0.1', protocol: 'http', check: 'none', 'forward-auth': url, backends: [backend.address] }]
  })
  fs.writeFileSync(file, config(auth.url))
  const lila = await spawnLila(t, ['--config', file])
  fs.writeFileSync(file, config('ftp://127.0.0.1/verify'))
  lila.child.kill('SIGHUP')
  const refused = await lila.waitForLine(/reload refused: (.*)$/)
  t.equal(refused[1], `${file}: listeners[0].forward-auth: invalid forward-auth URL "ftp://127.0.0.1/verify": expected an http:// or https:// URL without credentials, e.g. http://127.0.0.1:9091/verify; keeping the running config`)
  const res = await request(lila.port, { path: '/', headers: { cookie: 'session=good' } })
  t.equal(res.status, 200, 'the running config still asks the auth service')
  t.equal(auth.asked, 1)
})
