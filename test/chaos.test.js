'use strict'

// What keeps a backend's death from reaching clients (bench/chaos.js measures it under
// load; docs/reliability.md). An HTTP/2 backend killed between a small answer's DATA
// and its END_STREAM (Node's http2 server writes them a turn of its event loop apart):
// the answer was held, the GET goes to another backend and no client sees a cut; a
// POST's answer is not held, and its cut is said in the access log; with --retry-on
// reset a POST or a gRPC call is held and sent again like a GET, and one reset before
// any answer goes elsewhere too (a route may say so for itself); a gRPC call cut
// mid-answer ends UNAVAILABLE at a real gRPC client; an answer whose length was said
// and came whole is complete without its END_STREAM; a held answer that does not end is
// passed on all the same.

const t = require('tap')
const net = require('net')
const http = require('http')
const { constants } = require('http2')
const { startLila, listenOn, captureLog, until, within, httpBackend } = require('./fixtures/helpers')
const { h2connect, h2request, h2Backend } = require('./fixtures/h2')
const { frame, frameReader } = require('./fixtures/h2-frames')
const { load, MISSING, grpcBackend, echoClient, unary } = require('./fixtures/grpc')

const grpcLibs = load()

const H2 = ['--protocol', 'http', '--backend-protocol', 'h2']
const GRPC_TYPE = 'application/grpc'
// --retry-on's default with reset: a request of any method sent again after a reset.
const RESET = ['--retry-on', '502,503,reset']

// An HTTP/2 backend of raw frames. Each request, once whole (and lila's SETTINGS ack
// in), gets a 200 head (with a content-length when `length` is given) and DATA
// "partial" without END_STREAM; then, as `then` says, the TCP connection is reset (as
// a killed process's is) or the stream waits for `finish()`, which ends it with " and
// the rest"; or (`then: 'silent'`) the connection is reset with no answer at all.
// `grpc`: the head says application/grpc and the DATA is a gRPC message, Msg "partial"
// (test/fixtures/proto/echo.proto). (Reset while lila still had something to write,
// lila's write would fail first, and Node closes a socket whose write failed without
// reading what came before the reset: see docs/reliability.md.)
async function rawBackend (t, { length = null, then = 'reset', grpc = false } = {}) {
  const backend = { requests: 0, waiting: [], address: null }
  backend.finish = () => { for (const end of backend.waiting.splice(0)) end() }
  const server = net.createServer(socket => {
    socket.setNoDelay(true)
    socket.on('error', () => {})
    let acked = false // lila acknowledged the SETTINGS
    const ended = [] // requests whole, not answered yet
    socket.write(frame(4, 0, 0)) // SETTINGS
    const answer = id => {
      if (then === 'silent') return socket.resetAndDestroy()
      // :status 200 (static index 8); content-length (static name 28), content-type
      // (31), literals.
      const fields = [Buffer.from([0x88])]
      if (length !== null) fields.push(Buffer.from([0x0f, 0x0d, String(length).length]), Buffer.from(String(length)))
      if (grpc) fields.push(Buffer.from([0x0f, 0x10, GRPC_TYPE.length]), Buffer.from(GRPC_TYPE))
      const body = grpc ? Buffer.from([0, 0, 0, 0, 9, 0x0a, 7, ...Buffer.from('partial')]) : Buffer.from('partial')
      const bytes = Buffer.concat([frame(1, 4, id, Buffer.concat(fields)), frame(0, 0, id, body)])
      if (then === 'reset') return socket.write(bytes, () => socket.resetAndDestroy())
      socket.write(bytes)
      backend.waiting.push(() => socket.write(frame(0, 1, id, Buffer.from(' and the rest'))))
    }
    socket.on('data', frameReader((type, flags, id) => {
      if (type === 4) {
        if (flags & 1) acked = true
        else socket.write(frame(4, 1, 0)) // SETTINGS ack
      }
      if (type === 1) backend.requests++
      if ((type === 0 || type === 1) && (flags & 1)) ended.push(id)
      if (acked) for (const id of ended.splice(0)) answer(id)
    }))
  })
  backend.address = `127.0.0.1:${await listenOn(t, server)}`
  return backend
}

