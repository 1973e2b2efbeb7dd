'use strict'

// Slow clients cannot hold the backends (issue 17): a small request body is read whole
// before a backend connection is taken, so uploads trickling a byte at a time hold
// nothing but their own connections; a body that stops coming is answered 408 after
// --body-timeout, and a backend connection that held part of it is not reused.

const t = require('tap')
const net = require('net')
const { spawnLila, startLila, httpBackend, request, within, until, settled, statusJson } = require('./fixtures/helpers')

const TRICKLERS = 1200 // more than the 1,024 sockets a backend's pool once allowed

// A raw client: sends `head`, then what the test writes; `response` resolves with all it
// read once the connection closes, `first` with the first bytes it got.
function rawClient (port, head) {
  const socket = net.connect(port, '127.0.0.1')
  socket.setNoDelay(true)
  let text = ''
  let onFirst
  const first = new Promise(resolve => { onFirst = resolve })
  const response = new Promise(resolve => {
    socket.on('data', chunk => {
      text += chunk
      onFirst(text)
    })
    socket.on('error', () => {})
    socket.on('close', () => resolve(text))
  })
  socket.write(head)
  return { socket, response, first }
}

// TRICKLERS uploads of 100 bytes through `lila`, each sending its first byte only: lila
// serves them all, none holds `backend` (which has seen none), and a GET to the same
// backend is answered meanwhile. Resolves with the uploads (rawClient's), still open.
async function trickling (t, lila, backend) {
  const uploads = []
  t.teardown(() => { for (const u of uploads) u.socket.destroy() })
  for (let i = 0; i < TRICKLERS; i++) {
    const upload = rawClient(lila.port, post(100))
    upload.socket.write('x') // the first byte of its 100
    uploads.push(upload)
  }
  await until(() => uploads.every(u => u.socket.bytesWritten > 0), 'every upload to be sent', { timeout: 20000 })
  let snapshot = null
  await until(async () => (snapshot = await statusJson(lila)).listeners[0].active >= TRICKLERS,
    'lila to count every upload', { timeout: 10000, every: 50 }).catch(() => {}) // asserted below
  t.equal(snapshot.listeners[0].active, TRICKLERS, 'lila serves every upload')
  t.equal(snapshot.listeners[0].backends[0].live, 0, 'none of them holds the backend')
  t.equal(backend.requests, 0, 'the backend has seen none of them: their bodies are not complete')
  const answer = await within(10000, 'the GET while 1,200 uploads trickle', request(lila.port, { path: '/get' }))
  t.equal(answer.status, 200, 'the GET is answered')
  return uploads
}

const post = (length, extra = '') =>
  `POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: ${length}\r\n${extra}\r\n`

t.test('1,200 uploads trickling a byte at a time; a GET to the same backend is answered meanwhile', async t => {
  const backend = await httpBackend(t, 'b', (req, res) => {
    req.resume()
    req.on('end', () => res.end('ok\n'))
  })
  // --body-timeout out of the way: on a busy machine the uploads' pause between their
  // first byte and the rest may outlast the default 30 s (408s are the next test's).
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--body-timeout', '10m'])
  const uploads = await trickling(t, lila, backend)
  t.ok(uploads.every(u => !u.socket.destroyed), 'while every upload still trickles')

  // One more byte each, then the rest: every upload completes and is answered.
  for (const u of uploads) u.socket.write('y')
  for (const u of uploads) u.socket.end('z'.repeat(98))
  const answers = await within(30000, 'every upload to be answered', Promise.all(uploads.map(u => u.response)))
  const statuses = {}
  for (const text of answers) statuses[text.slice(0, 12)] = (statuses[text.slice(0, 12)] || 0) + 1
  t.same(statuses, { 'HTTP/1.1 200': TRICKLERS }, 'every upload got its 200')
  t.equal(backend.requests, TRICKLERS + 1)
  await settled(lila, { timeout: 10000 })
})

