'use strict'

// --backend-protocol h2: HTTP/2 clients to HTTP/2 backends (h2c, and h2 over TLS by
// ALPN), each stream balanced on its own over pooled sessions; trailers (gRPC's status)
// and trailers-only answers pass; streaming both ways without buffering; GOAWAY,
// refused streams, resets, timeouts and dead backends; counts back to zero.

const t = require('tap')
const net = require('net')
const http = require('http')
const https = require('https')
const { constants } = require('http2')
const { startLila, deadPort, until, within, isSettled, httpBackend, listenOn } = require('./fixtures/helpers')
const { h2connect, h2request, h2Backend, h2load } = require('./fixtures/h2')
const { tool } = require('./fixtures/tools')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { frame, frameReader } = require('./fixtures/h2-frames')

const H2 = ['--protocol', 'http', '--backend-protocol', 'h2']

async function settles (t, lila) {
  await until(() => isSettled({ listeners: [lila.stats()] }), 'live counts to return to zero').catch(err => {
    t.comment(JSON.stringify(lila.stats(), null, 1))
    throw err
  })
  t.pass('every live count is back to zero')
}

function closed (session) {
  return within(5000, 'the HTTP/2 session to close', new Promise(resolve => {
    if (session.destroyed) return resolve()
    session.once('close', resolve)
    session.close()
  }))
}

const served = res => res.body.toString().trim()

// An HTTP/2 backend of raw frames that answers each request with a 200 head and some
// DATA, then resets the stream without ever ending it: a response cut short. (Node's
// own server always ends a stream before it resets it.)
async function cuttingBackend (t) {
  const server = net.createServer(socket => {
    socket.on('error', () => {})
    socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])) // SETTINGS
    socket.on('data', frameReader((type, flags, id) => {
      if (type === 4 && !(flags & 1)) socket.write(Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0])) // SETTINGS ack
      if (type !== 1) return
      const rst = Buffer.alloc(4)
      rst.writeUInt32BE(constants.NGHTTP2_INTERNAL_ERROR)
      // HEADERS (END_HEADERS, :status 200 as static index 8), DATA, RST_STREAM.
      socket.write(Buffer.concat([frame(1, 4, id, Buffer.from([0x88])), frame(0, 0, id, Buffer.from('partial')), frame(3, 0, id, rst)]))
    }))
  })
  const port = await listenOn(t, server)
  return { address: `127.0.0.1:${port}` }
}

// A gRPC-shaped answer: a body, then grpc-status in the trailers.
function grpcLike (stream, headers, b) {
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true })
  stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': b.name }))
  stream.end(Buffer.from([0, 0, 0, 0, 0]))
}

t.test('30 streams over three HTTP/2 backends in round-robin: 10/10/10, over one session each', async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => h2Backend(t, name)))
  const lila = await startLila(t, ['rr', ...backends.map(b => b.address), ...H2, '--forwarded'])
  const session = await h2connect(t, lila.port)
  const count = { a: 0, b: 0, c: 0 }
  for (let i = 0; i < 30; i++) {
    const res = await h2request(session, { path: `/s/${i}?q=1`, headers: { 'x-forwarded-for': '10.0.0.9', te: 'trailers' } })
    t.equal(res.status, 200)
    count[served(res)]++
  }
  t.same(count, { a: 10, b: 10, c: 10 })
  const all = await Promise.all(Array.from({ length: 60 }, (_, i) => h2request(session, { path: `/p/${i}` })))
  t.same(all.map(r => r.status), Array(60).fill(200))
  t.same(backends.map(b => b.requests), [30, 30, 30])
  t.same(backends.map(b => b.sessions), [1, 1, 1], 'one session per backend carried every stream')
  const seen = backends[0].last
  t.equal(seen[':authority'], `127.0.0.1:${lila.port}`)
  t.equal(seen[':scheme'], 'http')
  t.match(seen.via, /^2\.0 lila-[0-9a-f]+$/)
  t.match(seen['x-forwarded-for'], /^(10\.0\.0\.9, )?127\.0\.0\.1$/)
  t.equal(seen['x-forwarded-proto'], 'http')
  t.match(seen.forwarded, /^for=127\.0\.0\.1;proto=http;host="127\.0\.0\.1:\d+"$/)
  const first = backends.map(b => b.seen.indexOf('/s/0?q=1')).find(i => i !== -1)
  t.equal(first, 0, 'the path and query as sent')
  const snapshot = lila.stats().backends[0]
  t.match(snapshot.pool, { sockets: 1, connects: 1, reuses: 29 }, 'the pool: one session, reused')
  t.equal(snapshot.responses['2xx'], 30)
  await closed(session)
  await settles(t, lila)
})

