'use strict'

// HTTP mode when backends fail: each failure gets the right answer, and nothing is
// replayed that must not be. Through the real `lila` executable.

const t = require('tap')
const http = require('http')
const net = require('net')
const { httpBackend, request, spawnLila, blackhole, within, tcpBackend, captureLog, until, startLila } = require('./fixtures/helpers')

const base = ['--protocol', 'http', '--host', '127.0.0.1', '--port', '0']

// A backend that reads a request head (and what follows in the same packet), then
// closes without a word.
function hangUpBackend (t) {
  return tcpBackend(t, 'hangup', socket => socket.once('data', () => socket.destroy()))
}

t.test('no backend available: 503 with Retry-After and a reason', async t => {
  const backend = await httpBackend(t, 'zero')
  const lila = await spawnLila(t, ['rr', `${backend.address},weight=0`, ...base])
  const res = await request(lila.port)
  t.equal(res.status, 503)
  t.equal(res.headers['retry-after'], '5')
  t.equal(res.headers['content-type'], 'text/plain; charset=utf-8')
  t.equal(res.body.toString(), '503 Service Unavailable: no backend available\n')
  t.equal(backend.requests, 0)
})

t.test('a GET whose backend hangs up without answering is retried on another', async t => {
  const bad = await hangUpBackend(t)
  const good = await httpBackend(t, 'good')
  const lila = await spawnLila(t, ['rr', bad.address, good.address, ...base])
  for (let i = 0; i < 6; i++) {
    const res = await request(lila.port)
    t.equal(res.status, 200, `request ${i + 1}`)
    t.equal(res.body.toString(), 'good\n')
  }
  t.ok(bad.connections >= 1, 'the bad backend was tried')
  t.equal(good.requests, 6)
})

t.test('a POST whose body was sent is never replayed: 502, and the other backend sees nothing', async t => {
  const bad = await hangUpBackend(t)
  const other = await httpBackend(t, 'other')
  const lila = await spawnLila(t, ['rr', bad.address, other.address, ...base])
  const res = await request(lila.port, { method: 'POST', body: 'pay once', headers: { 'Content-Length': 8 } })
  t.equal(res.status, 502)
  t.match(res.body.toString(), new RegExp(`^502 Bad Gateway: backend ${bad.address} closed the connection without answering\\n$`))
  t.equal(other.requests, 0, 'not replayed')
  await lila.waitForLine(new RegExp(`502 for POST / from 127\\.0\\.0\\.1: backend ${bad.address} closed`))
})

