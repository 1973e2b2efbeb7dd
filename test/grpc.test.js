'use strict'

// --protocol grpc with real gRPC clients (@grpc/grpc-js; grpcurl when installed) and
// grpc-js backends: unary calls balanced per call, every kind of streaming passed as it
// comes, a backend's status unchanged, and lila's own failures as gRPC statuses
// (UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED) in trailers-only answers, never
// an error page. Also a gRPC call on a plain --protocol http listener, from HTTP/2 and
// HTTP/1.1 clients.

const t = require('tap')
const http2 = require('http2')
const { spawnLila, startLila, deadPort, until, isSettled, within, request, statusJson } = require('./fixtures/helpers')
const { load, MISSING, grpcBackend, echoClient, unary, readAll, grpcurl } = require('./fixtures/grpc')
const { tool } = require('./fixtures/tools')

const { parseTimeout, encodeMessage, codeOf, callType } = require('../lib/proxy/message/grpc')
const { answerOf } = require('../lib/proxy/message/replies')
const { reply } = require('../lib/proxy/http1/replies')
const { answerList } = require('../lib/proxy/http2/replies')
const { listObject, h2Backend } = require('./fixtures/h2')

t.test('grpc.js: grpc-timeout, grpc-message, the codes of lila\'s statuses (pure)', async t => {
  t.same(['5S', '100m', '2M', '1H', '1500u', '999n', '0S', '99999999H', '123456789S', '5 S', '5s', '', null].map(parseTimeout),
    [5000, 100, 120000, 3600000, 2, 1, 0, 2 ** 31 - 1, -1, -1, -1, -1, -1])
  t.equal(encodeMessage('ok: 100% é\n'), 'ok: 100%25 %C3%A9%0A', 'percent-encoded: %, non-ASCII, control bytes')
  t.same([502, 503, 504, 408, 429, 431, 400, 508].map(codeOf), [14, 14, 4, 4, 8, 8, 13, 2])
  t.equal(callType({ contentType: 'application/grpc+proto' }, false), 'application/grpc+proto')
  t.equal(callType({ contentType: 'text/plain' }, false), null, 'not a call')
  t.equal(callType({ contentType: null }, true), 'application/grpc', 'every request on a grpc listener')
  t.equal(callType({ contentType: null }, false), null)
})

