'use strict'

// HTTP/2 from clients to HTTP/1.1 backends, in-process (so live counters can be read):
// every stream is a request balanced on its own, with HTTP/1.1's rewriting, retries,
// answers and counters; bodies, trailers and 1xx pass; lila's own errors are HTTP/2
// responses; HTTP/1.1 on the same port is untouched. Node's http2 client throughout;
// curl and h2load are in http2-tools.test.js.

const t = require('tap')
const net = require('net')
const http = require('http')
const crypto = require('crypto')
const { constants } = require('http2')
const {
  httpBackend, request, startLila, deadPort, until, within, isSettled, exchange, captureLog
} = require('./fixtures/helpers')
const { h2connect, h2request } = require('./fixtures/h2')
const { createAccessLog } = require('../lib/admin/access-log')

const HTTP = ['--protocol', 'http']
const MiB = 1024 * 1024

// Every live count back to zero: no session, no backend slot, nothing queued.
async function settles (t, lila) {
  await until(() => isSettled({ listeners: [lila.stats()] }), 'live counts to return to zero').catch(err => {
    t.comment(JSON.stringify(lila.stats(), null, 1))
    throw err
  })
  t.pass('every live count is back to zero')
}

// Close an HTTP/2 client session and wait for it.
function closed (session) {
  return within(5000, 'the HTTP/2 session to close', new Promise(resolve => {
    if (session.closed && session.destroyed) return resolve()
    session.once('close', resolve)
    session.close()
  }))
}

const served = res => res.body.toString().trim()

// The error code of the GOAWAY frame among the frames in `bytes`, or null.
function goawayCode (bytes) {
  for (let at = 0; at + 9 <= bytes.length; at += 9 + bytes.readUIntBE(at, 3)) {
    if (bytes[at + 3] === 7) return bytes.readUInt32BE(at + 13)
  }
  return null
}

t.test('30 streams of one HTTP/2 connection over three backends in round-robin: 10/10/10', async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => httpBackend(t, name)))
  const lila = await startLila(t, ['rr', ...backends.map(b => b.address), ...HTTP])
  const session = await h2connect(t, lila.port)
  const count = { a: 0, b: 0, c: 0 }
  for (let i = 0; i < 30; i++) {
    const res = await h2request(session, { path: `/seq/${i}` })
    t.equal(res.status, 200)
    count[served(res)]++
  }
  t.same(count, { a: 10, b: 10, c: 10 })
  // And 60 at once, as concurrent streams.
  const all = await Promise.all(Array.from({ length: 60 }, (_, i) => h2request(session, { path: `/par/${i}` })))
  t.same(all.map(r => r.status), Array(60).fill(200))
  t.same(backends.map(b => b.requests), [30, 30, 30], 'concurrent streams in turn too')
  const stats = lila.stats()
  t.equal(stats.accepted, 1, 'one client connection carried all 90')
  t.equal(stats.active, 1, 'one session while it is open')
  t.equal(stats.responses['2xx'], 90, 'each stream counted as a response')
  t.equal(stats.requestTime.count, 90)
  t.same(stats.backends.map(b => b.total), [30, 30, 30])
  t.same(stats.backends.map(b => b.responses['2xx']), [30, 30, 30])
  await closed(session)
  await settles(t, lila)
})

t.test('HTTP/1.1 on the same port, before, beside and after HTTP/2', async t => {
  const backend = await httpBackend(t, 'one')
  const lila = await startLila(t, ['rr', backend.address, ...HTTP])
  t.equal((await request(lila.port)).status, 200, 'HTTP/1.1 first')
  const session = await h2connect(t, lila.port)
  t.equal((await h2request(session)).status, 200)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  for (let i = 0; i < 3; i++) t.equal((await request(lila.port, { agent })).status, 200, 'HTTP/1.1 keep-alive beside it')
  t.equal((await h2request(session)).status, 200)
  // A request line that says HTTP/2.0 is still an HTTP/1.x head lila does not speak;
  // the preface's first line and empty line are HTTP/2's, and the rest of a preface
  // that breaks off there a connection error (RFC 9113 3.4: GOAWAY PROTOCOL_ERROR).
  t.match((await exchange(lila.port, 'GET / HTTP/2.0\r\nHost: x\r\n\r\n')).data, /^HTTP\/1\.1 505 /)
  const broken = Buffer.from((await exchange(lila.port, 'PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n')).data, 'latin1')
  t.same(goawayCode(broken), 1, 'not the whole preface: GOAWAY PROTOCOL_ERROR')
  // A first line that is no HTTP/1.x request line (h2spec's "invalid connection
  // preface"): closed unanswered, since the client may speak HTTP/2 only; a malformed
  // line that says HTTP/1.1 is answered 400.
  t.equal((await exchange(lila.port, 'INVALID CONNECTION PREFACE\r\n\r\n')).data, '', 'not HTTP/1.x: closed, unanswered')
  t.match((await exchange(lila.port, 'INVALID  PREFACE HTTP/1.1\r\n\r\n')).data, /^HTTP\/1\.1 400 /)
  t.equal(backend.requests, 6)
  await closed(session)
  agent.destroy()
  await settles(t, lila)
})