t.test('a body that stops coming: 408 after --body-timeout, whether held by lila or streamed to the backend', async t => {
  const closed = []
  const backend = await httpBackend(t, 'b', (req, res) => {
    req.on('close', () => closed.push(req.url))
    req.resume()
    req.on('end', () => res.end('ok\n'))
  })
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--body-timeout', '300ms'])

  // A small body: held by lila, never sent; the backend sees nothing.
  const small = rawClient(lila.port, post(10))
  small.socket.write('abc')
  const smallAnswer = await within(10000, 'the 408', small.response)
  t.match(smallAnswer, /^HTTP\/1\.1 408 /, 'a small body that stops: 408')
  t.match(smallAnswer, /request body timed out/)
  t.equal(backend.requests, 0, 'the backend never saw it')

  // A large body streams to the backend as it comes; when it stops, the client gets 408
  // and the backend's connection is closed (it holds part of a request).
  const large = rawClient(lila.port, post(1000000).replace('/upload', '/large'))
  large.socket.write(Buffer.alloc(100 * 1024, 'a'))
  await until(() => backend.requests === 1, 'the backend to get the large request', { timeout: 10000 })
  const largeAnswer = await within(10000, 'the 408', large.response)
  t.match(largeAnswer, /^HTTP\/1\.1 408 /, 'a large body that stops: 408')
  await until(() => closed.includes('/large'), 'the backend connection to be closed', { timeout: 10000 })

  const after = await request(lila.port, { path: '/after' })
  t.equal(after.status, 200, 'the backend serves the next request')
  const snapshot = await settled(lila)
  t.match(snapshot.listeners[0].responses, { '4xx': 2 }, 'both 408s count as client errors')
})

t.test('a body that keeps coming, slowly, is not timed out; --body-timeout 0s never times out', async t => {
  const backend = await httpBackend(t, 'b', (req, res) => {
    let body = ''
    req.on('data', chunk => { body += chunk })
    req.on('end', () => res.end(body))
  })
  const upload = async (args, gaps, env = process.env) => {
    const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
      '--check', 'none', ...args], { env })
    const client = rawClient(lila.port, post(6))
    for (const [i, byte] of [...'abcdef'].entries()) {
      client.socket.write(byte)
      if (i < 5) await new Promise(resolve => setTimeout(resolve, gaps[i])) // a silence: the subject
    }
    const answer = await within(10000, 'the answer', client.first)
    client.socket.destroy()
    return answer
  }
  // Six bytes, one every 150 ms: each gap below the timeout, the whole above it.
  t.match(await upload(['--body-timeout', '400ms'], [150, 150, 150, 150, 150]), /^HTTP\/1\.1 200 [\s\S]*abcdef$/,
    '--body-timeout 400ms: a body that keeps coming is answered whole')
  // 0s against an environment that says 300 ms: a 1.2 s silence is answered 408 when
  // 0s is not honoured (taken for unset, or for 0 ms), 200 when it means never.
  const env = { ...process.env, LILA_BODY_TIMEOUT: '300ms' }
  const silence = [50, 1200, 50, 50, 50]
  t.match(await upload([], silence, env), /^HTTP\/1\.1 408 /, 'the environment\'s 300 ms alone: 408 (the test can fail)')
  t.match(await upload(['--body-timeout', '0s'], silence, env), /^HTTP\/1\.1 200 [\s\S]*abcdef$/,
    '--body-timeout 0s: a 1.2 s silence is waited out, answered with the whole body')
})

// The same without waiting: lila in this process, its listener swept by hand far more
// often than 30 s of sweeps while a body is silent. A --body-timeout of 0s taken for
// any finite one would answer 408 here, as 30s does.
t.test('in process: --body-timeout 0s outlasts a thousand sweeps of silence; 30s does not', async t => {
  let arrived = null
  const backend = await httpBackend(t, 'b', (req, res) => {
    let length = 0
    req.on('data', chunk => { length += chunk.length; if (length > 0) arrived() })
    req.on('end', () => res.end(`${length}\n`))
  })
  const SIZE = 128 * 1024 // over the 64 KiB lila reads first: streamed to the backend
  for (const [timeout, expected] of [['30s', 408], ['0s', 200]]) {
    const { lb, port } = await startLila(t, ['rr', backend.address, '--protocol', 'http', '--body-timeout', timeout])
    const atBackend = new Promise(resolve => { arrived = resolve })
    const client = rawClient(port, post(SIZE))
    client.socket.write(Buffer.alloc(SIZE - 1, 'x')) // all but the last byte
    await within(10000, 'the body at the backend', atBackend)
    const [listener] = lb.listeners
    for (let i = 0; i < 1000; i++) listener.protocol.sweep(listener)
    client.socket.write('x')
    const answer = await within(10000, 'the answer', client.first)
    t.match(answer, new RegExp(`^HTTP/1\\.1 ${expected} `), `--body-timeout ${timeout}: ${expected} after 1,000 sweeps of silence`)
    client.socket.destroy()
    await lb.close(0)
  }
})