// An HTTP/1.1 request through lila on a keep-alive agent (a POST sends "x"): { status,
// body, complete }, where `complete` is false when the response was cut (aborted, or an
// error mid-body).
function h1request (port, agent, method = 'GET') {
  return within(10000, 'an HTTP/1.1 answer', new Promise(resolve => {
    const out = { status: 0, body: '', complete: false }
    const req = http.request({ host: '127.0.0.1', port, path: '/', method, agent }, res => {
      out.status = res.statusCode
      res.setEncoding('utf8')
      res.on('data', chunk => { out.body += chunk })
      res.on('end', () => { out.complete = res.complete })
      res.on('error', () => {})
      res.on('close', () => resolve(out))
    })
    req.on('error', () => resolve(out))
    req.end(method === 'POST' ? 'x' : undefined)
  }))
}

// JSON access log lines, as lila writes them.
function accessLog () {
  const lines = []
  const stdout = { write (text) { for (const line of text.split('\n').filter(Boolean)) lines.push(JSON.parse(line)) } }
  return { stdout, lines }
}

// A GET, and a POST with --retry-on reset (which may run twice: the user said so).
for (const [method, extra] of [['GET', []], ['POST', RESET]]) {
  const said = extra.length === 0 ? '' : ' with --retry-on reset'
  t.test(`an HTTP/2 backend that dies before a ${method}'s END_STREAM${said}: it goes to another backend, whole`, async t => {
    const dying = await rawBackend(t)
    const good = await h2Backend(t, 'good')
    const capture = captureLog()
    const lila = await startLila(t, ['rr', dying.address, good.address, ...H2, ...extra, '--retry-budget', 'off'], { log: capture.log })

    const session = await h2connect(t, lila.port)
    const over2 = []
    for (let i = 0; i < 4; i++) over2.push(await h2request(session, { method, body: method === 'POST' ? 'x' : null }))
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    t.teardown(() => agent.destroy())
    const over1 = []
    for (let i = 0; i < 4; i++) over1.push(await h1request(lila.port, agent, method))

    t.ok(dying.requests >= 2, `the dying backend was sent requests (${dying.requests}), each cut before its end`)
    t.same(over2.map(r => [r.status, r.body.toString(), r.rstCode]), Array(4).fill([200, 'good\n', constants.NGHTTP2_NO_ERROR]),
      'every HTTP/2 client stream got the good backend\'s whole answer, none reset')
    t.same(over1.map(r => [r.status, r.body, r.complete]), Array(4).fill([200, 'good\n', true]),
      'every HTTP/1.1 client got the good backend\'s whole answer')
    t.notOk(capture.lines.some(line => /response cut/.test(line)), 'no response cut')
    session.close()
  })
}

t.test('a POST\'s answer passes at once: cut mid-response, the access log says so', async t => {
  const dying = await rawBackend(t)
  const { stdout, lines } = accessLog()
  const lila = await startLila(t, ['rr', dying.address, ...H2, '--access-log', 'json'], { stdout })
  const session = await h2connect(t, lila.port)
  const cut = await h2request(session, { method: 'POST', body: 'x' })
  t.equal(cut.status, 200, 'the head reached the client')
  t.equal(cut.body.toString(), 'partial')
  t.equal(cut.rstCode, constants.NGHTTP2_INTERNAL_ERROR, 'the client stream is reset: the answer was cut')
  await until(() => lines.length >= 1, 'an access log line')
  t.equal(lines[0].status, 200)
  t.equal(lines[0].cut, 'backend', 'logged as a 200 the backend cut, not a plain 200')
  session.close()
})