t.test('the preface in pieces, and a hand-made request: h2c by prior knowledge', async t => {
  const backend = await httpBackend(t, 'raw')
  const lila = await startLila(t, ['rr', backend.address, ...HTTP])
  const socket = net.connect(lila.port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  await new Promise(resolve => socket.once('connect', resolve))
  const frames = []
  let received = Buffer.alloc(0)
  const gotData = new Promise(resolve => socket.on('data', chunk => {
    received = Buffer.concat([received, chunk])
    while (received.length >= 9 && received.length >= 9 + received.readUIntBE(0, 3)) {
      const length = received.readUIntBE(0, 3)
      const stream = received.readUInt32BE(5) & 0x7fffffff
      frames.push({ type: received[3], flags: received[4], stream, payload: received.subarray(9, 9 + length) })
      received = received.subarray(9 + length)
      if (frames.some(f => f.type === 0 && f.stream === 1 && (f.flags & 1))) resolve()
    }
  }))
  const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')
  const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])
  // HEADERS, END_STREAM|END_HEADERS, stream 1: GET (static 2), / (4), http (6),
  // :authority (static name 1) "x", in HPACK without Huffman.
  const block = Buffer.from([0x82, 0x84, 0x86, 0x41, 0x01, 0x78])
  const headers = Buffer.concat([Buffer.from([0, 0, block.length, 1, 5, 0, 0, 0, 1]), block])
  const pieces = [preface.subarray(0, 3), preface.subarray(3, 16), preface.subarray(16)]
  pieces.push(Buffer.concat([settings, headers]))
  for (const piece of pieces) {
    socket.write(piece)
    await new Promise(resolve => setImmediate(resolve))
  }
  await within(5000, 'the response on stream 1', gotData)
  const data = Buffer.concat(frames.filter(f => f.type === 0 && f.stream === 1).map(f => f.payload))
  t.equal(data.toString(), 'raw\n', 'the backend answered, in HTTP/2 DATA frames')
  t.ok(frames.some(f => f.type === 1 && f.stream === 1), 'a HEADERS frame on stream 1')
  t.equal(backend.last.headers.host, 'x', ':authority became Host')
  socket.destroy()
  await settles(t, lila)
})

t.test('headers: :authority becomes Host, X-Forwarded-* and Via set, hop-by-hop dropped both ways', async t => {
  const backend = await httpBackend(t, 'h', (req, res) => {
    res.setHeader('Connection', 'X-Resp-Hop')
    res.setHeader('X-Resp-Hop', 'secret')
    res.setHeader('Keep-Alive', 'timeout=5')
    res.setHeader('Set-Cookie', ['a=1', 'b=2', 'c=3'])
    res.setHeader('X-End-To-End', 'kept')
    res.end('ok')
  })
  const lila = await startLila(t, ['rr', backend.address, ...HTTP, '--forwarded'])
  const session = await h2connect(t, lila.port)
  const res = await h2request(session, {
    path: '/p?q=1',
    headers: { 'x-forwarded-for': '10.0.0.9', cookie: ['k1=v1', 'k2=v2'], 'user-agent': 'h2-test', te: 'trailers' }
  })
  t.equal(res.status, 200)
  const seen = backend.last
  t.equal(seen.method, 'GET')
  t.equal(seen.url, '/p?q=1')
  t.equal(seen.headers.host, `127.0.0.1:${lila.port}`, ':authority is the Host the backend gets')
  t.equal(seen.headers['x-forwarded-for'], '10.0.0.9, 127.0.0.1')
  t.equal(seen.headers['x-forwarded-proto'], 'http')
  t.equal(seen.headers['x-forwarded-host'], `127.0.0.1:${lila.port}`)
  t.equal(seen.headers.forwarded, `for=127.0.0.1;proto=http;host="127.0.0.1:${lila.port}"`)
  t.match(seen.headers.via, /^2\.0 lila-[0-9a-f]+$/, 'Via says HTTP/2 came in')
  t.equal(seen.headers.cookie, 'k1=v1; k2=v2', 'cookie crumbs joined for HTTP/1.1')
  t.equal(seen.headers['user-agent'], 'h2-test')
  t.notOk('te' in seen.headers, 'TE is hop-by-hop')
  t.notOk('transfer-encoding' in seen.headers, 'a GET that ended its stream has no body')
  t.notOk(seen.rawHeaders.some((v, i) => i % 2 === 0 && v.startsWith(':')), 'no pseudo-header reaches HTTP/1.1')
  t.same(res.headers['set-cookie'], ['a=1', 'b=2', 'c=3'], 'repeated Set-Cookie kept apart')
  t.equal(res.headers['x-end-to-end'], 'kept')
  t.notOk('x-resp-hop' in res.headers, 'a field Connection names is dropped')
  t.notOk('keep-alive' in res.headers)
  t.notOk('connection' in res.headers)
  t.equal(res.body.toString(), 'ok')
})