t.test('gRPC-shaped answers: trailers, trailers-only, TE: trailers; streaming both ways as it comes', async t => {
  const backend = await h2Backend(t, 'g', (stream, headers, b) => {
    if (headers[':path'] === '/only') {
      return stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': 'unavailable' }, { endStream: true })
    }
    if (headers[':path'] === '/echo') {
      // Echo each piece at once: the client waits for it before it sends the next.
      stream.respond({ ':status': 200 }, { waitForTrailers: true })
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }))
      stream.on('data', chunk => stream.write(chunk))
      stream.on('end', () => stream.end())
      return
    }
    grpcLike(stream, headers, b)
  })
  const lila = await startLila(t, ['rr', backend.address, ...H2])
  const session = await h2connect(t, lila.port)

  const unary = await h2request(session, { method: 'POST', path: '/pkg.Svc/Call', headers: { 'content-type': 'application/grpc', te: 'trailers' }, body: Buffer.from([0, 0, 0, 0, 0]) })
  t.equal(unary.status, 200)
  t.equal(unary.headers['content-type'], 'application/grpc')
  t.same(unary.trailers && { status: unary.trailers['grpc-status'], message: unary.trailers['grpc-message'] }, { status: '0', message: 'g' }, 'grpc-status and grpc-message in the trailers, unchanged')
  t.equal(backend.last.te, 'trailers', 'TE: trailers reaches an HTTP/2 backend')
  t.equal(backend.last['content-type'], 'application/grpc')

  const only = await h2request(session, { method: 'POST', path: '/only', body: 'x' })
  t.equal(only.status, 200)
  t.equal(only.headers['grpc-status'], '14', 'a trailers-only answer passes as headers that end the stream')
  t.equal(only.body.length, 0)

  // Bidirectional streaming: each piece goes through and comes back before the next
  // is sent, so nothing waits for the end of either body.
  const echoed = []
  const trailers = await new Promise((resolve, reject) => {
    const stream = session.request({ ':method': 'POST', ':path': '/echo' })
    let n = 0
    const next = () => {
      if (n === 5) return stream.end()
      stream.write(`piece ${n++};`)
    }
    stream.on('response', next)
    stream.on('data', chunk => { echoed.push(String(chunk)); next() })
    stream.on('trailers', resolve)
    stream.on('error', reject)
  })
  t.same(echoed, ['piece 0;', 'piece 1;', 'piece 2;', 'piece 3;', 'piece 4;'], 'five round trips on one stream')
  t.equal(trailers['grpc-status'], '0')
  await closed(session)
  await settles(t, lila)
})

