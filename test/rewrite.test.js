'use strict'

// The one rewrite (lib/proxy/message/rewrite.js): what a backend is sent and what a
// client gets back, decided once and only serialised by each codec. A table of heads,
// HTTP/1.1's and HTTP/2's, goes through both serialisers, and each backend and client
// gets the same fields; then the received version in Via (RFC 9110 7.6.3), through the
// real executable to an HTTP/1.1 and an HTTP/2 backend.

const t = require('tap')
const net = require('net')
const { spawnLila, httpBackend, within } = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')
const { h1Request, h2Request, h1Response, h2Response, settingsOf, rulesOf: rules } = require('./fixtures/rewrite')
const { findHeadEnd, parseRequestHead, parseResponseHead } = require('../lib/proxy/http1/parse')
const message = require('../lib/wire/h2/message')
const { reply } = require('../lib/proxy/http1/replies')
const { answerList } = require('../lib/proxy/http2/replies')

const h1 = text => {
  const buf = Buffer.from(text, 'latin1')
  return parseRequestHead(buf, 0, findHeadEnd(buf, 0))
}
const h2 = (list, endStream = true) => message.requestHead(list, endStream, null)
const h1Res = (text, method = 'GET') => {
  const buf = Buffer.from(text, 'latin1')
  return parseResponseHead(buf, 0, findHeadEnd(buf, 0), method)
}
const h2Res = (list, endStream = false) => message.responseHead(list, endStream, null)

const field = (name, value) => ({ name, value })

// What each protocol carries on its own, not a field the rewrite decides: HTTP/1.1's
// framing and connection options; HTTP/2's pseudo-headers but :authority (the Host),
// and TE: trailers, which HTTP/2 allows alone of TE (gRPC needs it) and HTTP/1.1 would
// need named in Connection (heads.js leaves it out).
const H1_OWN = new Set(['transfer-encoding', 'connection', 'upgrade'])
const H2_OWN = new Set([':method', ':scheme', ':path', ':status', 'te'])

// A request head as text, back to [lower-case name, value] pairs, by lila's own parser.
function h1Fields (text) {
  const head = text.startsWith('HTTP/') ? h1Res(text) : h1(text)
  const out = []
  for (let i = 0; i < head.fields.length; i += 3) {
    if (!H1_OWN.has(head.fields[i + 1])) out.push([head.fields[i + 1], head.fields[i + 2]])
  }
  return out
}

function h2Fields (list) {
  const out = []
  for (let i = 0; i < list.length; i += 2) {
    if (!H2_OWN.has(list[i])) out.push([list[i] === ':authority' ? 'host' : list[i], list[i + 1]])
  }
  return out
}

const from = { clientAddress: '10.0.0.9', requestId: 'id-1', continued: false }

