'use strict'

// Per-client limits (lib/proxy/client-limits.js, issue 13): --rate-limit, a token bucket
// per client address, and --max-conn-per-client. The limiter on its own with a fake
// clock (memory bounded with a million addresses), then the real executable with clients
// from 127.0.0.1 and 127.0.0.2.

const t = require('tap')
const net = require('net')
const http = require('http')
const { RateLimiter, ConnectionCounter } = require('../lib/proxy/client-limits')
const { PARSERS } = require('../lib/config/parsers')
const { spawnLila, httpBackend, tcpBackend, statusJson, request, within, until } = require('./fixtures/helpers')

t.test('the token bucket: a burst, then the rate; Retry-After in whole seconds', async t => {
  let now = 0
  const limiter = new RateLimiter({ rate: 2, burst: 3, now: () => now })
  t.same([1, 2, 3, 4].map(() => limiter.take('a')), [0, 0, 0, 1], 'three at once, the fourth waits')
  t.equal(limiter.take('b'), 0, 'another address has its own bucket')
  now += 500 // one token back
  t.equal(limiter.take('a'), 0)
  t.equal(limiter.take('a'), 1)
  now += 10000
  t.same([1, 2, 3, 4].map(() => limiter.take('a')), [0, 0, 0, 1], 'full again after a rest, never more than the burst')
  const slow = new RateLimiter({ rate: 1 / 60, burst: 1, now: () => now })
  t.equal(slow.take('a'), 0)
  t.equal(slow.take('a'), 60, '1/m: a minute to wait')
})

t.test('a million addresses: memory stays bounded, state is kept while it matters', async t => {
  let now = 0
  const limiter = new RateLimiter({ rate: 10, burst: 10, now: () => now })
  for (let i = 0; i < 1e6; i++) {
    limiter.take(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
    if (i % 1000 === 999) now += 1 // a million addresses over 1,000 ms
  }
  t.ok(limiter.size <= 1e6)
  now += 2000
  limiter.take('192.0.2.1')
  t.ok(limiter.size <= 2, `two spans later only the new address is kept (size ${limiter.size})`)
  // An address still short of tokens keeps its bucket across a rotation.
  for (let i = 0; i < 10; i++) limiter.take('203.0.113.9')
  now += 1000 // a rotation: its bucket moves to the previous generation
  limiter.take('192.0.2.2')
  t.equal(limiter.take('203.0.113.9'), 0, 'ten tokens came back in a second')
  t.ok(limiter.size <= 3)
})

t.test('connections per address: counted while open, forgotten at zero', async t => {
  const counter = new ConnectionCounter(2)
  t.ok(counter.open('a'))
  t.ok(counter.open('a'))
  t.notOk(counter.open('a'), 'a third is refused')
  t.ok(counter.open('b'))
  counter.close('a')
  t.ok(counter.open('a'), 'one closed, one more allowed')
  for (const address of ['a', 'a', 'b']) counter.close(address)
  t.equal(counter.size, 0, 'nothing kept for addresses with no connection')
})

t.test('connections per address: a reload\'s new max keeps the counts', async t => {
  const counter = new ConnectionCounter(3)
  for (let i = 0; i < 3; i++) t.ok(counter.open('a'))
  counter.setMax(2)
  t.notOk(counter.open('a'), 'three held, two allowed now: refused')
  counter.close('a')
  t.notOk(counter.open('a'), 'still two held')
  counter.setMax(4)
  t.ok(counter.open('a'), 'room again under the larger max')
  t.equal(counter.max, 4)
})

t.test('--rate-limit: one line naming the bad value', async t => {
  t.same(PARSERS.rate('10/s', '--rate-limit'), { rate: 10, burst: 10 })
  t.same(PARSERS.rate('600/m,burst=50', '--rate-limit'), { rate: 10, burst: 50 })
  t.same(PARSERS.rate('1/m', '--rate-limit'), { rate: 1 / 60, burst: 1 })
  for (const bad of ['10', '10/h', '0/s', '-1/s', '10/s,burst=0', '10/s,burst=x', 'fast']) {
    t.throws(() => PARSERS.rate(bad, '--rate-limit'),
      { message: `invalid rate "${bad}" for --rate-limit: expected requests per second or minute, e.g. 10/s, 600/m or 10/s,burst=50` })
  }
})

// A GET from `localAddress`: resolves { status, retryAfter }.
function getFrom (port, localAddress, agent = false) {
  return new Promise(resolve => {
    http.get({ host: '127.0.0.1', port, localAddress, path: '/', agent }, res => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'] }))
    }).on('error', error => resolve({ error: error.code }))
  })
}