t.test('bodies stream both ways: with a length, without one (chunked to the backend) and with trailers', async t => {
  const backend = await httpBackend(t, 'echo', (req, res) => {
    const hash = crypto.createHash('sha256')
    let size = 0
    req.on('data', chunk => { hash.update(chunk); size += chunk.length })
    req.on('end', () => {
      res.setHeader('X-Framing', req.headers['transfer-encoding'] || `length ${req.headers['content-length']}`)
      res.setHeader('X-Trailer', JSON.stringify(req.trailers))
      res.end(`${size} ${hash.digest('hex')}`)
    })
  })
  const lila = await startLila(t, ['rr', backend.address, ...HTTP])
  const session = await h2connect(t, lila.port)
  const body = crypto.randomBytes(3 * MiB + 7)
  const sha = crypto.createHash('sha256').update(body).digest('hex')

  const sized = await h2request(session, { method: 'PUT', path: '/sized', headers: { 'content-length': String(body.length) }, body })
  t.equal(sized.status, 200)
  t.equal(sized.body.toString(), `${body.length} ${sha}`, '3 MiB with a Content-Length, intact')
  t.equal(sized.headers['x-framing'], `length ${body.length}`)

  const open = await h2request(session, { method: 'POST', path: '/open', body })
  t.equal(open.body.toString(), `${body.length} ${sha}`, '3 MiB without a length, intact')
  t.equal(open.headers['x-framing'], 'chunked', 'sent chunked to the backend')

  // Trailers from the client reach the backend as chunked trailers.
  const trailed = await new Promise(resolve => {
    const stream = session.request({ ':method': 'POST', ':path': '/trailers' }, { waitForTrailers: true })
    stream.on('wantTrailers', () => stream.sendTrailers({ 'x-sum': 'abc' }))
    let text = ''
    stream.on('data', chunk => { text += chunk })
    stream.on('response', headers => { stream.headersIn = headers })
    stream.on('end', () => resolve({ text, headers: stream.headersIn }))
    stream.write('part one, ')
    stream.end('part two')
  })
  t.equal(trailed.text.split(' ')[0], '18')
  t.same(JSON.parse(trailed.headers['x-trailer']), { 'x-sum': 'abc' }, 'the request trailers reached the backend')
  t.equal(backend.requests, 3)
})

t.test('a response with 103 Early Hints, a chunked body and trailers', async t => {
  const backend = await httpBackend(t, 't', (req, res) => {
    if (req.method === 'HEAD') return res.end()
    res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' })
    res.writeHead(200, { 'Content-Type': 'text/plain', Trailer: 'X-Checksum' })
    res.write('first ')
    res.addTrailers({ 'X-Checksum': 'c0ffee' })
    res.end('second')
  })
  const lila = await startLila(t, ['rr', backend.address, ...HTTP])
  const session = await h2connect(t, lila.port)
  const res = await h2request(session)
  t.equal(res.status, 200)
  t.equal(res.body.toString(), 'first second', 'the chunked body decoded into DATA')
  t.same(res.interim.map(h => h[':status']), [103], 'the 103 passed as interim headers')
  t.equal(res.interim[0].link, '</style.css>; rel=preload; as=style')
  t.equal(res.headers.trailer, 'X-Checksum', 'the Trailer field announces them')
  t.equal(res.trailers['x-checksum'], 'c0ffee', 'the trailers passed as HTTP/2 trailers')
  t.equal(res.rstCode, constants.NGHTTP2_NO_ERROR)
  // A response to HEAD and a 304 have no body.
  const head = await h2request(session, { method: 'HEAD' })
  t.equal(head.status, 200)
  t.equal(head.body.length, 0)
})

