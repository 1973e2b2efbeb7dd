'use strict'

// The OTLP exporter's POSTs (lib/telemetry/post.js) against real servers on loopback:
// Node's http server (keep-alive, the body whole, the fields given), and hand-written
// answers for what a collector or a proxy before it may send: chunks with trailers, a
// 100 Continue first, a body to the connection's end, Retry-After, an idle connection
// the server closed, silence, nobody listening.

const t = require('tap')
const { tcpBackend, deadPort, listenOn } = require('./fixtures/helpers')
const { PostConnection } = require('../lib/telemetry/post')
const { recordingBackend } = require('./fixtures/recording')

const post = (t, port, { headers = { 'content-type': 'application/x-protobuf' }, timeout = 5000, path = '/v1/traces' } = {}) => {
  const conn = new PostConnection(new URL(`http://127.0.0.1:${port}${path}`), { headers, timeout })
  t.teardown(() => conn.close())
  return conn
}

// A server of raw frames: each request's head and body read (by Content-Length), then
// `answer(socket, n)` for the n-th request on any connection.
async function rawServer (t, answer) {
  let n = 0
  return tcpBackend(t, 'raw', socket => {
    let buf = Buffer.alloc(0)
    socket.on('data', chunk => {
      buf = Buffer.concat([buf, chunk])
      for (;;) {
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0) return
        const length = Number(/content-length: (\d+)/i.exec(buf.toString('latin1', 0, end))[1])
        if (buf.length < end + 4 + length) return
        buf = buf.subarray(end + 4 + length)
        answer(socket, ++n)
      }
    })
  })
}

t.test('Node\'s http server: POSTs on one kept-alive connection, the body whole, the fields given', async t => {
  const backend = await recordingBackend(t)
  const seen = backend.requests
  const conn = post(t, backend.port, { headers: { 'content-type': 'application/x-protobuf', 'x-api-key': 'k1', host: 'evil' } })
  const body = Buffer.alloc(300000, 7)
  for (let i = 0; i < 3; i++) t.same(await conn.post(body), { status: 200, error: null, retryAfter: -1, keep: true })
  t.equal(seen.length, 3)
  t.ok(seen.every(s => s.body.equals(body)), 'each body whole (300 KB)')
  t.equal(new Set(seen.map(s => s.socket)).size, 1, 'one connection for the three')
  const { headers, method, url } = seen[0]
  t.same([method, url], ['POST', '/v1/traces'])
  t.equal(headers['x-api-key'], 'k1', 'the fields given')
  t.equal(headers['content-type'], 'application/x-protobuf')
  t.equal(headers.host, `127.0.0.1:${backend.port}`, 'a Host of its own, never one given')
})

t.test('answers framed every way: chunks and trailers, a 100 first, to the end of the connection', async t => {
  const server = await rawServer(t, (socket, n) => {
    if (n === 1) socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n')
    else if (n === 2) socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok')
    else if (n === 3) socket.end('HTTP/1.0 200 OK\r\n\r\nto the end')
    else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')
  })
  const conn = post(t, server.port)
  t.same(await conn.post(Buffer.from('a')), { status: 200, error: null, retryAfter: -1, keep: true }, 'chunked, with trailers')
  t.same(await conn.post(Buffer.from('b')), { status: 202, error: null, retryAfter: -1, keep: true }, '100 Continue skipped')
  t.same(await conn.post(Buffer.from('c')), { status: 200, error: null, retryAfter: -1, keep: false }, 'a body to the end')
  t.same(await conn.post(Buffer.from('d')), { status: 200, error: null, retryAfter: -1, keep: true }, 'then a new connection')
  t.equal(server.connections, 2, 'the connection that ended, and a new one')
})

t.test('a 503 says its Retry-After; a 429 with a date; the connection kept', async t => {
  const server = await rawServer(t, (socket, n) => {
    if (n === 1) socket.write('HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Length: 4\r\n\r\nbusy')
    else socket.write(`HTTP/1.1 429 Too Many\r\nRetry-After: ${new Date(Date.now() + 60000).toUTCString()}\r\nContent-Length: 0\r\n\r\n`)
  })
  const conn = post(t, server.port)
  t.same(await conn.post(Buffer.from('a')), { status: 503, error: null, retryAfter: 2000, keep: true })
  const later = await conn.post(Buffer.from('b'))
  t.equal(later.status, 429)
  t.ok(later.retryAfter > 50000 && later.retryAfter <= 60000, `an HTTP date: ${later.retryAfter} ms`)
  t.equal(server.connections, 1)
})