t.test('Expect: 100-continue on a small body: lila says 100 Continue itself and sends the backend no Expect', async t => {
  const backend = await httpBackend(t, 'b', (req, res) => {
    let body = ''
    req.on('data', chunk => { body += chunk })
    req.on('end', () => res.end(`${req.headers.expect || 'no expect'}: ${body}`))
  })
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1', '--check', 'none'])
  const client = rawClient(lila.port, post(5, 'Expect: 100-continue\r\n'))
  const first = await within(5000, '100 Continue', client.first)
  t.equal(first, 'HTTP/1.1 100 Continue\r\n\r\n', 'the client is told to go on before any backend is involved')
  t.equal(backend.requests, 0)
  client.socket.end('hello')
  const all = await within(5000, 'the answer', client.response)
  t.match(all, /HTTP\/1\.1 200 [\s\S]*\r\n\r\nno expect: hello$/, 'the backend got the body with the head, no Expect')

  // A body too large to hold first: the backend decides, as before.
  const large = rawClient(lila.port, post(1000000, 'Expect: 100-continue\r\n'))
  const got = await within(5000, 'the backend\'s 100 Continue', large.first)
  t.match(got, /^HTTP\/1\.1 100 Continue\r\n/, 'passed on from the backend')
  await until(() => backend.requests === 2, 'the backend to have the large request')
  t.equal(backend.last.headers.expect, '100-continue', 'with its Expect')
  large.socket.destroy()
})

t.test('large uploads fill a backend\'s max-conn: the next request waits in the visible queue, then 503', async t => {
  const backend = await httpBackend(t, 'b', (req, res) => {
    req.resume()
    req.on('end', () => res.end('ok\n'))
  })
  const lila = await spawnLila(t, ['rr', `${backend.address},max-conn=2`, '--protocol', 'http', '--port', '0',
    '--host', '127.0.0.1', '--status-port', '0', '--check', 'none', '--queue-timeout', '1s'])
  // Two uploads too large to hold first: each takes one of the backend's two slots.
  const uploads = [rawClient(lila.port, post(1000000)), rawClient(lila.port, post(1000000))]
  t.teardown(() => { for (const u of uploads) u.socket.destroy() })
  for (const u of uploads) u.socket.write(Buffer.alloc(100 * 1024, 'a'))
  await until(() => backend.requests === 2, 'both uploads to reach the backend', { timeout: 10000 })

  const waiting = request(lila.port, { path: '/waits' })
  let snapshot = null
  await until(async () => (snapshot = await statusJson(lila)).listeners[0].queued === 1,
    'the GET to be queued', { every: 20 }).catch(() => {}) // asserted below
  t.equal(snapshot.listeners[0].queued, 1, 'the GET waits in the queue /status shows')
  const answer = await within(10000, 'the queued GET', waiting)
  t.equal(answer.status, 503, 'answered 503 after --queue-timeout')
  t.equal((await statusJson(lila)).listeners[0].queueTimeouts, 1, 'counted as a queue timeout')
  await lila.waitForLine(/503 for GET \/waits from \S+: no backend available/)
})

t.test('HTTP/2: 1,000 streams trickling small bodies hold no backend; a GET is answered; a silent body gets 408', async t => {
  const http2 = require('http2')
  const backend = await httpBackend(t, 'b', (req, res) => {
    req.resume()
    req.on('end', () => res.end('ok\n'))
  })
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--body-timeout', '2s'])
  const sessions = []
  t.teardown(() => { for (const s of sessions) s.destroy() })
  const streams = []
  for (let c = 0; c < 10; c++) {
    const session = http2.connect(`http://127.0.0.1:${lila.port}`)
    session.on('error', () => {})
    sessions.push(session)
    for (let i = 0; i < 100; i++) {
      const stream = session.request({ ':method': 'POST', ':path': '/upload', 'content-length': '100' })
      stream.on('error', () => {})
      stream.status = new Promise(resolve => stream.on('response', h => resolve(h[':status'])))
      stream.write('x')
      streams.push(stream)
    }
  }
  await until(() => streams.every(s => s.id !== undefined), 'every stream to open', { timeout: 10000 })
  const get = () => new Promise(resolve => {
    const stream = sessions[0].request({ ':path': '/get' })
    stream.on('response', h => resolve(h[':status']))
    stream.resume()
  })
  t.equal(await within(10000, 'the GET beside 1,000 trickling streams', get()), 200, 'the GET is answered')
  t.equal(backend.requests, 1, 'the backend saw only the GET: the uploads are held by lila')
  t.equal((await statusJson(lila)).listeners[0].backends[0].live, 0, 'none of them holds the backend')

  // They stop sending: 408 each after --body-timeout, none of them reached the backend.
  const statuses = await within(20000, 'the 408s', Promise.all(streams.map(s => s.status)))
  t.equal(statuses.filter(s => s === 408).length, 1000, 'every silent body got 408')
  t.equal(backend.requests, 1)
  for (const session of sessions) session.destroy()
  await settled(lila, { timeout: 10000 })
})

