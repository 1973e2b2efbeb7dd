'use strict'

// HTTP/2 through lila with real clients: curl (--http2-prior-knowledge in the clear,
// --http2 over TLS by ALPN) and h2load (nghttp2's load tool) for many concurrent
// streams on several connections: spread over the backends, a dead backend's streams
// retried elsewhere, HTTP/1.1 served on the same port meanwhile, and every live count
// back to zero. Each skips, saying so, when its tool is missing.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { spawnSync } = require('child_process')
const { httpBackend, request, startLila, deadPort, until, isSettled, curl } = require('./fixtures/helpers')
const { h2load } = require('./fixtures/h2')
const { tool } = require('./fixtures/tools')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { tmpDir } = require('./fixtures/tmp')

const HTTP = ['--protocol', 'http']
const CURL_HTTP2 = /\bHTTP2\b/.test(spawnSync('curl', ['--version'], { encoding: 'utf8' }).stdout || '')
const noCurl = CURL_HTTP2 ? false : 'curl with HTTP/2 support is not installed'
const noH2load = tool('h2load').skip

async function settles (t, lila) {
  await until(() => isSettled({ listeners: [lila.stats()] }), 'live counts to return to zero').catch(err => {
    t.comment(JSON.stringify(lila.stats(), null, 1))
    throw err
  })
  t.pass('every live count is back to zero')
}

t.test('curl --http2-prior-knowledge in the clear, curl --http2 over TLS (ALPN), and HTTP/1.1 beside them', { skip: noCurl }, async t => {
  const backend = await httpBackend(t, 'curled', (req, res) => {
    let size = 0
    req.on('data', chunk => { size += chunk.length })
    req.on('end', () => res.end(`${req.method} ${req.url} ${size} ${req.headers['x-forwarded-proto']}\n`))
  })
  const cert = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const clear = await startLila(t, ['rr', backend.address, ...HTTP])
  const secure = await startLila(t, ['rr', backend.address, ...HTTP, '--tls-cert', cert.cert, '--tls-key', cert.key])
  const W = ['-w', '|%{http_version} %{http_code}']

  let res = await curl(['--http2-prior-knowledge', ...W, `http://127.0.0.1:${clear.port}/a?b=1`])
  t.equal(res.stdout, 'GET /a?b=1 0 http\n|2 200', 'h2c by prior knowledge')
  res = await curl(['--http2-prior-knowledge', ...W, '--data-binary', 'hello', `http://127.0.0.1:${clear.port}/post`])
  t.equal(res.stdout, 'POST /post 5 http\n|2 200', 'h2c with a body')
  res = await curl([...W, `http://127.0.0.1:${clear.port}/old`])
  t.equal(res.stdout, 'GET /old 0 http\n|1.1 200', 'HTTP/1.1 on the same port')

  res = await curl(['--http2', '--cacert', cert.cert, ...W, `https://127.0.0.1:${secure.port}/tls`])
  t.equal(res.stdout, 'GET /tls 0 https\n|2 200', 'h2 over TLS, agreed by ALPN')
  res = await curl(['--http1.1', '--cacert', cert.cert, ...W, `https://127.0.0.1:${secure.port}/tls1`])
  t.equal(res.stdout, 'GET /tls1 0 https\n|1.1 200', 'HTTP/1.1 over TLS on the same port')

  // No backend: curl gets lila's 502 as an HTTP/2 response, not "Empty reply".
  const none = await startLila(t, ['rr', `127.0.0.1:${await deadPort()}`, ...HTTP, '--retries', '0'])
  res = await curl(['--http2-prior-knowledge', ...W, `http://127.0.0.1:${none.port}/`])
  t.match(res.stdout, /^502 Bad Gateway: backend 127\.0\.0\.1:\d+ connection refused\n\|2 502$/)
  t.equal(res.code, 0)
  await settles(t, clear)
  await settles(t, secure)
  await settles(t, none)
})