t.test("lila's own answers are HTTP/2 responses: 502, 503 with Retry-After, 504, 508; the connection goes on", async t => {
  const slow = await httpBackend(t, 'slow', () => {}) // never answers
  const dead = `127.0.0.1:${await deadPort()}`
  const log = captureLog('warn')
  const lila502 = await startLila(t, ['rr', dead, ...HTTP, '--retries', '0'], { log: log.log })
  const a = await h2connect(t, lila502.port)
  const bad = await h2request(a)
  t.equal(bad.status, 502)
  t.equal(bad.headers['content-type'], 'text/plain; charset=utf-8')
  t.match(bad.body.toString(), /^502 Bad Gateway: backend 127\.0\.0\.1:\d+ connection refused\n$/)
  t.equal(Number(bad.headers['content-length']), bad.body.length)
  const headBad = await h2request(a, { method: 'HEAD' })
  t.equal(headBad.status, 502)
  t.equal(headBad.body.length, 0, 'no body for HEAD')
  t.equal(lila502.stats().responses['5xx'], 2)
  await log.waitFor(/502 for GET \/ from 127\.0\.0\.1: backend/)

  const lila504 = await startLila(t, ['rr', `${slow.address},max-conn=1`, ...HTTP, '--timeout', '200ms', '--queue-timeout', '0s'])
  const b = await h2connect(t, lila504.port)
  const [timedOut, full] = await Promise.all([h2request(b, { path: '/first' }), h2request(b, { path: '/second' })])
  t.equal(timedOut.status, 504)
  t.match(timedOut.body.toString(), /^504 Gateway Timeout: backend 127\.0\.0\.1:\d+ timed out\n$/)
  t.equal(full.status, 503, 'the backend full and no queue: 503')
  t.equal(full.headers['retry-after'], '5')
  t.match(full.body.toString(), /^503 Service Unavailable: no backend available\n$/)
  t.equal((await h2request(b, { path: '/again' })).status, 504, 'the connection still serves')
  t.equal(lila504.stats().unserved, 1)

  const loop = await startLila(t, ['rr', slow.address, ...HTTP], { via: 'lila-l00p' })
  const c = await h2connect(t, loop.port)
  const looped = await h2request(c, { headers: { via: '1.1 other, 2.0 lila-l00p' } })
  t.equal(looped.status, 508, 'a request that came back through this lila')
  t.match(looped.body.toString(), /^508 Loop Detected: request already passed through this lila/)
  await closed(a)
  await closed(b)
  await closed(c)
  await settles(t, lila502)
  await settles(t, lila504)
})

t.test("a dead backend's streams are retried on the others", async t => {
  const backends = await Promise.all(['a', 'b'].map(name => httpBackend(t, name)))
  const dead = `127.0.0.1:${await deadPort()}`
  const lila = await startLila(t, ['rr', dead, ...backends.map(b => b.address), ...HTTP])
  const session = await h2connect(t, lila.port)
  const all = await Promise.all(Array.from({ length: 40 }, (_, i) => h2request(session, { path: `/${i}` })))
  t.same(all.map(r => r.status), Array(40).fill(200), 'every stream served')
  t.equal(backends[0].requests + backends[1].requests, 40)
  t.ok(backends[0].requests > 0 && backends[1].requests > 0, `spread: ${backends.map(b => b.requests).join('/')}`)
  const [deadStats] = lila.stats().backends
  t.ok(deadStats.failures >= 1, `the dead backend's failures counted (${deadStats.failures})`)
  t.equal(deadStats.state, 'down', 'and it was ejected by passive health')
  // A reset after the request reached the backend: an idempotent request goes elsewhere.
  const flaky = await httpBackend(t, 'flaky', (req, res) => req.socket.destroy())
  const good = await httpBackend(t, 'good')
  const lila2 = await startLila(t, ['rr', flaky.address, good.address, ...HTTP])
  const s2 = await h2connect(t, lila2.port)
  const got = await Promise.all(Array.from({ length: 6 }, () => h2request(s2)))
  t.same(got.map(served), Array(6).fill('good'), 'each retried on the good backend')
  await closed(session)
  await closed(s2)
  await settles(t, lila)
  await settles(t, lila2)
})