t.test('HTTP/1.1 clients to an HTTP/2 backend: 1,200 trickling uploads hold no stream; a GET is answered; 100 Continue; 408', async t => {
  const { h2Backend } = require('./fixtures/h2')
  const backend = await h2Backend(t, 'b', (stream, headers, b) => {
    let body = ''
    stream.on('data', chunk => { body += chunk })
    stream.on('end', () => {
      stream.respond({ ':status': 200 })
      stream.end(`${headers.expect || 'no expect'}: ${body.length}\n`)
    })
  })
  const args = ['rr', backend.address, '--protocol', 'http', '--backend-protocol', 'h2', '--port', '0',
    '--host', '127.0.0.1', '--status-port', '0', '--check', 'none']
  // --body-timeout out of the way while 1,200 uploads are counted (on a busy machine
  // setting them up outlasts a short one); the 408s are a second lila's, below.
  const lila = await spawnLila(t, [...args, '--body-timeout', '10m'])
  await trickling(t, lila, backend)

  const expecting = rawClient(lila.port, post(5, 'Expect: 100-continue\r\n'))
  t.equal(await within(5000, '100 Continue', expecting.first), 'HTTP/1.1 100 Continue\r\n\r\n', '100 Continue from lila')
  expecting.socket.end('hello')
  t.match(await within(5000, 'the answer', expecting.response), /HTTP\/1\.1 200 [\s\S]*\r\n\r\nd\r\nno expect: 5\n\r\n0\r\n\r\n$/,
    'the backend got the body with the head, no Expect')

  // Uploads that stop sending: 408 each after --body-timeout, none reached the backend.
  const quick = await spawnLila(t, [...args, '--body-timeout', '300ms'])
  const silent = []
  t.teardown(() => { for (const u of silent) u.socket.destroy() })
  for (let i = 0; i < 50; i++) {
    const upload = rawClient(quick.port, post(100))
    upload.socket.write('x')
    silent.push(upload)
  }
  const answers = await within(20000, 'the 408s', Promise.all(silent.map(u => u.response)))
  t.equal(answers.filter(text => /^HTTP\/1\.1 408 [\s\S]*request body timed out/.test(text)).length, silent.length,
    'every silent body got 408')
  t.equal(backend.requests, 2, 'the backend saw only the GET and the complete body')
  await settled(quick, { timeout: 10000 })
})

t.test('HTTP/2: expect: 100-continue on a small body gets 100 from lila; the backend, h1 or h2, no Expect', async t => {
  const http2 = require('http2')
  const answer = (headers, body) => `${headers.expect || 'no expect'}: ${body}`
  const h1 = await httpBackend(t, 'h1', (req, res) => {
    let body = ''
    req.on('data', chunk => { body += chunk })
    req.on('end', () => res.end(answer(req.headers, body)))
  })
  const h2 = http2.createServer()
  h2.on('stream', (stream, headers) => {
    let body = ''
    stream.on('data', chunk => { body += chunk })
    stream.on('end', () => { stream.respond({ ':status': 200 }); stream.end(answer(headers, body)) })
  })
  await new Promise(resolve => h2.listen(0, '127.0.0.1', resolve))
  t.teardown(() => h2.close())
  const common = ['--protocol', 'http', '--port', '0', '--host', '127.0.0.1', '--status-port', '0', '--check', 'none']
  const lilas = [
    await spawnLila(t, ['rr', h1.address, ...common]),
    await spawnLila(t, ['rr', `127.0.0.1:${h2.address().port}`, '--backend-protocol', 'h2', ...common])
  ]
  for (const [i, lila] of lilas.entries()) {
    const session = http2.connect(`http://127.0.0.1:${lila.port}`)
    session.on('error', () => {})
    t.teardown(() => session.destroy())
    const stream = session.request({ ':method': 'POST', ':path': '/upload', 'content-length': '5', expect: '100-continue' })
    stream.on('error', () => {})
    // Node's client emits 'continue' on a 100 and sends nothing until it: the body
    // goes only once lila says so.
    await within(5000, 'the 100 from lila', new Promise(resolve => stream.once('continue', resolve)))
    stream.end('hello')
    const [status, body] = await within(5000, 'the answer', new Promise(resolve => {
      let text = ''
      let code = 0
      stream.on('response', h => { code = h[':status'] })
      stream.on('data', chunk => { text += chunk })
      stream.on('end', () => resolve([code, text]))
    }))
    t.equal(status, 200)
    t.equal(body, 'no expect: hello', `${i === 0 ? 'HTTP/1.1' : 'HTTP/2'} backend: the body with the head, no Expect`)
    session.destroy()
    await settled(lila, { timeout: 10000 })
  }
})

