'use strict'

// An HTTP/1.1 connection's requests are served by one exchange (http/exchange.js begin),
// with its forwarding, attempt and leg made new for each (ARCHITECTURE.md, "One exchange
// per HTTP/1.1 connection"). What must hold: every request gets its own answer whatever
// the one before it was, and nothing the last request left behind (a backend connection
// closed or reset after its answer, a deadline's timer, a client gone mid-response)
// reaches the next one. Real lila in this process (to see its sessions), real backends,
// a raw client socket per connection.

const t = require('tap')
const net = require('net')
const { performance } = require('perf_hooks')
const { startLila, httpBackend, listenOn, until, within, isSettled } = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')

// One client connection: requests written as given, answers read one at a time (framed
// by Content-Length or chunked, or bodiless for HEAD, 204 and 304).
class Client {
  constructor (port) {
    this.socket = net.connect(port, '127.0.0.1')
    this.socket.on('error', () => {})
    this.buf = Buffer.alloc(0)
    this.waiting = null
    this.closed = new Promise(resolve => this.socket.on('close', resolve))
    this.socket.on('data', chunk => {
      this.buf = Buffer.concat([this.buf, chunk])
      if (this.waiting !== null) this.waiting()
    })
    this.socket.on('close', () => { if (this.waiting !== null) this.waiting() })
  }

  send (text) {
    this.socket.write(text)
  }

  // The next answer: { status, headers (lower-case names), body (a string) }.
  read ({ head = false } = {}) {
    return within(5000, 'an answer', new Promise((resolve, reject) => {
      const attempt = () => {
        const answer = this.parse(head)
        if (answer !== null) {
          this.waiting = null
          return resolve(answer)
        }
        if (this.socket.destroyed) reject(new Error(`the connection closed; had ${JSON.stringify(String(this.buf))}`))
      }
      this.waiting = attempt
      attempt()
    }))
  }

  parse (head) {
    const end = this.buf.indexOf('\r\n\r\n')
    if (end === -1) return null
    const [statusLine, ...lines] = String(this.buf.subarray(0, end)).split('\r\n')
    const status = Number(statusLine.split(' ')[1])
    const headers = {}
    for (const line of lines) {
      const colon = line.indexOf(':')
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
    }
    let at = end + 4
    let body = ''
    if (head || status === 204 || status === 304) {
      // no body
    } else if (headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const lineEnd = this.buf.indexOf('\r\n', at)
        if (lineEnd === -1) return null
        const size = parseInt(String(this.buf.subarray(at, lineEnd)), 16)
        if (this.buf.length < lineEnd + 2 + size + 2) return null
        body += String(this.buf.subarray(lineEnd + 2, lineEnd + 2 + size))
        at = lineEnd + 2 + size + 2
        if (size === 0) break
      }
    } else {
      const length = Number(headers['content-length'] || 0)
      if (this.buf.length < at + length) return null
      body = String(this.buf.subarray(at, at + length))
      at += length
    }
    this.buf = this.buf.subarray(at)
    return { status, headers, body }
  }

  async ask (method, path, { headers = '', body = '', head = method === 'HEAD' } = {}) {
    const length = body === '' ? '' : `Content-Length: ${body.length}\r\n`
    this.send(`${method} ${path} HTTP/1.1\r\nHost: x\r\n${length}${headers}\r\n${body}`)
    return this.read({ head })
  }

  close () {
    this.socket.end()
    return this.closed
  }
}

// The one session of `lila`'s listener (one client connection).
function sessionOf (lila) {
  const [session] = lila.lb.listeners[0].sessions
  return session
}

const settles = lila => until(() => isSettled({ listeners: [lila.stats()] }), 'live counts to return to zero')