t.test('requests lila refuses are answered on their stream; the connection and its other streams go on', async t => {
  const backend = await httpBackend(t, 'b')
  const lila = await startLila(t, ['rr', backend.address, ...HTTP])
  const session = await h2connect(t, lila.port)
  const connect = await new Promise(resolve => {
    const stream = session.request({ ':method': 'CONNECT', ':authority': 'example.test:443' })
    let status = 0
    stream.on('response', headers => { status = headers[':status'] })
    stream.on('error', () => {})
    stream.on('close', () => resolve(status))
    stream.resume()
  })
  t.equal(connect, 405, 'CONNECT: 405')
  const mismatch = await h2request(session, { headers: { ':authority': `127.0.0.1:${lila.port}`, host: 'other.test' } })
  t.equal(mismatch.status, 400, 'Host and :authority differ: 400')
  t.match(mismatch.body.toString(), /^400 Bad Request: Host and :authority differ\n$/)
  // A control byte HTTP/1.1 could not carry: refused, as in an HTTP/1.1 head (Node's
  // http2 dropped the field before lila saw it).
  const control = await h2request(session, { headers: { 'x-bad': 'a\x01b' } })
  t.equal(control.status, 400, 'a control byte in a value: 400')
  t.match(control.body.toString(), /control character in header x-bad/)
  const many = {}
  for (let i = 0; i < 120; i++) many[`x-h${i}`] = 'v'
  t.equal((await h2request(session, { headers: many })).status, 431, 'over 100 fields: 431')
  t.equal((await h2request(session, { path: `/${'a'.repeat(9000)}` })).status, 414, 'a target over 8 KiB: 414')
  const ok = await h2request(session)
  t.equal(ok.status, 200, 'then a good request on the same connection')
  t.equal(backend.requests, 1, 'none of the refused reached the backend')
  t.equal(lila.stats().responses['4xx'], 5)
  await closed(session)
  await settles(t, lila)
})

t.test('a client that resets its stream: the backend connection is dropped, 499 logged, counts back to zero', async t => {
  let arrived
  const started = new Promise(resolve => { arrived = resolve })
  let backendClosed
  const backendGone = new Promise(resolve => { backendClosed = resolve })
  const backend = await httpBackend(t, 'slow', (req, res) => {
    res.on('close', backendClosed)
    arrived()
  })
  const records = []
  const accessLog = createAccessLog({ format: 'json', stdout: { write: text => records.push(...text.trim().split('\n').map(l => JSON.parse(l))) } })
  const lila = await startLila(t, ['rr', backend.address, ...HTTP], { accessLog })
  const session = await h2connect(t, lila.port)
  const pending = h2request(session, { path: '/slow', onStream: stream => started.then(() => stream.close(constants.NGHTTP2_CANCEL)) })
  const res = await pending
  t.equal(res.rstCode, constants.NGHTTP2_CANCEL)
  await within(5000, 'the backend connection to close', backendGone)
  await until(() => records.length === 1, 'the access log line')
  t.equal(records[0].status, 499)
  await closed(session)
  await settles(t, lila)
})

t.test('the access log: one record per stream, version HTTP/2.0', async t => {
  const backend = await httpBackend(t, 'b', (req, res) => res.end('hello'))
  const records = []
  const accessLog = createAccessLog({ format: 'json', stdout: { write: text => records.push(...text.trim().split('\n').map(l => JSON.parse(l))) } })
  const lila = await startLila(t, ['rr', backend.address, ...HTTP], { accessLog })
  const session = await h2connect(t, lila.port)
  await h2request(session, { path: '/x?y=1', headers: { 'user-agent': 'ua/1', referer: 'http://r.test/' } })
  await h2request(session, { method: 'POST', path: '/post', body: 'abc' })
  await until(() => records.length === 2, 'two access log lines')
  const [get, post] = records
  t.match(get, {
    protocol: 'http',
    client: '127.0.0.1',
    backend: backend.address,
    method: 'GET',
    target: '/x?y=1',
    version: 'HTTP/2.0',
    status: 200,
    host: `127.0.0.1:${lila.port}`,
    userAgent: 'ua/1',
    referer: 'http://r.test/'
  })
  t.ok(get.bytesOut > 5 && get.bytesIn > 0, `bytes counted (in ${get.bytesIn}, out ${get.bytesOut})`)
  t.match(post, { method: 'POST', target: '/post', status: 200, version: 'HTTP/2.0' })
  t.ok(post.bytesIn >= 3)
  await closed(session)
})