t.test('h2 over TLS to backends: ALPN h2; a backend that does not speak HTTP/2 is a failed connect, saying so', async t => {
  const dir = certDir(t)
  const cert = makeCertificate(dir, 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const secure = await h2Backend(t, 'secure', undefined, { secure: { cert: cert.pem, key: cert.keyPem } })
  const lila = await startLila(t, ['rr', secure.address, ...H2, '--backend-tls', '--backend-tls-ca', cert.cert])
  const session = await h2connect(t, lila.port)
  const res = await h2request(session)
  t.equal(res.status, 200)
  t.equal(served(res), 'secure')
  t.equal(secure.last[':scheme'], 'https')

  const h1only = https.createServer({ cert: cert.pem, key: cert.keyPem }, (req, res) => res.end('h1'))
  await listenOn(t, h1only)
  const lila2 = await startLila(t, ['rr', `127.0.0.1:${h1only.address().port}`, ...H2, '--backend-tls', '--backend-tls-ca', cert.cert, '--retries', '0'])
  const s2 = await h2connect(t, lila2.port)
  const bad = await h2request(s2)
  t.equal(bad.status, 502)
  t.match(bad.body.toString(), /does not speak HTTP\/2 over TLS/)
  // h2c to a backend that speaks HTTP/1.1 only.
  const plain = await httpBackend(t, 'plain')
  const lila3 = await startLila(t, ['rr', plain.address, ...H2, '--retries', '0'])
  const s3 = await h2connect(t, lila3.port)
  const wrong = await h2request(s3)
  t.equal(wrong.status, 502)
  t.match(wrong.body.toString(), /closed the connection without speaking HTTP\/2 \(is --backend-protocol right\?\)/)
  await closed(session)
  await closed(s2)
  await closed(s3)
  await settles(t, lila)
  await settles(t, lila2)
  await settles(t, lila3)
})

t.test('a backend that goes away (GOAWAY): streams in flight finish, new ones take a new session', async t => {
  const releases = []
  const backend = await h2Backend(t, 'g', (stream, headers, b) => {
    if (headers[':path'] === '/slow') return releases.push(() => { stream.respond({ ':status': 200 }); stream.end('slow') })
    stream.respond({ ':status': 200 })
    stream.end(`${b.name}\n`)
  })
  const lila = await startLila(t, ['rr', backend.address, ...H2])
  const session = await h2connect(t, lila.port)
  const slow = [h2request(session, { path: '/slow' }), h2request(session, { path: '/slow' })]
  await until(() => releases.length === 2, 'two slow streams at the backend')
  for (const s of backend.sessionsOpen) s.close() // GOAWAY, NO_ERROR
  for (const release of releases) release()
  t.same((await Promise.all(slow)).map(r => r.body.toString()), ['slow', 'slow'], 'the streams in flight finished')
  const after = await h2request(session, { path: '/after' })
  t.equal(after.status, 200, 'a new stream after the GOAWAY')
  t.equal(backend.sessions, 2, 'on a new session')
  await closed(session)
  await settles(t, lila)
})

t.test('refused streams are tried again on a fresh session; a backend that limits streams gets more sessions', async t => {
  let refuse = true
  const picky = await h2Backend(t, 'picky', (stream, headers, b) => {
    if (refuse && headers[':path'] === '/refused') {
      refuse = false
      return stream.close(constants.NGHTTP2_REFUSED_STREAM)
    }
    stream.respond({ ':status': 200 })
    stream.end(`${b.name}\n`)
  })
  const lila = await startLila(t, ['rr', picky.address, ...H2])
  const session = await h2connect(t, lila.port)
  const res = await h2request(session, { method: 'POST', path: '/refused', body: 'not idempotent' })
  t.equal(res.status, 200, 'a POST the backend refused unprocessed is sent again')
  t.equal(picky.requests, 2)
  t.equal(lila.stats().backends[0].failures, 0, 'not held against the backend')

  const releases = []
  const narrow = await h2Backend(t, 'narrow', (stream, headers, b) => {
    releases.push(() => { stream.respond({ ':status': 200 }); stream.end('ok') })
  }, { settings: { maxConcurrentStreams: 2 } })
  const lila2 = await startLila(t, ['rr', narrow.address, ...H2])
  const s2 = await h2connect(t, lila2.port)
  // The first session's SETTINGS arrive with its first answer: warm it up.
  const warm = h2request(s2)
  await until(() => releases.length === 1, 'the first stream')
  releases.shift()()
  await warm
  const pending = Array.from({ length: 6 }, () => h2request(s2))
  await until(() => releases.length === 6, 'six streams at the backend at once')
  t.ok(narrow.sessions >= 3, `six streams, two per session: ${narrow.sessions} sessions`)
  for (const release of releases.splice(0)) release()
  t.same((await Promise.all(pending)).map(r => r.status), Array(6).fill(200))
  await closed(session)
  await closed(s2)
  await settles(t, lila)
  await settles(t, lila2)
})

t.test('failures: a dead backend and one that resets are retried elsewhere; --timeout is a 504; a reset mid-response resets the stream (POST) or is a 502 (GET)', async t => {
  const good = await h2Backend(t, 'good')
  const resets = await h2Backend(t, 'resets', stream => stream.close(constants.NGHTTP2_INTERNAL_ERROR))
  const dead = `127.0.0.1:${await deadPort()}`
  const lila = await startLila(t, ['rr', dead, resets.address, good.address, ...H2])
  const session = await h2connect(t, lila.port)
  const all = await Promise.all(Array.from({ length: 9 }, () => h2request(session)))
  t.same(all.map(served), Array(9).fill('good'), 'every GET served by the good backend')
  const [deadStats, resetStats] = lila.stats().backends
  t.ok(deadStats.failures >= 1 && resetStats.failures >= 1, `failures counted (${deadStats.failures}, ${resetStats.failures})`)

  const silent = await h2Backend(t, 'silent', () => {})
  const cut = await cuttingBackend(t)
  const lila2 = await startLila(t, ['rr', silent.address, ...H2, '--timeout', '200ms'])
  const s2 = await h2connect(t, lila2.port)
  const late = await h2request(s2)
  t.equal(late.status, 504)
  t.match(late.body.toString(), /^504 Gateway Timeout: backend 127\.0\.0\.1:\d+ timed out\n$/)
  const lila3 = await startLila(t, ['rr', cut.address, ...H2])
  const s3 = await h2connect(t, lila3.port)
  // A POST is not sent again once answered: its answer passes at once, and is cut.
  const partial = await h2request(s3, { method: 'POST', body: 'x' })
  t.equal(partial.status, 200)
  t.equal(partial.rstCode, constants.NGHTTP2_INTERNAL_ERROR, 'the client stream is reset: the answer was cut')
  // A GET's small answer is held until its end (test/chaos.test.js): none of it reached
  // the client, and with no other backend to try, lila answers.
  const held = await h2request(s3)
  t.equal(held.status, 502, 'a GET cut before its end: 502, nothing of the cut answer')
  t.match(held.body.toString(), /reset the stream \(INTERNAL_ERROR\)/)
  await closed(session)
  await closed(s2)
  await closed(s3)
  await settles(t, lila)
  await settles(t, lila2)
  await settles(t, lila3)
})

t.test('a client that does not read holds the HTTP/2 backend (flow control end to end)', async t => {
  const MiB = 1024 * 1024
  const SIZE = 64 * MiB
  let written = 0
  let blocked = false
  const backend = await h2Backend(t, 'big', stream => {
    stream.respond({ ':status': 200, 'content-length': SIZE })
    const block = Buffer.alloc(MiB, 'x')
    const write = () => {
      blocked = false
      while (written < SIZE) {
        written += block.length
        if (!stream.write(block)) {
          blocked = true
          return stream.once('drain', write)
        }
      }
      stream.end()
    }
    write()
  })
  const lila = await startLila(t, ['rr', backend.address, ...H2])
  const session = await h2connect(t, lila.port)
  let stream
  let received = 0
  const done = h2request(session, { onStream: s => { stream = s; s.on('data', c => { received += c.length }); s.pause() } })
  let last = -1
  let steady = 0
  await until(() => {
    steady = blocked && written === last ? steady + 1 : 0
    last = written
    return steady >= 10
  }, 'the backend to be held', { timeout: 10000, every: 20 })
  t.ok(written < 24 * MiB, `the backend could write only ${written / MiB} MiB of 64`)
  stream.resume()
  t.equal((await done).status, 200)
  t.equal(received, SIZE)
  await closed(session)
  await settles(t, lila)
})

t.test('HTTP/1.1 clients to HTTP/2 backends', async t => {
  const backend = await h2Backend(t, 'b', (stream, headers, b) => {
    let size = 0
    stream.on('data', c => { size += c.length })
    stream.on('end', () => {
      if (headers[':path'] === '/trailers') {
        stream.respond({ ':status': 201, 'x-kind': 'trailers' }, { waitForTrailers: true })
        stream.on('wantTrailers', () => stream.sendTrailers({ 'x-sum': String(size) }))
        return stream.end('with trailers')
      }
      stream.respond({ ':status': 200, 'set-cookie': ['a=1', 'b=2'] })
      stream.end(`${headers[':method']} ${headers[':path']} ${size} ${headers.via}\n`)
    })
  })
  const lila = await startLila(t, ['rr', backend.address, ...H2])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const get = (path, options = {}) => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: lila.port, path, agent, ...options }, res => {
      let body = ''
      res.on('data', d => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body, trailers: res.trailers, socket: res.socket }))
    })
    req.on('error', reject)
    if (options.body !== undefined) req.end(options.body)
    else req.end()
  })
  const a = await get('/a?x=1')
  t.equal(a.status, 200)
  t.match(a.body, /^GET \/a\?x=1 0 1\.1 lila-[0-9a-f]+\n$/, 'Via says HTTP/1.1 came in')
  t.same(a.headers['set-cookie'], ['a=1', 'b=2'])
  const post = await get('/post', { method: 'POST', body: 'hello', headers: { 'content-length': '5' } })
  t.match(post.body, /^POST \/post 5 /)
  const chunked = await get('/chunked', { method: 'POST', body: 'abcdef' })
  t.match(chunked.body, /^POST \/chunked 6 /, 'a chunked body arrives as DATA')
  const trailers = await get('/trailers', { method: 'PUT', body: '123' })
  t.equal(trailers.status, 201)
  t.equal(trailers.body, 'with trailers')
  t.equal(trailers.headers['transfer-encoding'], 'chunked')
  t.same(trailers.trailers, { 'x-sum': '3' }, 'the backend\'s trailers reach an HTTP/1.1 client')
  t.equal(a.socket, trailers.socket, 'one keep-alive client connection throughout')
  agent.destroy()
  await settles(t, lila)
})