t.test('--retry-on reset: a POST whose backend resets before answering goes to another backend; without, 502', async t => {
  const good = await h2Backend(t, 'good')
  // An HTTP/1.1 backend reset once the request came, and the same over HTTP/2.
  const silent1 = net.createServer(socket => {
    socket.on('error', () => {})
    socket.once('data', () => socket.resetAndDestroy())
  })
  const h1address = `127.0.0.1:${await listenOn(t, silent1)}`
  const silent2 = await rawBackend(t, { then: 'silent' })
  const goodH1 = (await httpBackend(t, 'good')).address
  for (const [what, dying, other, extra] of [['HTTP/1.1', h1address, goodH1, []], ['HTTP/2', silent2.address, good.address, ['--backend-protocol', 'h2']]]) {
    for (const reset of [false, true]) {
      const lila = await startLila(t, ['rr', dying, other, '--protocol', 'http', ...extra, ...(reset ? RESET : []), '--retry-budget', 'off'])
      const session = await h2connect(t, lila.port)
      const answers = []
      for (let i = 0; i < 4; i++) answers.push(await h2request(session, { method: 'POST', body: 'x' }))
      session.close()
      const statuses = answers.map(r => r.status)
      if (reset) t.same(statuses, [200, 200, 200, 200], `${what} backend, --retry-on reset: every POST answered by the other backend`)
      else t.ok(statuses.includes(502) && statuses.includes(200), `${what} backend, no reset in --retry-on: the POSTs it reset are 502 (${statuses})`)
    }
  }
})

t.test('--retry-on reset for a route of its own (the config file): its POSTs are sent again, the listener\'s are not', async t => {
  const { parseConfigFile } = require('../lib/config/file')
  const { createBalancer } = require('../lib/index')
  const good = await h2Backend(t, 'good')
  const dying = await rawBackend(t, { then: 'silent' })
  const backends = [dying.address, good.address]
  const config = parseConfigFile(JSON.stringify({
    host: '127.0.0.1',
    protocol: 'http',
    'backend-protocol': 'h2',
    check: 'none',
    'retry-budget': 'off',
    listeners: [{ port: 0, mode: 'rr', backends, routes: [{ match: '/api', mode: 'rr', backends, 'retry-on': '502,503,reset' }] }]
  }), 'lila.json')
  const lb = createBalancer(config)
  const [address] = await lb.listen()
  t.teardown(() => lb.close(0))
  const session = await h2connect(t, Number(address.split(':').pop()))
  const statuses = async path => {
    const out = []
    for (let i = 0; i < 4; i++) out.push((await h2request(session, { method: 'POST', path, body: 'x' })).status)
    return out
  }
  t.same(await statuses('/api/x'), [200, 200, 200, 200], 'the route\'s POSTs: each answered by the good backend')
  const own = await statuses('/other')
  t.ok(own.includes(502), `the listener's own POSTs: those the dying backend reset are 502 (${own})`)
  session.close()
})

t.test('a gRPC call whose answer is cut ends UNAVAILABLE at the client; --retry-on reset sends it elsewhere', { skip: grpcLibs === null && MISSING }, async t => {
  const dying = await rawBackend(t, { grpc: true })
  const { stdout, lines } = accessLog()
  const alone = await startLila(t, ['rr', dying.address, '--protocol', 'grpc', '--access-log', 'json'], { stdout })
  const cut = await unary(echoClient(t, alone.port), 'x')
  t.equal(cut.err && cut.err.code, grpcLibs.grpc.status.UNAVAILABLE, `the client's status is UNAVAILABLE (${cut.err && cut.err.message})`)
  t.match(cut.err && cut.err.details, /^backend 127\.0\.0\.1:\d+ (connection reset|closed the connection) mid-response; the answer was cut$/, 'and says why')
  await until(() => lines.length >= 1, 'an access log line')
  t.equal(lines[0].cut, 'backend', 'logged as cut by the backend')

  const good = await grpcBackend(t, 'good')
  const both = await startLila(t, ['rr', dying.address, good.address, '--protocol', 'grpc', ...RESET, '--retry-budget', 'off'])
  const client = echoClient(t, both.port)
  const before = dying.requests
  const calls = []
  for (let i = 0; i < 4; i++) calls.push(await unary(client, `call ${i}`))
  t.ok(dying.requests - before >= 2, `the dying backend was sent calls (${dying.requests - before}), each cut before its end`)
  t.same(calls.map(c => [c.err && c.err.code, c.value && c.value.text]), [0, 1, 2, 3].map(i => [null, `good: call ${i}`]),
    'with --retry-on reset every call is answered by the good backend')
})