t.test('back-pressure: a client that does not read holds the backend; a backend that does not read holds the client', async t => {
  const SIZE = 64 * MiB
  let written = 0
  let blocked = false
  const big = await httpBackend(t, 'big', (req, res) => {
    res.setHeader('Content-Length', SIZE)
    const block = Buffer.alloc(MiB, 'x')
    const write = () => {
      blocked = false
      while (written < SIZE) {
        written += block.length
        if (!res.write(block)) {
          blocked = true
          return res.once('drain', write)
        }
      }
      res.end()
    }
    write()
  })
  const lila = await startLila(t, ['rr', big.address, ...HTTP])
  const session = await h2connect(t, lila.port)
  let stream
  let received = 0
  const done = h2request(session, {
    onStream: s => {
      stream = s
      s.on('data', chunk => { received += chunk.length })
      s.pause()
    }
  })
  // The backend stops being able to write: the same count, blocked, a few polls running.
  let last = -1
  let steady = 0
  await until(() => {
    steady = blocked && written === last ? steady + 1 : 0
    last = written
    return steady >= 10
  }, 'the backend to be held by back-pressure', { timeout: 10000, every: 20 })
  t.ok(written < 24 * MiB, `the backend could write only ${written / MiB} MiB of 64 before the paused stream held it`)
  stream.resume()
  const res = await done
  t.equal(res.status, 200)
  t.equal(received, SIZE, 'then all of it arrived')

  // Upload to a backend that does not read: lila stops reading the stream, and HTTP/2
  // flow control stops the client.
  let reqStream = null
  const sink = await httpBackend(t, 'sink', req => { reqStream = req; req.pause() })
  const lila2 = await startLila(t, ['rr', sink.address, ...HTTP])
  const s2 = await h2connect(t, lila2.port)
  let sent = 0
  let waiting = false
  const upload = s2.request({ ':method': 'POST', ':path': '/up' })
  upload.on('error', () => {})
  const block = Buffer.alloc(256 * 1024, 'y')
  const pump = () => {
    waiting = false
    while (sent < 256 * MiB) {
      sent += block.length
      if (!upload.write(block)) {
        waiting = true
        return upload.once('drain', pump)
      }
    }
  }
  pump()
  last = -1
  steady = 0
  await until(() => {
    steady = waiting && sent === last ? steady + 1 : 0
    last = sent
    return steady >= 10
  }, 'the client to be held by flow control', { timeout: 10000, every: 20 })
  t.ok(reqStream !== null, 'the request reached the backend')
  t.ok(sent < 32 * MiB, `the client could send only ${sent / MiB} MiB before lila stopped taking it`)
  upload.close(constants.NGHTTP2_CANCEL)
  await closed(session)
  await closed(s2)
  await settles(t, lila)
  await settles(t, lila2)
})

t.test('over TLS, ALPN: h2 for HTTP/2 clients, http/1.1 for the others, on one port', async t => {
  const { certDir, makeCertificate } = require('./fixtures/certs')
  const cert = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const backend = await httpBackend(t, 'tls')
  const lila = await startLila(t, ['rr', backend.address, ...HTTP, '--tls-cert', cert.cert, '--tls-key', cert.key])
  const session = await h2connect(t, lila.port, { ca: cert.pem })
  t.equal(session.alpnProtocol, 'h2', 'ALPN chose h2')
  const res = await h2request(session, { path: '/secure' })
  t.equal(res.status, 200)
  t.equal(served(res), 'tls')
  t.equal(backend.last.headers['x-forwarded-proto'], 'https')
  t.match(backend.last.headers.via, /^2\.0 lila-/)
  const https = require('https')
  const h1 = await new Promise((resolve, reject) => {
    https.get({ host: '127.0.0.1', port: lila.port, ca: cert.pem, path: '/old', ALPNProtocols: ['http/1.1'], agent: false }, res => {
      let body = ''
      const alpn = res.socket.alpnProtocol
      res.on('data', d => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body, alpn, version: res.httpVersion }))
    }).on('error', reject)
  })
  t.same(h1, { status: 200, body: 'tls\n', alpn: 'http/1.1', version: '1.1' }, 'an HTTP/1.1 client over TLS')
  await closed(session)
  await settles(t, lila)
})