t.test('replies: one answer, said in HTTP/1.1 or HTTP/2, as text or as a gRPC status', async t => {
  const grpcShaped = answerOf(503, 'no backend', { grpc: 'application/grpc', retryAfter: 5 })
  t.same(grpcShaped, {
    status: 200,
    reason: 'OK',
    version: 1,
    fields: ['Content-Type', 'content-type', 'application/grpc', 'grpc-status', 'grpc-status', '14',
      'grpc-message', 'grpc-message', 'no backend', 'Retry-After', 'retry-after', '5'],
    connection: null,
    body: Buffer.alloc(0),
    length: undefined
  })
  t.equal(answerOf(503, 'full', { grpc: 'application/grpc', exhausted: true }).fields[5], '8', 'exhausted: RESOURCE_EXHAUSTED')
  t.equal(reply(503, 'no backend', { retryAfter: 5 }).toString(),
    'HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n' +
    'Retry-After: 5\r\nContent-Length: 36\r\n\r\n503 Service Unavailable: no backend\n')
  t.equal(reply(504, 'slow', { grpc: 'application/grpc', close: true }).toString(),
    'HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\ngrpc-status: 4\r\ngrpc-message: slow\r\n' +
    'Content-Length: 0\r\nConnection: close\r\n\r\n')
  const h2 = answerList(502, 'gone', { grpc: 'application/grpc' })
  t.same(listObject(h2.list), { ':status': '200', 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': 'gone' })
  t.equal(h2.body.length, 0, 'no body: the headers end the stream')
  t.equal(listObject(answerList(502, 'gone').list)['content-length'], String('502 Bad Gateway: gone\n'.length))
})

const libs = load()
if (libs === null) t.skip(`gRPC end to end: ${MISSING}`)
// The codes, also when grpc-js is missing (the end-to-end tests skip then).
const CODE = libs === null ? {} : libs.grpc.status
const e2e = (...args) => libs === null ? t.skip(...args) : t.test(...args)

const GRPC = ['--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0']

// The clients close their connections first (a grpc-js channel stays open).
async function settles (t, lila, ...clients) {
  for (const client of clients) client.close()
  await until(() => isSettled({ listeners: [lila.stats()] }), 'live counts to return to zero')
  t.pass('every live count is back to zero')
}

// A gRPC call by hand (Node's http2 client), for what a gRPC library would not show:
// the grpc-timeout header as given (with no deadline of the client's own), and the
// answer's frames. -> { headers, endStream (the headers ended the stream), trailers }
// `session`: one to use (and keep open), else one of its own.
function rawCall (port, { path = '/lila.test.Echo/Unary', text = 'raw', headers = {}, session: shared = null } = {}) {
  return within(20000, `a call to ${path}`, new Promise((resolve, reject) => {
    const session = shared || http2.connect(`http://127.0.0.1:${port}`)
    if (shared === null) session.on('error', reject)
    const stream = session.request({
      ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers
    })
    const message = Buffer.concat([Buffer.from([0x0a, text.length]), Buffer.from(text)])
    const prefix = Buffer.alloc(5)
    prefix.writeUInt32BE(message.length, 1)
    stream.end(Buffer.concat([prefix, message]))
    const out = { headers: null, endStream: false, trailers: null, body: 0 }
    stream.on('response', (headers, flags) => {
      out.headers = headers
      out.endStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0
    })
    stream.on('trailers', headers => { out.trailers = headers })
    stream.on('data', chunk => { out.body += chunk.length })
    stream.on('error', () => {})
    stream.on('close', () => {
      if (shared === null) session.close()
      resolve(out)
    })
  }))
}

// A raw call's gRPC status and message, from its trailers or its trailers-only head.
function statusOf ({ headers, trailers }) {
  const fields = trailers !== null && trailers['grpc-status'] !== undefined ? trailers : headers || {}
  return { status: fields['grpc-status'], message: decodeURIComponent(fields['grpc-message'] || '') }
}

e2e('unary calls alternate over two backends in round-robin; a backend status passes unchanged', async t => {
  const a = await grpcBackend(t, 'a')
  const b = await grpcBackend(t, 'b')
  const lila = await startLila(t, ['rr', a.address, b.address, '--protocol', 'grpc'])
  const client = echoClient(t, lila.port)
  const served = []
  for (let i = 0; i < 6; i++) {
    const { err, value } = await unary(client, `call ${i}`)
    t.error(err)
    served.push(value.text)
  }
  t.same(served, ['a: call 0', 'b: call 1', 'a: call 2', 'b: call 3', 'a: call 4', 'b: call 5'])

  const failed = await unary(client, 'status:5:not here, 100% sure')
  t.equal(failed.err.code, CODE.NOT_FOUND, "the backend's grpc-status reaches the client")
  t.equal(failed.err.details, 'not here, 100% sure', 'and its grpc-message, unchanged')
  const raw = await rawCall(lila.port, { text: 'status:9:precondition' })
  t.equal(raw.headers['grpc-status'], '9')
  t.ok(raw.endStream, "the backend's trailers-only answer ends the stream with its headers, as it came")
  t.same([a.calls + b.calls], [8])
  await settles(t, lila, client)
})

e2e('server, client and bidirectional streaming pass through, message by message', async t => {
  const a = await grpcBackend(t, 'a')
  const lila = await startLila(t, [a.address, '--protocol', 'grpc'])
  const client = echoClient(t, lila.port)

  const server = await readAll(client.ServerStream({ text: '50' }))
  t.error(server.err)
  t.equal(server.messages.length, 50, 'server streaming: every message')
  t.equal(server.messages[49], 'a 49')

  const joined = await within(10000, 'the client stream', new Promise(resolve => {
    const call = client.ClientStream((err, value) => resolve({ err, value }))
    for (let i = 0; i < 20; i++) call.write({ text: String(i) })
    call.end()
  }))
  t.error(joined.err)
  t.equal(joined.value.text, `a: ${Array.from({ length: 20 }, (_, i) => i).join(',')}`, 'client streaming: every message')

  // Bidi: each message is sent only once the answer to the previous one came back, so
  // nothing of either stream may be held back by lila.
  const answers = await within(10000, 'the bidi stream', new Promise((resolve, reject) => {
    const call = client.Bidi()
    const got = []
    let n = 0
    call.on('data', msg => {
      got.push(msg.text)
      if (++n < 5) call.write({ text: `ping ${n}` })
      else call.end()
    })
    call.on('error', reject)
    call.on('end', () => resolve(got))
    call.write({ text: 'ping 0' })
  }))
  t.same(answers, ['a: ping 0', 'a: ping 1', 'a: ping 2', 'a: ping 3', 'a: ping 4'], 'bidi: five round trips on one call')
  await settles(t, lila, client)
})

e2e('every backend dead: UNAVAILABLE (14), in a trailers-only answer', async t => {
  const lila = await spawnLila(t, [`127.0.0.1:${await deadPort()}`, `127.0.0.1:${await deadPort()}`, ...GRPC])
  const client = echoClient(t, lila.port)
  const { err } = await unary(client, 'anyone?')
  t.equal(err.code, CODE.UNAVAILABLE, 'grpc-js: UNAVAILABLE')
  t.match(err.details, /connection refused/, "lila's reason in grpc-message")

  const raw = await rawCall(lila.port)
  t.equal(raw.headers[':status'], 200)
  t.equal(raw.headers['content-type'], 'application/grpc')
  t.equal(raw.headers['grpc-status'], '14')
  t.ok(raw.endStream, 'trailers-only: the headers end the stream')
  t.equal(raw.body, 0, 'no error page')

  if (tool('grpcurl').skip) {
    t.skip(tool('grpcurl').skip)
  } else {
    const res = await grpcurl(lila.port, 'lila.test.Echo/Unary', { text: 'anyone?' })
    t.not(res.code, 0, 'grpcurl fails')
    t.match(res.stderr, /Code: Unavailable/, 'grpcurl: Unavailable')
  }
})

e2e('grpcurl through lila: a call served, and a backend status passed', { skip: tool('grpcurl').skip }, async t => {
  const a = await grpcBackend(t, 'a')
  const lila = await spawnLila(t, [a.address, ...GRPC])
  const ok = await grpcurl(lila.port, 'lila.test.Echo/Unary', { text: 'hello' })
  t.equal(ok.code, 0, ok.stderr)
  t.same(JSON.parse(ok.stdout), { text: 'a: hello' })
  const failed = await grpcurl(lila.port, 'lila.test.Echo/Unary', { text: 'status:7:go away' })
  t.match(failed.stderr, /Code: PermissionDenied\s+Message: go away/)
})

e2e('no room to wait, and a rate limit: RESOURCE_EXHAUSTED (8)', async t => {
  const a = await grpcBackend(t, 'a')
  // One call at a time, and no queue: a second call has nowhere to go.
  const lila = await startLila(t, [`${a.address},max-conn=1`, '--protocol', 'grpc', '--queue-timeout', '0s'])
  const client = echoClient(t, lila.port)
  const held = unary(client, 'hold')
  await until(() => a.held.length === 1, 'the first call to reach the backend')
  const { err } = await unary(client, 'second')
  t.equal(err.code, CODE.RESOURCE_EXHAUSTED, 'every backend at its max-conn, no queue: RESOURCE_EXHAUSTED')
  t.match(err.details, /no backend available/)
  a.releaseHeld()
  t.equal((await held).value.text, 'a: held')
  await settles(t, lila, client)

  const limited = await startLila(t, [a.address, '--protocol', 'grpc', '--rate-limit', '1/m'])
  const second = echoClient(t, limited.port)
  t.error((await unary(second, 'one')).err)
  const refused = await unary(second, 'two')
  t.equal(refused.err.code, CODE.RESOURCE_EXHAUSTED, "lila's 429 (--rate-limit): RESOURCE_EXHAUSTED")
})

e2e('the queue full (1,024 calls waiting): RESOURCE_EXHAUSTED (8) for the next', async t => {
  const a = await grpcBackend(t, 'a')
  const lila = await startLila(t, [`${a.address},max-conn=1`, '--protocol', 'grpc', '--queue-timeout', '30s'])
  const client = echoClient(t, lila.port)
  const held = unary(client, 'hold')
  await until(() => a.held.length === 1, 'the first call to reach the backend')
  // 1,024 more wait, over 9 connections (128 streams each at most).
  const sessions = Array.from({ length: 9 }, () => http2.connect(`http://127.0.0.1:${lila.port}`))
  t.teardown(() => { for (const session of sessions) session.destroy() })
  const waiting = Array.from({ length: 1024 }, (_, i) => rawCall(lila.port, { text: `w${i}`, session: sessions[i % 9] }))
  await until(() => lila.stats().queued === 1024, '1,024 calls in the queue', { timeout: 10000 })
  const full = await rawCall(lila.port, { text: 'one too many' })
  t.equal(full.headers['grpc-status'], '8', 'RESOURCE_EXHAUSTED')
  t.ok(full.endStream, 'trailers-only')
  a.releaseHeld()
  await held
  const served = await Promise.all(waiting)
  t.equal(served.filter(r => r.trailers !== null && r.trailers['grpc-status'] === '0').length, 1024, 'the waiting calls are served once a slot frees')
  for (const session of sessions) session.close()
  await settles(t, lila, client)
})

e2e('grpc-timeout: DEADLINE_EXCEEDED (4) when it runs out while lila holds the call', async t => {
  const a = await grpcBackend(t, 'a')
  const lila = await startLila(t, [`${a.address},max-conn=1`, '--protocol', 'grpc', '--queue-timeout', '30s'])
  const client = echoClient(t, lila.port)
  const held = unary(client, 'hold')
  await until(() => a.held.length === 1, 'the first call to reach the backend')

  // Queued behind it: the call's own deadline ends its wait (the client sets none of
  // its own here, so the answer can only be lila's).
  const queued = await rawCall(lila.port, { text: 'queued', headers: { 'grpc-timeout': '200m' } })
  t.equal(queued.headers['grpc-status'], '4', 'DEADLINE_EXCEEDED')
  t.match(decodeURIComponent(queued.headers['grpc-message']), /deadline \(grpc-timeout 200m\) passed while it waited for a backend slot/)
  t.ok(queued.endStream, 'trailers-only')
  t.equal(lila.stats().queued, 0, 'it left the queue')

  // Reached a backend that does not answer and keeps no deadline of its own (a plain
  // HTTP/2 server), so the answer can only be lila's: lila ends the call, and resets the
  // backend's stream.
  const silent = await h2Backend(t, 'silent', () => {})
  const toSilent = await startLila(t, [silent.address, '--protocol', 'grpc'])
  const backendStream = new Promise(resolve => silent.server.once('stream', stream => {
    stream.on('close', () => resolve(stream.rstCode))
  }))
  const slow = await rawCall(toSilent.port, { text: 'hold', headers: { 'grpc-timeout': '1S' } })
  t.equal(slow.headers['grpc-status'], '4')
  t.match(decodeURIComponent(slow.headers['grpc-message']), /passed before backend 127\.0\.0\.1:\d+ answered/)
  t.ok(slow.endStream, 'trailers-only')
  t.equal(await backendStream, http2.constants.NGHTTP2_CANCEL, "the backend's stream is let go (CANCEL)")

  // A backend that keeps the deadline it was sent (grpc-js does) reaches it at the same
  // moment as lila: whichever of the two says so first, the client is told
  // DEADLINE_EXCEEDED.
  a.releaseHeld()
  await held
  const raced = await rawCall(lila.port, { text: 'hold', headers: { 'grpc-timeout': '1S' } })
  const said = decodeURIComponent(raced.headers['grpc-message'])
  t.equal(raced.headers['grpc-status'], '4', `DEADLINE_EXCEEDED (${said})`)
  t.match(said, /^(the call's deadline \(grpc-timeout 1S\) passed before backend 127\.0\.0\.1:\d+ answered|Deadline exceeded)$/)
  t.equal(a.calls, 2, 'the queued call never reached the backend')

  // A deadline that has not passed changes nothing; a malformed one is ignored.
  a.releaseHeld()
  const inTime = await rawCall(lila.port, { text: 'x', headers: { 'grpc-timeout': '5S' } })
  t.same(statusOf(inTime), { status: '0', message: 'OK' }, 'a deadline not reached: the backend answers')
  const malformed = await rawCall(lila.port, { text: 'x', headers: { 'grpc-timeout': '5 seconds' } })
  t.equal(a.calls + (malformed.headers['grpc-status'] === undefined ? 0 : 1), 4, "a malformed grpc-timeout: the backend's to judge (grpc-js refuses it)")
  await settles(t, toSilent)
  await settles(t, lila, client)
})

e2e('a call is retried elsewhere only when none of it reached a backend', async t => {
  const good = await grpcBackend(t, 'good')
  // A backend that takes the call's headers and resets the stream.
  const resetting = http2.createServer()
  resetting.on('stream', stream => {
    stream.on('error', () => {})
    stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR)
  })
  await new Promise(resolve => resetting.listen(0, '127.0.0.1', resolve))
  t.teardown(() => resetting.close())
  const resetAddress = `127.0.0.1:${resetting.address().port}`

  const lila = await startLila(t, ['rr', resetAddress, good.address, '--protocol', 'grpc'])
  const client = echoClient(t, lila.port)
  const { err } = await unary(client, 'once')
  t.equal(err.code, CODE.UNAVAILABLE, 'the call reached a backend that failed it: not sent again')
  t.equal(good.calls, 0, 'the other backend never saw it')

  const dead = await startLila(t, ['rr', `127.0.0.1:${await deadPort()}`, good.address, '--protocol', 'grpc'])
  const again = echoClient(t, dead.port)
  const results = [await unary(again, 'one'), await unary(again, 'two')]
  t.same(results.map(r => r.value && r.value.text), ['good: one', 'good: two'], 'a refused connect is retried on the other backend')
})

e2e('--protocol http: a gRPC call gets gRPC-shaped answers; other requests the text page', async t => {
  const lila = await startLila(t, [`127.0.0.1:${await deadPort()}`, '--protocol', 'http', '--backend-protocol', 'h2'])
  const client = echoClient(t, lila.port)
  const { err } = await unary(client, 'x')
  t.equal(err.code, CODE.UNAVAILABLE, 'content-type application/grpc: UNAVAILABLE')

  const web = await rawCall(lila.port, { headers: { 'content-type': 'application/grpc-web+proto' } })
  t.equal(web.headers['content-type'], 'application/grpc-web+proto', "the answer says the call's own content-type")
  t.equal(web.headers['grpc-status'], '14')

  const many = {}
  for (let i = 0; i < 101; i++) many[`x-field-${i}`] = 'v'
  const tooMany = await rawCall(lila.port, { headers: many })
  t.equal(tooMany.headers['grpc-status'], '8', 'a call lila refuses (431, too many fields): RESOURCE_EXHAUSTED')

  const plain = await request(lila.port, { path: '/' })
  t.equal(plain.status, 502, 'a plain request: the HTTP status')
  t.match(plain.body.toString(), /^502 Bad Gateway: /)

  // HTTP/1.1 clients (to HTTP/2 backends, from-http1.js; to HTTP/1.1 ones, exchange.js).
  for (const backendProtocol of ['h2', 'h1']) {
    const h1 = await startLila(t, [`127.0.0.1:${await deadPort()}`, '--protocol', 'http', '--backend-protocol', backendProtocol])
    const res = await request(h1.port, { method: 'POST', path: '/pkg.Svc/Call', headers: { 'content-type': 'application/grpc-web' }, body: Buffer.alloc(5) })
    t.equal(res.status, 200, `HTTP/1.1 to ${backendProtocol}: 200`)
    t.equal(res.headers['grpc-status'], '14', `HTTP/1.1 to ${backendProtocol}: grpc-status 14`)
    t.equal(res.headers['content-type'], 'application/grpc-web')
    t.equal(res.body.length, 0)
  }
})

e2e('grpc-timeout: an HTTP/2 backend is sent what is left of the deadline', async t => {
  const backend = await h2Backend(t, 'h2', (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true })
  })
  const lila = await startLila(t, [backend.address, '--protocol', 'grpc'])
  await rawCall(lila.port, { headers: { 'grpc-timeout': '5S' } })
  const sent = /^(\d+)m$/.exec(backend.last['grpc-timeout'])
  t.ok(sent !== null && Number(sent[1]) <= 5000 && Number(sent[1]) > 0, `grpc-timeout ${backend.last['grpc-timeout']}: in milliseconds, no more than the client's 5S`)
  await rawCall(lila.port)
  t.equal(backend.last['grpc-timeout'], undefined, 'none given, none sent')
})

t.test('--protocol grpc takes HTTP options; --backend-protocol h1 contradicts it', async t => {
  const { parseCommandLine } = require('../lib/config/argv')
  const { config } = parseCommandLine([':50051', '--protocol', 'grpc', '--timeout', '5s'])
  t.equal(config.listeners[0].protocol, 'grpc')
  t.equal(config.listeners[0].backendProtocol, 'h2', 'HTTP/2 to backends')
  t.equal(config.listeners[0].name, 'grpc:4444')
  t.throws(() => parseCommandLine([':50051', '--protocol', 'grpc', '--backend-protocol', 'h1']),
    /option --backend-protocol h1 contradicts --protocol grpc: expected h2/)
  const { parseConfigFile } = require('../lib/config/file')
  const file = parseConfigFile(JSON.stringify({ protocol: 'grpc', check: 'grpc:pkg.Svc', listeners: [{ port: 50051, backends: [':50052'] }] }), 'lila.json')
  t.match(file.listeners[0], { protocol: 'grpc', backendProtocol: 'h2', check: { type: 'grpc', service: 'pkg.Svc' } }, 'the config file too')
  t.throws(() => parseConfigFile(JSON.stringify({ listeners: [{ protocol: 'grpc', 'backend-protocol': 'h1', backends: [':1'] }] }), 'lila.json'),
    /^lila\.json: listeners\[0\]\.backend-protocol: h1 contradicts "protocol": "grpc": expected h2/)
})

t.test('--check grpc[:service] parses; the health messages by hand (pure)', async t => {
  const { parseCommandLine } = require('../lib/config/argv')
  const checkOf = spec => parseCommandLine([':1', '--check', spec]).config.listeners[0].check
  t.same(checkOf('grpc'), { type: 'grpc', service: '' })
  t.same(checkOf('grpc:lila.test.Echo'), { type: 'grpc', service: 'lila.test.Echo' })
  t.throws(() => checkOf('grpc:'), /invalid check "grpc:" for --check: expected tcp, http:\/path, grpc\[:service\] or none/)
  const { healthRequest, healthStatus } = require('../lib/wire/grpc-health')
  t.same([...healthRequest('')], [0, 0, 0, 0, 0], 'the whole server: an empty message')
  t.same([...healthRequest('a.B')], [0, 0, 0, 0, 5, 0x0a, 3, 0x61, 0x2e, 0x42], 'field 1, a string')
  const frame = bytes => Buffer.concat([Buffer.from([0, 0, 0, 0, bytes.length]), Buffer.from(bytes)])
  t.equal(healthStatus(frame([0x08, 1])), 'SERVING')
  t.equal(healthStatus(frame([0x08, 2])), 'NOT_SERVING')
  t.equal(healthStatus(frame([])), 'UNKNOWN', 'no field: proto3 default')
  t.equal(healthStatus(frame([0x12, 1, 0x41, 0x08, 1])), 'SERVING', 'an unknown field skipped')
  t.equal(healthStatus(frame([0x08])), null, 'cut short')
  t.equal(healthStatus(Buffer.from([1, 0, 0, 0, 2, 0x08, 1])), null, 'compressed: not read')
})

e2e('--check grpc: a NOT_SERVING backend is taken out, traffic avoids it, the reason shown', async t => {
  const a = await grpcBackend(t, 'a')
  const b = await grpcBackend(t, 'b')
  const plain = await grpcBackend(t, 'plain')
  plain.services = { 'lila.test.Echo': 'SERVING' }
  plain.health = undefined // the whole server: NOT_FOUND
  // A probe's timeout is its interval: 500 ms leaves a busy machine room to open an
  // HTTP/2 session and answer (100 ms did not: 'grpc health check timed out'), and
  // --fall 2 keeps one slow probe from taking the serving backend out.
  const lila = await spawnLila(t, ['rr', a.address, b.address, ...GRPC, '--check', 'grpc', '--check-interval', '500ms',
    '--rise', '1', '--fall', '2', '--status-port', '0', '--status-host', '127.0.0.1'])
  t.match(lila.stderr, new RegExp(`${b.address}\\s+up\\s+grpc SERVING`), 'the start-up table says what the check found')
  const client = echoClient(t, lila.port)
  t.same([(await unary(client, '1')).value.text, (await unary(client, '2')).value.text].sort(), ['a: 1', 'b: 2'])

  b.health = 'NOT_SERVING'
  await lila.waitForLine(new RegExp(`backend ${b.address} down: grpc NOT_SERVING`))
  const texts = []
  for (let i = 0; i < 4; i++) texts.push((await unary(client, String(i))).value.text)
  t.same(texts, ['a: 0', 'a: 1', 'a: 2', 'a: 3'], 'every call goes to the backend still serving')
  const snapshot = await statusJson(lila)
  t.equal(snapshot.listeners[0].backends.find(x => x.address === b.address).downReason, 'grpc NOT_SERVING', 'the status says why')

  b.health = 'SERVING'
  await lila.waitForLine(new RegExp(`backend ${b.address} up`))

  // A named service; a server without the health service at all.
  const named = await spawnLila(t, [plain.address, a.address, ...GRPC, '--check', 'grpc:lila.test.Echo', '--check-interval', '500ms'])
  t.match(named.stderr, new RegExp(`${plain.address}\\s+up\\s+grpc SERVING`))
  const whole = await spawnLila(t, [plain.address, ...GRPC, '--check', 'grpc'])
  t.match(whole.stderr, new RegExp(`${plain.address}\\s+down\\s+grpc-status 5`), 'NOT_FOUND from the service: grpc-status 5')
  const h2only = http2.createServer((req, res) => { res.statusCode = 404; res.end() })
  await new Promise(resolve => h2only.listen(0, '127.0.0.1', resolve))
  t.teardown(() => h2only.close())
  const notGrpc = await spawnLila(t, [`127.0.0.1:${h2only.address().port}`, ...GRPC, '--check', 'grpc'])
  t.match(notGrpc.stderr, /down\s+grpc http 404/, 'not a gRPC server: its HTTP status')
  client.close()
})