t.test('an answer whose length was said and came whole is complete without its END_STREAM', async t => {
  const dying = await rawBackend(t, { length: 7 })
  const { stdout, lines } = accessLog()
  const lila = await startLila(t, ['rr', dying.address, ...H2, '--access-log', 'json'], { stdout })
  const session = await h2connect(t, lila.port)
  const post = await h2request(session, { method: 'POST', body: 'x' })
  const get = await h2request(session)
  for (const [what, r] of [['POST', post], ['GET', get]]) {
    t.same([r.status, r.body.toString(), r.rstCode], [200, 'partial', constants.NGHTTP2_NO_ERROR], `${what}: whole, and ended`)
  }
  await until(() => lines.length >= 2, 'two access log lines')
  t.same(lines.map(line => [line.status, line.cut]), [[200, undefined], [200, undefined]], 'logged complete')
  session.close()
})

t.test('a held answer that does not end is passed on before its end', async t => {
  const slow = await rawBackend(t, { then: 'wait' })
  const lila = await startLila(t, ['rr', slow.address, ...H2])
  const session = await h2connect(t, lila.port)
  let first = null
  const firstBytes = new Promise(resolve => { first = resolve })
  const answer = h2request(session, { onStream: stream => stream.once('data', first) })
  // The backend ends the stream only once the client had the first bytes: a response
  // held until its end would never get there.
  t.equal((await within(10000, 'the first bytes of an answer that has not ended', firstBytes)).toString(), 'partial')
  slow.finish()
  const r = await answer
  t.same([r.status, r.body.toString(), r.rstCode], [200, 'partial and the rest', constants.NGHTTP2_NO_ERROR])
  session.close()
})

t.test('the access log\'s cut marker in text and combined lines', async t => {
  const { createAccessLog } = require('../lib/admin/access-log')
  const record = {
    listener: 'web',
    protocol: 'http',
    client: '127.0.0.1',
    backend: '127.0.0.1:8080',
    method: 'GET',
    target: '/',
    version: 'HTTP/2.0',
    status: 200,
    bytesIn: 30,
    bytesOut: 9,
    ms: 1.5,
    host: 'a',
    referer: null,
    userAgent: 'h2load',
    cut: 'backend'
  }
  const lineOf = (format, r) => {
    let text = ''
    const log = createAccessLog({ format, stdout: { write (s) { text += s } } })
    log.log(r)
    log.flush()
    return text
  }
  t.match(lineOf('text', record), / -> 127\.0\.0\.1:8080 "GET \/ HTTP\/2\.0" 200 cut=backend in=30 out=9 1\.50ms\n$/)
  t.match(lineOf('combined', record), /"GET \/ HTTP\/2\.0" 200 9 "-" "h2load" "-" "-" "cut=backend"\n$/)
  t.match(lineOf('combined', { ...record, requestId: 'r1' }), /"h2load" "r1" "-" "cut=backend"\n$/)
  t.match(lineOf('combined', { ...record, requestId: 'r1', traceId: 'tr' }), /"h2load" "r1" "tr" "cut=backend"\n$/)
  const { cut, ...whole } = record
  t.match(lineOf('text', whole), /" 200 in=30 out=9 1\.50ms\n$/, 'a complete response has no marker')
  t.match(lineOf('combined', whole), /" 200 9 "-" "h2load"\n$/)
})