t.test('uri-hash keys each stream on its path', async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => httpBackend(t, name)))
  const lila = await startLila(t, ['uri-hash', ...backends.map(b => b.address), ...HTTP])
  const session = await h2connect(t, lila.port)
  const owner = new Map()
  let moved = 0
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 20; i++) {
      const res = await h2request(session, { path: `/item/${i}?round=${round}` })
      const name = served(res)
      if (owner.has(i) && owner.get(i) !== name) moved++
      owner.set(i, name)
    }
  }
  t.equal(moved, 0, 'every path to the same backend every time')
  t.ok(new Set(owner.values()).size > 1, 'paths spread over backends')
  await closed(session)
})

t.test('graceful close: an in-flight stream finishes; --idle-timeout closes an idle HTTP/2 connection', async t => {
  let release
  const backend = await httpBackend(t, 'g', (req, res) => {
    if (req.url === '/slow') release = () => res.end('slow done')
    else res.end('quick')
  })
  const lila = await startLila(t, ['rr', backend.address, ...HTTP, '--idle-timeout', '300ms'])
  const session = await h2connect(t, lila.port)
  const goaway = new Promise(resolve => session.once('goaway', resolve))
  const slow = h2request(session, { path: '/slow' })
  await until(() => release !== undefined, 'the slow request to reach the backend')
  const closing = lila.lb.close(5000)
  await within(5000, 'a GOAWAY', goaway)
  release()
  const res = await slow
  t.equal(res.status, 200)
  t.equal(res.body.toString(), 'slow done', 'the in-flight stream finished')
  await within(5000, 'the balancer to close', closing)

  const lila2 = await startLila(t, ['rr', backend.address, ...HTTP, '--idle-timeout', '300ms'])
  const idle = await h2connect(t, lila2.port)
  t.equal((await h2request(idle)).status, 200)
  await within(5000, 'the idle connection to be closed', new Promise(resolve => idle.once('close', resolve)))
  t.pass('closed by lila after --idle-timeout')
  await settles(t, lila2)
})

t.test('a backend that answers before the body is all sent: the client gets the whole answer, the rest of its body is dropped', async t => {
  const backend = await httpBackend(t, 'early', (req, res) => {
    res.writeHead(413, { 'Content-Type': 'text/plain' })
    res.end('too large')
  })
  const lila = await startLila(t, ['rr', backend.address, ...HTTP])
  const session = await h2connect(t, lila.port)
  const chunk = Buffer.alloc(64 * 1024)
  const res = await h2request(session, {
    method: 'POST',
    path: '/upload',
    endStream: false,
    onStream: stream => {
      let n = 0
      const pump = () => {
        while (n < 64) {
          n++
          if (!stream.write(chunk)) return stream.once('drain', pump)
        }
        stream.end()
      }
      pump()
    }
  })
  t.equal(res.status, 413)
  t.equal(res.body.toString(), 'too large', 'the whole answer arrived')
  t.equal(res.rstCode, constants.NGHTTP2_NO_ERROR)
  await closed(session)
  await settles(t, lila)
})

t.test('--accept-proxy: the PROXY header, then HTTP/2 by prior knowledge; the client address is the header\'s', async t => {
  const backend = await httpBackend(t, 'p')
  const lila = await startLila(t, ['rr', backend.address, ...HTTP, '--accept-proxy'])
  const session = require('http2').connect(`http://127.0.0.1:${lila.port}`, {
    createConnection: () => {
      const socket = net.connect(lila.port, '127.0.0.1')
      socket.write('PROXY TCP4 192.0.2.7 127.0.0.1 5555 80\r\n')
      return socket
    }
  })
  session.on('error', () => {})
  t.teardown(() => session.destroy())
  const res = await h2request(session)
  t.equal(res.status, 200)
  t.equal(backend.last.headers['x-forwarded-for'], '192.0.2.7')
  await closed(session)
  await settles(t, lila)
})