t.test('one exchange serves a connection\'s requests, each its own answer whatever the last one was', async t => {
  let hold = null // a request the backend answers when the test says
  const backend = await httpBackend(t, 'a', (req, res) => {
    const chunks = []
    req.on('data', chunk => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString()
      const answer = () => {
        if (req.url === '/chunked') {
          res.write('chun')
          return res.end('ked')
        }
        if (req.url === '/not-modified') {
          res.statusCode = 304
          return res.end()
        }
        if (req.url === '/missing') {
          res.statusCode = 404
          return res.end('no such thing')
        }
        res.setHeader('Content-Length', Buffer.byteLength(`${req.method} ${req.url} ${body}`))
        res.end(`${req.method} ${req.url} ${body}`)
      }
      if (req.url === '/held') hold = answer
      else answer()
    })
  })
  const lila = await startLila(t, ['rr', backend.address, '--protocol', 'http'])
  const client = new Client(lila.port)

  const first = await client.ask('GET', '/one')
  t.same([first.status, first.body], [200, 'GET /one '], 'the first request')
  const session = sessionOf(lila)
  const x = session.spare
  t.ok(x !== null && x.generation === 0, 'its exchange is kept for the connection\'s next request')

  client.send('GET /held HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => hold !== null, 'the second request to reach the backend')
  t.equal(session.exchange, x, 'the next request is served in the same exchange')
  t.equal(x.generation, 1, 'as its second generation')
  t.equal(x.leg.constructor.name, 'Http1Leg', 'on a leg')
  const leg = x.leg
  hold()
  t.same(await client.read().then(a => [a.status, a.body]), [200, 'GET /held '], 'the second request')

  // Answers of every shape in a row: whatever one left in the exchange or its leg (a
  // chunked reader, a length, a status) must not shape the next.
  const asked = [
    ['GET', '/chunked', {}, 200, 'chunked'],
    ['GET', '/two', {}, 200, 'GET /two '],
    ['HEAD', '/three', {}, 200, ''],
    ['GET', '/not-modified', {}, 304, ''],
    ['POST', '/four', { body: 'a body' }, 200, 'POST /four a body'],
    ['GET', '/missing', {}, 404, 'no such thing'],
    ['GET', '/chunked', {}, 200, 'chunked'],
    ['PUT', '/five', { body: 'another' }, 200, 'PUT /five another']
  ]
  for (const [method, path, more, status, body] of asked) {
    const answer = await client.ask(method, path, more)
    t.same([answer.status, answer.body], [status, body], `${method} ${path}`)
  }
  t.equal(session.spare, x, 'all in the one exchange')
  t.equal(x.generation, 2 + asked.length - 1, 'one generation each')
  t.equal(x.forwarding.spareLeg, leg, 'and the one leg')
  t.equal(x.body.heldBytes, 0, 'the last body\'s bytes (PUT) are not held while it waits for the next request')

  // Pipelined: the second is read while the first's exchange is still on the stack, so
  // it gets an exchange of its own; both answered in order.
  client.send('GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n\r\n')
  t.same((await client.read()).body, 'GET /p1 ', 'the first pipelined request')
  t.same((await client.read()).body, 'GET /p2 ', 'the second')
  t.same((await client.ask('GET', '/after')).body, 'GET /after ', 'and one after them')
  t.ok(session.spare !== null, 'an exchange kept for the next request')
  t.ok(session.headForm !== null, 'and a head form for the next head')
  await until(() => session.spare === null, 'the quiet connection to let it go (memory per idle client)',
    { timeout: 10000 })
  t.equal(session.headForm, null, 'and its head form')
  t.same((await client.ask('GET', '/later')).body, 'GET /later ', 'a request after that, in a new exchange')
  t.not(session.spare, x, 'which is kept in its turn')
  await client.close()
  await settles(lila)
  const { responses } = lila.stats()
  t.equal(responses['5xx'] || 0, 0, 'no answer of lila\'s own')
})

t.test('to an HTTP/2 backend: the exchange made new, a new leg each time', async t => {
  const backend = await h2Backend(t, 'h2', (stream, headers) => {
    const chunks = []
    stream.on('data', chunk => chunks.push(chunk))
    stream.on('end', () => {
      const path = headers[':path']
      if (path === '/not-modified') return stream.respond({ ':status': 304 }, { endStream: true })
      stream.respond({ ':status': path === '/missing' ? 404 : 200 })
      stream.end(`${headers[':method']} ${path} ${Buffer.concat(chunks)}`)
    })
  })
  const lila = await startLila(t, ['rr', `127.0.0.1:${backend.port}`, '--protocol', 'http', '--backend-protocol', 'h2'])
  const client = new Client(lila.port)
  const asked = [
    ['GET', '/one', {}, 200, 'GET /one '],
    ['POST', '/two', { body: 'a body' }, 200, 'POST /two a body'],
    ['GET', '/not-modified', {}, 304, ''],
    ['HEAD', '/three', {}, 200, ''],
    ['GET', '/missing', {}, 404, 'GET /missing '],
    ['GET', '/four', {}, 200, 'GET /four ']
  ]
  for (const [method, path, more, status, body] of asked) {
    const answer = await client.ask(method, path, more)
    t.same([answer.status, answer.body], [status, body], `${method} ${path}`)
  }
  t.equal(sessionOf(lila).spare.generation, asked.length - 1, 'in one exchange')
  await client.close()
  await settles(lila)
})