const REQUESTS = [
  ['a plain GET', h1('GET /a?b HTTP/1.1\r\nHost: front.example\r\nAccept: */*\r\n\r\n')],
  ['forwarding fields folded, hop-by-hop and what Connection names dropped',
    h1('POST /x HTTP/1.1\r\nHost: example.test\r\nConnection: X-Hop, close, Content-Length, Host\r\nX-Hop: 1\r\n' +
      'Keep-Alive: 1\r\nTE: trailers, deflate\r\nProxy-Connection: x\r\nContent-Length: 2\r\nX-Forwarded-For: 1.1.1.1\r\n' +
      'X-Forwarded-For: 2.2.2.2\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\nVia: 1.0 other\r\n' +
      'Forwarded: for=1.1.1.1\r\n\r\n')],
  ['a chunked body with its Trailer', h1('POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n')],
  ['a length without trailers: Trailer dropped', h1('POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTrailer: X-Sum\r\n\r\n')],
  ['HTTP/1.0 without Host', h1('GET / HTTP/1.0\r\nUser-Agent: old\r\n\r\n')],
  ['an absolute-form target', h1('GET http://abs.example:8080/p?q HTTP/1.1\r\nHost: other.example\r\n\r\n')],
  ['an upgrade', h1('GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n')],
  ['Expect', h1('PUT /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n')],
  ['HTTP/2: a gRPC call', h2([':method', 'POST', ':scheme', 'http', ':authority', 'grpc.example', ':path', '/svc/M',
    'content-type', 'application/grpc', 'te', 'trailers', 'grpc-timeout', '5S', 'cookie', 'a=1', 'cookie', 'b=2'], false)],
  ['HTTP/2: a length, Host beside :authority, Via', h2([':method', 'POST', ':scheme', 'https', ':authority', 'h2.example',
    ':path', '/u', 'host', 'h2.example', 'content-length', '4', 'via', '2 edge', 'x-forwarded-for', '9.9.9.9'], false)],
  ['HTTP/2: no :authority', h2([':method', 'GET', ':scheme', 'http', ':path', '/', 'host', 'only-host.example'])],
  ['a forged Remote-User, a trace context', h1('GET /me HTTP/1.1\r\nHost: h\r\nRemote-User: mallory\r\n' +
    'remote-groups: admins\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n' +
    'tracestate: vendor=1\r\n\r\n')],
  ['HTTP/2: a forged Remote-User, a trace context', h2([':method', 'GET', ':scheme', 'http', ':authority', 'h',
    ':path', '/me', 'remote-user', 'mallory', 'traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    'tracestate', 'vendor=1'])]
]

const SETTINGS = [
  ['no options', settingsOf({ via: 'lila-ab' })],
  ['--forwarded, https', settingsOf({ via: 'lila-ab', proto: 'https', forwarded: true })],
  ['header rules, a fixed Host', settingsOf({
    via: 'lila-ab',
    ...rules({
      requestId: 'X-Request-ID',
      setHeader: [field('X-Env', 'prod'), field('X-Forwarded-Proto', 'https'), field('X-Client', '{client_ip}')],
      delHeader: ['Accept', 'X-Forwarded-Host', 'Forwarded'],
      hostHeader: 'api.internal'
    })
  })],
  ['--host-header backend', settingsOf({ via: 'lila-ab', ...rules({ hostHeader: 'backend' }) })],
  ['--forward-auth-copy', settingsOf({ via: 'lila-ab', copy: ['Remote-User', 'Remote-Groups'] })],
  ['--forward-auth-copy and a rule on one of its names', settingsOf({
    via: 'lila-ab', copy: ['Remote-User', 'Remote-Groups'], ...rules({ setHeader: [field('Remote-Groups', 'fixed')] })
  })]
]

// --forward-auth's 2xx, as the exchange holds it (edge/forward-auth.js: lower-case names).
const GRANT = new Map([['remote-user', 'alice'], ['remote-groups', 'admins,ops'], ['x-other', 'not copied']])
// --otlp's CLIENT span as the rewrite reads it: under the client's trace (its
// tracestate kept), or one lila began (the client's traceparent unreadable or absent).
const SPAN = '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01'
const UNDER_CLIENT = { traceparent: SPAN, traceState: 'vendor=1' }
const LILAS = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00', traceState: null }

const CONTEXTS = [
  ['', from],
  [', 100 Continue answered', { ...from, continued: true }],
  [', a forward-auth grant', { ...from, grant: GRANT }],
  [', a CLIENT span under the client\'s trace', { ...from, span: UNDER_CLIENT }],
  [', a grant and a CLIENT span of lila\'s trace', { ...from, grant: GRANT, span: LILAS }]
]

t.test('a request: the same fields to an HTTP/1.1 and to an HTTP/2 backend', async t => {
  for (const [settingsName, settings] of SETTINGS) {
    for (const [name, head] of REQUESTS) {
      for (const [ctxName, ctx] of CONTEXTS) {
        const text = h1Request(head, ctx, 'b:1', settings, '99m')
        const list = h2Request(head, ctx, 'b:1', settings, 'http', '99m')
        t.same(h1Fields(text), h2Fields(list), `${name}, ${settingsName}${ctxName}`)
      }
    }
  }
  const viaClient = h1Request(REQUESTS[1][1], from, 'b:1', SETTINGS[0][1])
  t.match(viaClient, /\r\nVia: 1\.0 other, 1\.1 lila-ab\r\n/, 'a Via before lila\'s: one list, lila last')
  t.notMatch(viaClient, /\r\nTE:/i, 'no TE to an HTTP/1.1 backend')
  const list = h2Request(REQUESTS[1][1], from, 'b:1', SETTINGS[0][1])
  t.same(list.filter((name, i) => i % 2 === 0 && name === 'te').map(name => list[list.indexOf(name) + 1]), ['trailers'],
    'TE: trailers to an HTTP/2 backend, its other codings dropped')
  t.same(h2Fields(h2Request(REQUESTS[8][1], from, 'b:1', SETTINGS[0][1])).filter(([name]) => name === 'grpc-timeout'),
    [['grpc-timeout', '5S']], 'no deadline left given: the client\'s grpc-timeout as it came')
  const unix = h2Request(REQUESTS[0][1], { ...from, clientAddress: 'unix:' }, 'b:1', SETTINGS[1][1])
  t.equal(h2Fields(unix).find(([name]) => name === 'forwarded')[1], 'for=unknown;proto=https;host=front.example',
    'a Unix socket\'s client is "unknown" in Forwarded, to an HTTP/2 backend too')
})

t.test('--forward-auth-copy: the auth service\'s fields, never the client\'s, to either backend', async t => {
  const forged = REQUESTS.find(([name]) => name === 'a forged Remote-User, a trace context')[1]
  const forgedH2 = REQUESTS.find(([name]) => name === 'HTTP/2: a forged Remote-User, a trace context')[1]
  const [copy, ruled] = SETTINGS.slice(-2).map(([, settings]) => settings)
  const picked = (fields, ...names) => fields.filter(([name]) => names.includes(name))
  for (const head of [forged, forgedH2]) {
    const v = `HTTP/${head.version === 2 ? '2' : '1.1'} client`
    for (const [backend, fieldsOf] of [['HTTP/1.1', (ctx, s) => h1Fields(h1Request(head, ctx, 'b:1', s))],
      ['HTTP/2', (ctx, s) => h2Fields(h2Request(head, ctx, 'b:1', s))]]) {
      t.same(picked(fieldsOf({ ...from, grant: GRANT }, copy), 'remote-user', 'remote-groups', 'x-other'),
        [['remote-user', 'alice'], ['remote-groups', 'admins,ops']], `${v}, ${backend} backend: the grant's values`)
      t.same(picked(fieldsOf(from, copy), 'remote-user', 'remote-groups'), [],
        `${v}, ${backend} backend: no grant, none of the client's`)
      t.same(picked(fieldsOf({ ...from, grant: GRANT }, ruled), 'remote-user', 'remote-groups'),
        [['remote-user', 'alice'], ['remote-groups', 'fixed']], `${v}, ${backend} backend: a rule has the last word`)
      t.same(picked(fieldsOf(from, SETTINGS[0][1]), 'remote-user'), [['remote-user', 'mallory']],
        `${v}, ${backend} backend: without --forward-auth-copy the field is the client's to send`)
    }
  }
})

t.test('--otlp: the CLIENT span\'s traceparent replaces the client\'s, to either backend', async t => {
  const head = REQUESTS.find(([name]) => name === 'a forged Remote-User, a trace context')[1]
  const settings = SETTINGS[0][1]
  const trace = fields => fields.filter(([name]) => name === 'traceparent' || name === 'tracestate')
  for (const [backend, fieldsOf] of [['HTTP/1.1', ctx => h1Fields(h1Request(head, ctx, 'b:1', settings))],
    ['HTTP/2', ctx => h2Fields(h2Request(head, ctx, 'b:1', settings))]]) {
    t.same(trace(fieldsOf(from)), [['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
      ['tracestate', 'vendor=1']], `${backend}: no span, the client's trace context as it came`)
    t.same(trace(fieldsOf({ ...from, span: UNDER_CLIENT })), [['tracestate', 'vendor=1'], ['traceparent', SPAN]],
      `${backend}: under the client's trace, its tracestate kept`)
    t.same(trace(fieldsOf({ ...from, span: LILAS })), [['traceparent', LILAS.traceparent]],
      `${backend}: a trace lila began, the client's tracestate dropped`)
  }
})

// RFC 9110 7.6.3: Via names the protocol the request was received in. An HTTP/1.0
// request was sent on as "Via: 1.1" to an HTTP/1.1 backend but "1.0" to an HTTP/2 one.
t.test('Via: the version the request was received in, to either backend', async t => {
  const settings = settingsOf({ via: 'lila-ab' })
  const cases = [[REQUESTS[4][1], '1.0 lila-ab'], [REQUESTS[0][1], '1.1 lila-ab'], [REQUESTS[8][1], '2.0 lila-ab']]
  for (const [head, via] of cases) {
    t.match(h1Request(head, from, 'b:1', settings), new RegExp(`\\r\\nVia: ${via}\\r\\n`), `HTTP/1.${head.version}: ${via}`)
    t.same(h2Fields(h2Request(head, from, 'b:1', settings)).filter(([name]) => name === 'via'), [['via', via]])
  }
})

const RESPONSES = [
  ['a length', h1Res('HTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\n')],
  ['chunked, its Trailer, Connection-named and hop-by-hop fields',
    h1Res('HTTP/1.1 200 OK\r\nConnection: X-Secret, keep-alive\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\n' +
      'Transfer-Encoding: chunked\r\nTrailer: X-Sum\r\nSet-Cookie: a\r\nSet-Cookie: b\r\n\r\n')],
  ['a length and a Trailer that cannot follow it', h1Res('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTrailer: X-Sum\r\n\r\n')],
  ['HEAD keeps its length', h1Res('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n', 'HEAD')],
  ['204', h1Res('HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n')],
  ['HTTP/2: a length', h2Res([':status', '200', 'content-type', 'text/html', 'content-length', '7', 'server', 'h2'])],
  ['HTTP/2: trailers to come', h2Res([':status', '200', 'content-type', 'application/grpc', 'trailer', 'grpc-status'])]
]

const RESPONSE_RULES = [
  ['no options', null, null],
  ['response rules and a sticky cookie', rules({
    requestId: 'X-Request-ID',
    setResponseHeader: [field('X-Frame-Options', 'DENY'), field('X-Client', '{client_ip}')],
    delResponseHeader: ['Server', 'Set-Cookie']
  }).response, 'lila-sticky=abc; Path=/']
]

t.test('a response: the same fields to an HTTP/1.1 and to an HTTP/2 client', async t => {
  for (const [rulesName, response, cookie] of RESPONSE_RULES) {
    for (const [name, res] of RESPONSES) {
      // As http1/session.js frames it: a chunked body, or one of no length, in chunks
      // (then its trailers can follow, as they can in HTTP/2); else its length.
      const how = { chunked: res.chunked || (res.contentLength === -1 && res.status !== 204) }
      const length = how.chunked ? -1 : res.contentLength
      const text = h1Response(res, how, response, from, length, cookie)
      const list = h2Response(res, response, from, cookie)
      t.same(h1Fields(text), h2Fields(list), `${name}, ${rulesName}`)
    }
  }
  t.same(h1Fields(reply(503, 'none', { retryAfter: 5, rules: RESPONSE_RULES[1][1], ctx: from }).toString('latin1')),
    h2Fields(answerList(503, 'none', { retryAfter: 5, rules: RESPONSE_RULES[1][1], ctx: from }).list),
    'lila\'s own answers too')
})

// An HTTP/1.0 request, as its client sends it, through the executable: the backend's
// Via says 1.0 whichever protocol lila speaks to it.
function http10 (port) {
  return within(10000, 'an HTTP/1.0 response', new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', chunk => { text += chunk })
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
    socket.end('GET / HTTP/1.0\r\nUser-Agent: old\r\n\r\n')
  }))
}

t.test('through lila: an HTTP/1.0 client\'s request says Via: 1.0 to an HTTP/1.1 and an HTTP/2 backend', async t => {
  const a = await httpBackend(t, 'a')
  const b = await h2Backend(t, 'b')
  for (const [backend, more] of [[a, []], [b, ['--backend-protocol', 'h2']]]) {
    const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', ...more])
    t.match(await http10(lila.port), /^HTTP\/1\.1 200 OK\r\n/)
    const via = backend === a ? backend.last.headers.via : backend.last.via
    t.match(via, /^1\.0 lila-[0-9a-f]{8}$/, `${more.length === 0 ? 'HTTP/1.1' : 'HTTP/2'} backend: ${via}`)
    lila.child.kill()
    await lila.exited
  }
})