t.test('a kept connection the server closed while idle: the POST goes on a fresh one', async t => {
  const server = await rawServer(t, socket => {
    socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')
    socket.destroy() // without saying Connection: close
  })
  const conn = post(t, server.port)
  t.equal((await conn.post(Buffer.from('a'))).status, 200)
  t.equal((await conn.post(Buffer.from('b'))).status, 200, 'answered all the same')
  t.equal(server.connections, 2)
})

t.test('no answer: a timeout, a connection refused, a connection closed without an answer, garbage', async t => {
  const silent = await rawServer(t, () => {})
  t.same(await post(t, silent.port, { timeout: 200 }).post(Buffer.from('a')),
    { status: 0, error: 'no answer within 200 ms', retryAfter: -1, keep: false })
  const refused = await post(t, await deadPort()).post(Buffer.from('a'))
  t.same([refused.status, refused.error], [0, 'ECONNREFUSED'])
  const closing = await rawServer(t, socket => socket.destroy())
  t.same((await post(t, closing.port).post(Buffer.from('a'))).error, 'the connection closed without an answer')
  const garbage = await rawServer(t, socket => socket.write('SSH-2.0-OpenSSH\r\n\r\n'))
  t.same((await post(t, garbage.port).post(Buffer.from('a'))).error, 'an answer that is not HTTP/1.1')
  const cut = await rawServer(t, socket => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'))
  t.same((await post(t, cut.port).post(Buffer.from('a'))).error, 'the connection closed within the answer')
})

t.test('https: the collector\'s certificate checked against the CAs (NODE_EXTRA_CA_CERTS), by its name', async t => {
  const https = require('https')
  const fs = require('fs')
  const path = require('path')
  const { execFile } = require('child_process')
  const { certDir, makeCertificate } = require('./fixtures/certs')
  const dir = certDir(t)
  const { cert, key } = makeCertificate(dir, 'collector.test', ['DNS:localhost', 'IP:127.0.0.1'])
  let bodies = 0
  const server = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (req, res) => {
    req.resume()
    req.on('end', () => { bodies++; res.end('ok') })
  })
  await listenOn(t, server)
  const script = `const { PostConnection } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'telemetry', 'post.js'))})
const conn = new PostConnection(new URL(process.argv[1]), { headers: {}, timeout: 5000 })
conn.post(Buffer.from('x')).then(r => { console.log(JSON.stringify(r)); conn.close() })`
  const run = (url, env) => new Promise(resolve =>
    execFile(process.execPath, ['-e', script, url], { env: { ...process.env, ...env } }, (err, stdout) => resolve(err ? err.message : JSON.parse(stdout))))
  const port = server.address().port
  t.same(await run(`https://localhost:${port}/v1/traces`, { NODE_EXTRA_CA_CERTS: cert }),
    { status: 200, error: null, retryAfter: -1, keep: true }, 'trusted: answered')
  const untrusted = await run(`https://localhost:${port}/v1/traces`, { NODE_EXTRA_CA_CERTS: '' })
  t.same([untrusted.status, untrusted.error], [0, 'DEPTH_ZERO_SELF_SIGNED_CERT'], 'untrusted: refused, never sent')
  t.equal(bodies, 1, 'the one trusted POST reached the collector')
})

t.test('an answer before the payload went whole: the connection is not used again', async t => {
  const early = await tcpBackend(t, 'early', socket => {
    socket.once('data', () => {
      socket.pause() // reads no more of it
      socket.write('HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\n\r\n')
    })
  })
  const conn = post(t, early.port, { timeout: 2000 })
  const first = await conn.post(Buffer.alloc(8 * 1024 * 1024, 1)) // more than the socket buffers hold
  t.same([first.status, first.keep], [413, false], 'the refusal, and the connection dropped')
  t.equal(conn.socket, null, 'not kept')
})