t.test('a POST whose connect failed is sent elsewhere: its body never left', async t => {
  const silent = await blackhole(t)
  const good = await httpBackend(t, 'good', (req, res) => {
    let body = ''
    req.on('data', c => { body += c })
    req.on('end', () => res.end(`got ${body}`))
  })
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${silent}`, good.address, ...base, '--connect-timeout', '150ms'])
  for (let i = 0; i < 4; i++) {
    const res = await request(lila.port, { method: 'POST', body: `n${i}`, headers: { 'Content-Length': 2 } })
    t.equal(res.body.toString(), `got n${i}`)
  }
  t.equal(good.requests, 4)
})

t.test('a backend slower than --timeout: 504', async t => {
  const slow = await httpBackend(t, 'slow', () => {}) // never answers
  const lila = await spawnLila(t, ['rr', slow.address, ...base, '--timeout', '200ms'])
  const res = await request(lila.port)
  t.equal(res.status, 504)
  t.equal(res.body.toString(), `504 Gateway Timeout: backend ${slow.address} timed out\n`)
  t.equal(slow.requests, 1, 'a slow backend is not hit again by a retry')
})

t.test('a backend dying mid-response: the client\'s response is cut, lila carries on', async t => {
  const backend = await httpBackend(t, 'dies', (req, res) => {
    if (req.url !== '/die') return res.end('fine')
    res.setHeader('Content-Length', '1000')
    res.write('x'.repeat(100))
    setImmediate(() => res.socket.destroy())
  })
  const lila = await spawnLila(t, ['rr', backend.address, ...base])
  const cut = await request(lila.port, { path: '/die' })
  t.ok(cut.error, `the client saw the cut (${cut.error && cut.error.message})`)
  const next = await request(lila.port)
  t.equal(next.status, 200)
  t.equal(next.body.toString(), 'fine')
  await lila.waitForLine(/GET \/die from 127\.0\.0\.1: backend 127\.0\.0\.1:\d+ closed the connection mid-response; response cut/)
})

t.test('a 1 KiB garbage response: 502', async t => {
  const backend = await tcpBackend(t, 'garbage', socket => socket.once('data', () => socket.end('NOT HTTP AT ALL\r\n\r\n')))
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--retries', '0'])
  const res = await request(lila.port)
  t.equal(res.status, 502)
  t.match(res.body.toString(), /sent an invalid response \(malformed status line from the backend\)/)
})

// The keep-alive race: a backend closes an idle connection just as lila reuses it.
// Clients pace their requests around the backends' idle timeout; none may see an error.
t.test('keep-alive race: backends closing idle connections after 50 ms never surface as client errors', async t => {
  // Node answers "Keep-Alive: timeout=0" for a 50 ms keepAliveTimeout: lila must not keep it.
  const hinted = await httpBackend(t, 'hinted')
  hinted.server.keepAliveTimeout = 50
  // This one gives no hint and simply closes connections idle for 50 ms.
  const silent = await tcpBackend(t, 'unhinted', socket => {
    let timer = null
    let buf = ''
    const arm = () => { clearTimeout(timer); timer = setTimeout(() => socket.destroy(), 50) }
    arm()
    socket.on('data', chunk => {
      buf += chunk
      let end
      while ((end = buf.indexOf('\r\n\r\n')) !== -1) {
        buf = buf.slice(end + 4)
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nunhinted\n')
      }
      arm()
    })
    socket.on('close', () => clearTimeout(timer))
  })
  const lila = await spawnLila(t, ['rr', hinted.address, silent.address, ...base, '--log-level', 'debug'])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 })
  t.teardown(() => agent.destroy())
  const errors = []
  let ok = 0
  const deadline = Date.now() + 3000
  const client = async seed => {
    for (let i = 0; i < 200 && Date.now() < deadline; i++) {
      const res = await request(lila.port, { agent })
      if (res.status === 200) ok++
      else errors.push(res.error ? res.error.message : res.status)
      // pacing, not waiting for anything: 30-70 ms, straddling the backends' 50 ms
      await new Promise(resolve => setTimeout(resolve, 30 + ((i * 37 + seed * 11) % 41)))
    }
  }
  await Promise.all([client(1), client(2), client(3)])
  t.same(errors, [], `no client errors in ${ok} requests`)
  t.ok(ok > 60, `${ok} requests made`)
  const stale = lila.lines.filter(l => /reused connection .* retrying on a fresh one/.test(l)).length
  t.comment(`${stale} requests met a connection the backend had closed and were retried on a fresh one`)
})

t.test('a client that closes mid-request does not disturb lila', async t => {
  const slow = await httpBackend(t, 'slow', (req, res) => setTimeout(() => res.end('late'), 100))
  const lila = await spawnLila(t, ['rr', slow.address, ...base])
  const socket = net.connect(lila.port, '127.0.0.1')
  await new Promise(resolve => socket.on('connect', resolve))
  socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  await within(5000, 'the request to reach the backend', new Promise(resolve => {
    const check = () => slow.requests > 0 ? resolve() : setTimeout(check, 5)
    check()
  }))
  socket.destroy()
  const res = await request(lila.port)
  t.equal(res.status, 200)
  t.equal(res.body.toString(), 'late')
})

// In-process (the programmatic API), so the backend's counters can be read directly.
t.test('a client that stops reading is left to --idle-timeout, not logged as the backend timing out', async t => {
  // Writes as fast as it is read, far more than any socket buffer holds.
  const backend = await httpBackend(t, 'big', (req, res) => {
    res.setHeader('Content-Length', String(1024 ** 3))
    const chunk = Buffer.alloc(1024 * 1024, 'x')
    const more = () => { while (res.write(chunk)); }
    res.on('drain', more)
    more()
  })
  const { log, lines } = captureLog()
  // --timeout elapses first, many times over, while lila holds the backend paused.
  const lila = await startLila(t, ['rr', backend.address, '--protocol', 'http', '--timeout', '100ms', '--idle-timeout', '1s'], { log })
  const client = net.connect(lila.port, '127.0.0.1')
  await new Promise(resolve => client.once('connect', resolve))
  client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  client.pause() // and never reads (so it would not see lila close either)
  t.teardown(() => client.destroy())
  await until(() => lila.stats().active === 0, 'lila to close the stalled client', { timeout: 10000 })
  t.same(lines.filter(line => /timed out/.test(line)), [], 'no backend timeout logged')
  t.equal(lila.stats().backends[0].failures, 0, 'no failure counted against the backend')
})

t.test('a reason quoting non-ASCII bytes from the backend: the 502 body is as long as its Content-Length says', async t => {
  const backend = await tcpBackend(t, 'odd', socket => socket.once('data', () => {
    socket.end(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\xe9\r\n\r\n', 'latin1'))
  }))
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--retries', '0'])
  const client = net.connect(lila.port, '127.0.0.1')
  const chunks = []
  client.on('data', chunk => chunks.push(chunk))
  client.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  await within(5000, 'lila to answer and close', new Promise(resolve => client.once('close', resolve)))
  const raw = Buffer.concat(chunks)
  const headEnd = raw.indexOf('\r\n\r\n') + 4
  const head = raw.subarray(0, headEnd).toString('latin1')
  t.match(head, /^HTTP\/1\.1 502 /)
  const declared = Number(/\r\nContent-Length: (\d+)\r\n/.exec(head)[1])
  t.equal(raw.length - headEnd, declared, 'body bytes = Content-Length')
  t.match(raw.subarray(headEnd).toString(), /unsupported Transfer-Encoding "gzip\u00e9" from the backend/, 'the reason, in UTF-8')
})