t.test('http: 429 with Retry-After for one address while another is served', async t => {
  const backend = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--rate-limit', '1/m,burst=3'])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const first = []
  for (let i = 0; i < 5; i++) first.push(await getFrom(lila.port, '127.0.0.1', agent))
  t.same(first.map(r => r.status), [200, 200, 200, 429, 429], 'a burst of three, then 429')
  t.equal(first[3].retryAfter, '60', 'Retry-After: when the next token comes')
  t.equal((await getFrom(lila.port, '127.0.0.2')).status, 200, '127.0.0.2 is served meanwhile')
  t.equal(backend.requests, 4, 'the 429s never reached the backend')
  const status = await statusJson(lila)
  t.same(status.listeners[0].limited, { 'max-conn-per-client': 0, 'rate-limit': 2 })
  t.match(status.listeners[0].responses, { '4xx': 2 })
  const metrics = String((await request(lila.statusPort, { path: '/metrics' })).body)
  t.match(metrics, /^lila_listener_limited_total\{listener="[^"]+",limit="rate-limit"\} 2$/m)
  t.match(metrics, /^lila_listener_limit_tracked_addresses\{listener="[^"]+"\} 2$/m)
})

t.test('--max-conn-per-client: tcp closes the extra connection at once; http answers 429', async t => {
  const echo = await tcpBackend(t, 'echo', socket => {
    socket.resume()
    socket.on('end', () => socket.end())
  })
  const tcp = await spawnLila(t, ['rr', echo.address, '--port', '0', '--host', '127.0.0.1', '--status-port', '0',
    '--check', 'none', '--max-conn-per-client', '2'])
  const open = localAddress => {
    const socket = net.connect({ port: tcp.port, host: '127.0.0.1', localAddress })
    socket.on('error', () => {})
    socket.gone = new Promise(resolve => socket.once('close', resolve))
    return socket
  }
  const held = [open('127.0.0.1'), open('127.0.0.1')]
  t.teardown(() => { for (const s of held) s.destroy() })
  await until(() => echo.connections === 2, 'two connections to reach the backend')
  const third = open('127.0.0.1')
  await within(5000, 'the third connection to be closed', third.gone)
  const other = open('127.0.0.2')
  held.push(other)
  await until(() => echo.connections === 3, '127.0.0.2 to be served')
  t.equal((await statusJson(tcp)).listeners[0].limited['max-conn-per-client'], 1)
  held[0].destroy()
  // The backend can see its side close before lila has counted the client's close, so
  // the slot is free once lila's own count says so, not when the backend does.
  await until(async () => (await statusJson(tcp)).listeners[0].active === 2, 'lila to count the close')
    .catch(() => {}) // asserted below
  t.equal((await statusJson(tcp)).listeners[0].active, 2, 'lila counts the closed connection out')
  const again = open('127.0.0.1')
  held.push(again)
  await until(() => echo.connections === 4, 'a slot freed: 127.0.0.1 is served again')
  t.pass('served again once it holds fewer')

  const backend = await httpBackend(t, 'b')
  const web = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--max-conn-per-client', '1'])
  const idle = net.connect(web.port, '127.0.0.1')
  idle.on('error', () => {})
  t.teardown(() => idle.destroy())
  await new Promise(resolve => idle.once('connect', resolve))
  await until(async () => (await statusJson(web)).listeners[0].active === 1, 'lila to count the idle connection', { every: 20 })
  const refused = await getFrom(web.port, '127.0.0.1')
  t.equal(refused.status, 429, 'a second connection from the same address: 429')
  t.equal((await getFrom(web.port, '127.0.0.2')).status, 200, 'another address is served')
})

t.test('HTTP/2: each stream is a request for --rate-limit; 429 with retry-after', async t => {
  const http2 = require('http2')
  const backend = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--check', 'none', '--rate-limit', '1/m,burst=2'])
  const session = http2.connect(`http://127.0.0.1:${lila.port}`)
  t.teardown(() => session.close())
  const get = () => new Promise(resolve => {
    const stream = session.request({ ':path': '/' })
    let headers = null
    stream.on('response', h => { headers = h })
    stream.resume()
    stream.on('end', () => resolve(headers))
    stream.on('error', error => resolve({ error }))
  })
  const answers = []
  for (let i = 0; i < 3; i++) answers.push(await within(5000, 'an HTTP/2 answer', get()))
  t.same(answers.map(h => h[':status']), [200, 200, 429], 'two streams, then 429')
  t.equal(answers[2]['retry-after'], '60')
  t.equal(backend.requests, 2)
})

t.test('with --accept-proxy, the limit is on the address the PROXY header gives', async t => {
  const backend = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--accept-proxy', '--rate-limit', '1/m,burst=1'])
  // One request on a fresh connection that claims to come from `source` (PROXY v1).
  const from = source => within(5000, `a request from ${source}`, new Promise((resolve, reject) => {
    const socket = net.connect(lila.port, '127.0.0.1')
    let data = ''
    socket.on('data', chunk => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve(Number(data.split(' ')[1])))
    socket.end(`PROXY TCP4 ${source} 127.0.0.1 40000 80\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
  }))
  t.equal(await from('127.0.0.5'), 200)
  t.equal(await from('127.0.0.5'), 429, 'the same claimed address is over its limit')
  t.equal(await from('127.0.0.6'), 200, 'another claimed address is served: the TCP peer (127.0.0.1 for all) is not what counts')
})

// Over TLS the codec is chosen by ALPN before any runs: a client that agreed on h2 and
// is turned away hears it in HTTP/2 (it used to be written an HTTP/1.1 429).
t.test('--max-conn-per-client: an HTTP/2 client over TLS gets GOAWAY ENHANCE_YOUR_CALM', async t => {
  const http2 = require('http2')
  const tls = require('tls')
  const { certDir, makeCertificate } = require('./fixtures/certs')
  const { cert, key, pem } = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const backend = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--max-conn-per-client', '1', '--tls-cert', cert, '--tls-key', key])
  const held = tls.connect({ port: lila.port, host: '127.0.0.1', ca: pem, servername: 'localhost', ALPNProtocols: ['h2'] })
  held.on('error', () => {})
  t.teardown(() => held.destroy())
  await within(5000, 'the first connection\'s handshake', new Promise(resolve => held.once('secureConnect', resolve)))
  t.equal(held.alpnProtocol, 'h2')
  await until(async () => (await statusJson(lila)).listeners[0].active === 1, 'lila to count the first connection', { every: 20 })
  const session = http2.connect(`https://127.0.0.1:${lila.port}`, { ca: pem, servername: 'localhost' })
  session.on('error', () => {})
  t.teardown(() => session.destroy())
  const [code, lastStreamID, debug] = await within(5000, 'a GOAWAY', new Promise(resolve => {
    session.once('goaway', (...args) => resolve(args))
  }))
  t.equal(code, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, 'ENHANCE_YOUR_CALM')
  t.equal(lastStreamID, 0, 'no stream taken')
  t.match(String(debug), /max-conn-per-client|connections/, `the reason as debug data: ${debug}`)
  t.equal((await statusJson(lila)).listeners[0].limited['max-conn-per-client'], 1, 'counted')
})