t.test('h2load: 600 streams, 20 at a time on each of 6 connections, in turn over three backends', { skip: noH2load }, async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => httpBackend(t, name)))
  const lila = await startLila(t, ['rr', ...backends.map(b => b.address), ...HTTP])
  const load = h2load(['-n', '600', '-c', '6', '-m', '20', `http://127.0.0.1:${lila.port}/load`])
  // HTTP/1.1 on the same port while it runs.
  const h1 = await Promise.all(Array.from({ length: 5 }, () => request(lila.port, { path: '/h1' })))
  const res = await load
  t.equal(res.succeeded, 600, `h2load: ${res.succeeded} succeeded, ${res.failed} failed, ${res.errored} errored`)
  t.equal(res.statuses['2xx'], 600)
  t.same(h1.map(r => r.status), [200, 200, 200, 200, 200], 'HTTP/1.1 served meanwhile')
  // The HTTP/1.1 requests take their turns too, so it is the 605 in all that alternate:
  // strict turns leave no backend more than one request ahead of another.
  const served = backends.map(b => b.seen.filter(url => url === '/load' || url === '/h1').length)
  t.equal(served.reduce((a, b) => a + b, 0), 605)
  t.ok(Math.max(...served) - Math.min(...served) <= 1, `streams and requests in turn over the backends: ${served.join('/')}`)
  const stats = lila.stats()
  t.equal(stats.responses['2xx'], 605)
  t.equal(stats.accepted, 11, 'six HTTP/2 connections and five HTTP/1.1 ones')
  await settles(t, lila)
})

t.test('h2load with a dead backend: its streams are retried on the others, every one served', { skip: noH2load }, async t => {
  const backends = await Promise.all(['a', 'b'].map(name => httpBackend(t, name)))
  const dead = `127.0.0.1:${await deadPort()}`
  const lila = await startLila(t, ['rr', backends[0].address, dead, backends[1].address, ...HTTP])
  const res = await h2load(['-n', '400', '-c', '4', '-m', '25', `http://127.0.0.1:${lila.port}/`])
  t.equal(res.succeeded, 400, `h2load: ${res.succeeded} succeeded, ${res.failed} failed, ${res.errored} errored`)
  t.equal(res.statuses['2xx'], 400)
  t.equal(backends[0].requests + backends[1].requests, 400)
  t.ok(backends[0].requests > 100 && backends[1].requests > 100, `spread: ${backends.map(b => b.requests).join('/')}`)
  const deadStats = lila.stats().backends[1]
  t.ok(deadStats.failures >= 1, `the dead backend's failures counted (${deadStats.failures})`)
  t.same(deadStats.responses, { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 }, 'it answered nothing')
  await settles(t, lila)
})

t.test('h2load over TLS (ALPN h2), and uploads larger than the first flow-control window', { skip: noH2load }, async t => {
  const cert = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  let bytes = 0
  const backends = await Promise.all(['a', 'b'].map(name => httpBackend(t, name, (req, res, b) => {
    req.on('data', chunk => { bytes += chunk.length })
    req.on('end', () => res.end(`${b.name}\n`))
  })))
  const lila = await startLila(t, ['rr', ...backends.map(b => b.address), ...HTTP, '--tls-cert', cert.cert, '--tls-key', cert.key])
  const secure = await h2load(['-n', '200', '-c', '4', '-m', '10', `https://127.0.0.1:${lila.port}/`])
  t.match(secure.stdout, /Application protocol: h2/, 'h2 agreed by ALPN')
  t.equal(secure.statuses['2xx'], 200, `h2load over TLS: ${secure.succeeded} succeeded`)
  t.same(backends.map(b => b.requests), [100, 100])

  const dir = tmpDir(t, 'lila-h2-')
  const file = path.join(dir, 'body')
  fs.writeFileSync(file, crypto.randomBytes(200 * 1024))
  const clear = await startLila(t, ['rr', ...backends.map(b => b.address), ...HTTP])
  const upload = await h2load(['-n', '40', '-c', '4', '-m', '10', '-d', file, `http://127.0.0.1:${clear.port}/up`])
  t.equal(upload.statuses['2xx'], 40, `40 uploads of 200 KiB: ${upload.succeeded} succeeded`)
  t.equal(bytes, 40 * 200 * 1024, 'every byte reached a backend')
  await settles(t, lila)
  await settles(t, clear)
})