// A backend over raw TCP that answers each request with `answer(path)`'s bytes and then
// does `after(socket)` with the connection: the events that follow (a close, a reset,
// bytes past the answer) come while the client's next request is under way.
async function rawBackend (t, after, extraHeader = '') {
  const backend = { requests: 0, connections: 0 }
  const server = net.createServer(socket => {
    backend.connections++
    let buf = ''
    socket.on('error', () => {})
    socket.on('data', chunk => {
      buf += chunk
      let end
      while ((end = buf.indexOf('\r\n\r\n')) !== -1) {
        const path = buf.slice(0, end).split(' ')[1]
        buf = buf.slice(end + 4)
        backend.requests++
        const body = `answer to ${path}`
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n${extraHeader}\r\n${body}`, () => after(socket))
      }
    })
  })
  backend.port = await listenOn(t, server)
  return backend
}

const AFTERWARDS = [
  ['closes its connection just after answering (Connection: close)', socket => socket.end(), 'Connection: close\r\n'],
  ['resets its connection just after answering (Connection: close)', socket => socket.resetAndDestroy(),
    'Connection: close\r\n'],
  ['sends bytes past its answer', socket => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray'), ''],
  ['closes its kept-alive connection just after answering', socket => socket.end(), '']
]

for (const [what, after, header] of AFTERWARDS) {
  t.test(`a backend that ${what}: the next request in the exchange gets its own answer`, async t => {
    const backend = await rawBackend(t, after, header)
    const lila = await startLila(t, ['rr', `127.0.0.1:${backend.port}`, '--protocol', 'http'])
    const client = new Client(lila.port)
    const requests = 30
    for (let i = 0; i < requests; i++) {
      // Each asked as soon as the last was answered: the backend's close, reset or
      // stray bytes come to lila around the time the next request does.
      const answer = await client.ask('GET', `/r${i}`)
      t.same([answer.status, answer.body], [200, `answer to /r${i}`], `request ${i}`, { diagnostic: answer.status !== 200 })
      if (answer.status !== 200) break
    }
    t.ok(sessionOf(lila).spare.generation > 0, 'served in one exchange made new')
    await client.close()
    await settles(lila)
    t.equal(lila.stats().responses['5xx'] || 0, 0, 'lila answered none itself')
  })
}

t.test('a deadline that passes after its call was answered does not end the next request', async t => {
  let held = null
  let firstAt = 0
  const backend = await httpBackend(t, 'a', (req, res) => {
    req.resume()
    if (req.url === '/first') {
      firstAt = performance.now()
      return res.end('first')
    }
    held = () => res.end('second')
  })
  const lila = await startLila(t, ['rr', backend.address, '--protocol', 'http'])
  const client = new Client(lila.port)
  const call = 'Content-Type: application/grpc\r\nGrpc-Timeout: 100m\r\n'
  const first = await client.ask('POST', '/first', { headers: call, body: 'x' })
  t.same([first.status, first.body], [200, 'first'], 'the call with a 100 ms deadline answered in time')
  const x = sessionOf(lila).spare
  client.send('GET /second HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => held !== null, 'the second request to reach the backend')
  t.equal(sessionOf(lila).exchange, x, 'in the same exchange')
  // The first call's deadline passes while the second waits for its answer.
  await until(() => performance.now() - firstAt > 300, 'the first call\'s deadline to be long past', { timeout: 2000 })
  held()
  const second = await client.read()
  t.same([second.status, second.body], [200, 'second'], 'the second request gets its answer, not a 504')
  await client.close()
  await settles(lila)
})

t.test('a client gone in the middle of a response: nothing of it reaches another connection\'s requests', async t => {
  let cut = null
  const backend = await httpBackend(t, 'a', (req, res) => {
    req.resume()
    if (req.url !== '/long') return res.end(`short ${req.url}`)
    res.setHeader('Content-Length', 100000)
    res.write('x'.repeat(1000))
    cut = () => res.end('y'.repeat(99000))
  })
  const lila = await startLila(t, ['rr', backend.address, '--protocol', 'http'])
  const leaving = new Client(lila.port)
  t.equal((await leaving.ask('GET', '/a')).body, 'short /a', 'a first request')
  const x = sessionOf(lila).spare
  leaving.send('GET /long HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => cut !== null && leaving.buf.length > 1000, 'the long answer to start')
  t.equal(sessionOf(lila).exchange, x, 'its second request in the same exchange')
  leaving.socket.destroy()
  await leaving.closed
  cut() // the backend's rest comes after the client left
  await until(() => lila.stats().active === 0, 'lila to see the client gone')
  const staying = new Client(lila.port)
  for (let i = 0; i < 5; i++) t.equal((await staying.ask('GET', `/b${i}`)).body, `short /b${i}`, `another client's request ${i}`)
  t.not(sessionOf(lila).spare, x, 'which has an exchange of its own')
  await staying.close()
  await settles(lila)
})