// A raw client that holds its side open after lila's FIN: `text`, all it read; `ended`,
// lila's FIN.
function heldOpen (t, port) {
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
  t.teardown(() => socket.destroy())
  const client = { socket, text: '', ended: new Promise(resolve => socket.once('end', resolve)) }
  socket.on('data', chunk => { client.text += chunk })
  socket.on('error', () => {})
  return client
}

// A client that asked for its request to be the last (Connection: close, or HTTP/1.0
// without keep-alive) and sent nothing after it is closed as soon as its response is
// with the kernel: no linger, so its session is over before its next status request is
// read, with the client still holding its side open (the response, then lila's FIN);
// its access log line is written and every counter is back at zero. (With the linger
// below the session would stay LINGER_MS: this fails.)
t.test('a client whose request said close is closed at once after its response', async t => {
  const backend = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--idle-timeout', '0s', '--access-log', 'json'])
  const heads = ['GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 'GET /old HTTP/1.0\r\n\r\n']
  for (const [i, head] of heads.entries()) {
    const client = heldOpen(t, lila.port)
    const { socket } = client
    socket.write(head)
    await within(10000, 'lila to close', client.ended)
    t.match(client.text, /^HTTP\/1\.[01] 200 [^]*\r\nConnection: close\r\n/i, `${head.split('\r')[0]}: answered, said close`)
    const snapshot = await statusJson(lila)
    t.equal(snapshot.listeners[0].active, 0, 'its session is over at once, the client still open')
    t.notOk(socket.destroyed)
    await until(() => lila.stdout.split('\n').length > i + 1, 'its access log line')
  }
  const entries = lila.stdout.trim().split('\n').map(line => JSON.parse(line))
  t.same(entries.map(e => [e.target, e.status]), [['/last', 200], ['/old', 200]], 'one access log line each')
  await settled(lila)
  t.equal(backend.requests, 2)
})

// After its last response lila shuts its side and drops what the client still sends
// when the client may still be sending (here: a request pipelined after its
// Connection: close); a client that never closes its side is let go of a moment later
// (LINGER_MS, counted in the listener's sweeps), also with --idle-timeout off: its
// session ends while the client still holds its side open.
t.test('a client that keeps its side open after Connection: close is let go of; what it sends is dropped', async t => {
  const backend = await httpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
    '--status-port', '0', '--check', 'none', '--idle-timeout', '0s'])
  const client = heldOpen(t, lila.port)
  const { socket } = client
  // One write: the second request is with lila before the first is answered.
  socket.write('GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /dropped HTTP/1.1\r\nHost: x\r\n\r\n')
  await within(10000, 'lila to shut its side', client.ended)
  socket.write('GET /dropped-too HTTP/1.1\r\nHost: x\r\n\r\n') // after lila's FIN: dropped
  const snapshot = await settled(lila, { timeout: 15000 }) // the session over, the client still open
  t.equal(snapshot.listeners[0].active, 0, 'lila let the connection go')
  t.notOk(socket.destroyed, 'the client never closed')
  t.match(client.text, /^HTTP\/1\.1 200 /)
  t.equal(client.text.match(/HTTP\/1\.1 /g).length, 1, 'one response: what came after the last request was dropped')
  t.equal(backend.requests, 1, 'the backend saw only the first request')
})