t.test('h2load through HTTP/2 backends: 600 streams spread, every one served', { skip: tool('h2load').skip }, async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => h2Backend(t, name)))
  const lila = await startLila(t, ['rr', ...backends.map(b => b.address), ...H2])
  const res = await h2load(['-n', '600', '-c', '6', '-m', '20', `http://127.0.0.1:${lila.port}/`])
  t.equal(res.statuses['2xx'], 600, `h2load: ${res.succeeded} succeeded, ${res.failed} failed`)
  t.same(backends.map(b => b.requests), [200, 200, 200])
  t.ok(backends.every(b => b.sessions <= 2), `few sessions per backend: ${backends.map(b => b.sessions).join('/')}`)
  await settles(t, lila)
})

t.test('--backend-protocol h1 (the default) still speaks HTTP/1.1 to backends', async t => {
  const backend = await httpBackend(t, 'old')
  const lila = await startLila(t, ['rr', backend.address, '--protocol', 'http'])
  const session = await h2connect(t, lila.port)
  t.equal(served(await h2request(session)), 'old')
  await closed(session)
})

t.test('HTTP/1.1 clients to HTTP/2 backends: HTTP/1.0, HEAD, request trailers, upgrades, failures', async t => {
  const { exchange } = require('./fixtures/helpers')
  let trailersSeen = null
  const backend = await h2Backend(t, 'b', (stream, headers) => {
    stream.on('trailers', trailers => { trailersSeen = trailers })
    stream.resume()
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'text/plain' })
      stream.end(headers[':method'] === 'HEAD' ? undefined : `${headers[':method']} ${headers[':path']}\n`)
    })
  })
  const dead = `127.0.0.1:${await deadPort()}`
  const lila = await startLila(t, ['rr', backend.address, ...H2])

  const old = await exchange(lila.port, 'GET /old HTTP/1.0\r\n\r\n')
  t.match(old.data, /^HTTP\/1\.1 200 OK\r\n/)
  t.match(old.data, /\r\nConnection: close\r\n/, 'no length from the backend: the body ends with the connection')
  t.notMatch(old.data, /Transfer-Encoding/, 'never chunked for HTTP/1.0')
  t.match(old.data, /\r\n\r\nGET \/old\n$/)

  const head = await exchange(lila.port, 'HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  t.match(head.data, /^HTTP\/1\.1 200 OK\r\n/)
  t.match(head.data, /\r\n\r\n$/, 'no body for HEAD')

  const trailed = await exchange(lila.port, 'POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
    '5\r\nhello\r\n0\r\nX-Check: 42\r\n\r\n')
  t.match(trailed.data, /\r\n\r\n(?:[0-9a-f]+\r\n)?POST \/t\n/)
  t.same(trailersSeen && { check: trailersSeen['x-check'] }, { check: '42' }, 'chunked trailers reach the backend as HTTP/2 trailers')

  const upgrade = await exchange(lila.port, 'GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n')
  t.match(upgrade.data, /^HTTP\/1\.1 502 Bad Gateway\r\n[\s\S]*an upgrade to websocket cannot be carried to an HTTP\/2 backend/)

  const lila2 = await startLila(t, ['rr', dead, ...H2, '--retries', '0'])
  const failed = await exchange(lila2.port, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  t.match(failed.data, /^HTTP\/1\.1 502 Bad Gateway\r\n[\s\S]*backend 127\.0\.0\.1:\d+ connection refused\n$/)
  await settles(t, lila)
  await settles(t, lila2)
})

t.test('--check http over HTTP/2 to HTTP/2 backends', async t => {
  const healthy = await h2Backend(t, 'healthy', (stream, headers, b) => {
    stream.respond({ ':status': headers[':path'] === '/health' ? 200 : 404 })
    stream.end(`${b.name}\n`)
  })
  const sick = await h2Backend(t, 'sick', stream => {
    stream.respond({ ':status': 500 })
    stream.end()
  })
  const lila = await startLila(t, ['rr', healthy.address, sick.address, ...H2, '--check', 'http:/health', '--check-interval', '1s', '--fall', '1'])
  const [up, down] = lila.stats().backends
  t.equal(up.state, 'up', 'the healthy backend answered its HTTP/2 check')
  t.equal(down.state, 'down', 'the one answering 500 is down')
  t.match(down.downReason, /http \/health 500/)
  t.equal(healthy.last[':path'], '/health')
  t.match(healthy.last['user-agent'], /^lila\/.* health check$/)
})
