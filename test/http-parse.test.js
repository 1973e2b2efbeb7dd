'use strict'

// The HTTP framing layer as pure functions: heads, chunked bodies, rewritten heads.

const t = require('tap')
const { findHeadEnd, parseRequestHead, parseResponseHead, parseKeepAlive, hasBareLf } = require('../lib/proxy/http1/parse')
const { ChunkedReader } = require('../lib/proxy/http1/chunked')
const { viaLoops } = require('../lib/proxy/message/rewrite')
const { h1Request: requestHead, h1Response: responseHead } = require('./fixtures/rewrite')
// The exchange as the rewrite reads it: the client's address, the request ID (--request-id).
const from = clientAddress => ({ clientAddress, requestId: null })
const { idleFromHint } = require('../lib/proxy/http1/connection-pool')

function req (text) {
  const buf = Buffer.from(text, 'latin1')
  return parseRequestHead(buf, 0, findHeadEnd(buf, 0))
}

function res (text, method = 'GET') {
  const buf = Buffer.from(text, 'latin1')
  return parseResponseHead(buf, 0, findHeadEnd(buf, 0), method)
}

function refused (t, text, status, message) {
  t.throws(() => req(text), { status, message }, `${JSON.stringify(text.slice(0, 60))} -> ${status}`)
}

t.test('request heads: what is accepted', async t => {
  const head = req('POST /a/b?c=1 HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\nConnection: keep-alive, X-Hop\r\nX-Empty:\r\nX-Spaces:   padded value \t\r\n\r\n')
  t.equal(head.method, 'POST')
  t.equal(head.target, '/a/b?c=1')
  t.equal(head.path, '/a/b')
  t.equal(head.version, 1)
  t.equal(head.host, 'example.test')
  t.equal(head.bodyLength, 5)
  t.equal(head.chunked, false)
  t.equal(head.keepAlive, true)
  t.same(head.connection, ['keep-alive', 'x-hop'])
  t.same(head.fields.slice(-6), ['X-Empty', 'x-empty', '', 'X-Spaces', 'x-spaces', 'padded value'], 'names as sent and in lower case; whitespace trimmed')

  t.equal(req('GET / HTTP/1.0\r\n\r\n').keepAlive, false, 'HTTP/1.0 closes by default')
  t.equal(req('GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n').keepAlive, true)
  t.equal(req('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n').keepAlive, false)
  t.same(req('GET / HTTP/1.1\r\nHost: x\r\nConnection: \tclose ,\xa0x-hop\xa0\r\n\r\n').connection, ['close', '\xa0x-hop\xa0'],
    'tokens lose spaces and tabs around them, and only those')
  t.equal(req('GET http://example.test/x/y?z HTTP/1.1\r\nHost: example.test\r\n\r\n').path, '/x/y', 'absolute form')
  t.equal(req('OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n').path, '*', 'asterisk form')
  t.equal(req('POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n').chunked, true, 'coding names are case-insensitive')
  for (const te of ['\tchunked', 'chunked\t', ' \tchunked\t ']) {
    t.equal(req(`POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:${te}\r\n\r\n`).chunked, true, `tabs are OWS: ${JSON.stringify(te)}`)
    t.equal(res(`HTTP/1.1 200 OK\r\nTransfer-Encoding:${te}\r\n\r\n`).chunked, true, `in responses too: ${JSON.stringify(te)}`)
  }
  t.equal(req('GET / HTTP/1.1\r\nHost: x\r\n\r\n').bodyLength, 0, 'no framing header: no body')
  const upgrade = req('GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n')
  t.equal(upgrade.isUpgrade, true)
  t.equal(upgrade.upgrade, 'websocket')
  t.equal(req('GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\r\n').isUpgrade, false, 'no h2c upgrades')
})

t.test('request heads: what is refused, and with which status', async t => {
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n', 400, /both Content-Length and Transfer-Encoding/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', 400, /more than one Content-Length/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n', 400, /more than one Content-Length/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n', 400, /invalid Content-Length/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n', 400, /invalid Content-Length/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999\r\n\r\n', 400, /invalid Content-Length/)
  for (const coding of ['xchunked', 'chunked, identity', 'gzip, chunked', 'chunked ;', 'identity', 'chunked\t,']) {
    refused(t, `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${coding}\r\n\r\n`, 400, /unsupported Transfer-Encoding|tab in Transfer-Encoding/)
  }
  refused(t, 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', 400, /unsupported Transfer-Encoding/)
  refused(t, 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n', 400, /HTTP\/1\.0/)
  refused(t, 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\t\r\n\r\nx', 400, /tab in Content-Length/)
  refused(t, 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\x0b\r\n\r\n', 400, /control character/)
  refused(t, 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\x0c\r\n\r\nx', 400, /control character/)
  t.equal(req('GET / HTTP/1.1\r\nHost: x\r\nX: \xa0v\xa0\r\n\r\n').fields[5], '\xa0v\xa0', 'only spaces and tabs are trimmed')
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n', 400, /folding/)
  refused(t, 'GET / HTTP/1.1\r\nHost : x\r\n\r\n', 400, /invalid header name/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n', 400, /without a name and colon/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n', 400, /control character/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n', 400, /bare CR or LF/)
  refused(t, 'GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n', 400, /bare CR or LF/)
  refused(t, 'GET / HTTP/1.1\r\n\r\n', 400, /missing Host/)
  refused(t, 'GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 400, /more than one Host/)
  refused(t, 'GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n', 400, /more than one Host/)
  refused(t, 'G(T / HTTP/1.1\r\nHost: x\r\n\r\n', 400, /malformed request line/)
  refused(t, 'GET  / HTTP/1.1\r\nHost: x\r\n\r\n', 400, /malformed request line/)
  refused(t, 'GET / HTTP/1.1 \r\nHost: x\r\n\r\n', 400, /malformed request line/)
  refused(t, 'GET /a b HTTP/1.1\r\nHost: x\r\n\r\n', 400, /malformed request line/)
  refused(t, 'GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n', 400, /malformed request line/)
  refused(t, 'GET / HTTP/2.0\r\nHost: x\r\n\r\n', 505, /not supported/)
  refused(t, 'GET / HTTP/1.2\r\nHost: x\r\n\r\n', 505, /not supported/)
  refused(t, 'GET * HTTP/1.1\r\nHost: x\r\n\r\n', 400, /asterisk-form/)
  refused(t, 'GET example.test/x HTTP/1.1\r\nHost: x\r\n\r\n', 400, /unknown form/)
  refused(t, 'CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n', 405, /CONNECT/)
  refused(t, `GET /${'a'.repeat(9000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 414, /too long/)
  const many = Array.from({ length: 101 }, (_, i) => `X-${i}: ${i}\r\n`).join('')
  refused(t, `GET / HTTP/1.1\r\nHost: x\r\n${many}\r\n`, 431, /too many header fields/)
})

t.test('head boundaries', async t => {
  const buf = Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\nNEXT')
  t.equal(findHeadEnd(buf, 0), buf.length - 4)
  t.equal(findHeadEnd(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r'), 0), -1)
  t.equal(findHeadEnd(buf, 0, 20), buf.length - 4, 'resuming a search finds a CRLFCRLF that straddles the resume point')
  t.equal(hasBareLf(Buffer.from('GET / HTTP/1.1\nHost')), true)
  t.equal(hasBareLf(Buffer.from('GET / HTTP/1.1\r\nHost')), false)
  t.equal(hasBareLf(Buffer.from('\nGET')), true)
  t.equal(hasBareLf(Buffer.from('GET / HTTP/1.1\r\nH'), 16), false, 'a CRLF split across the resume point is no bare LF')
  t.equal(hasBareLf(Buffer.from('GET / HTTP/1.1\r'), 15), false)
  t.equal(hasBareLf(Buffer.from('GET / HTTP/1.1\r\n'), 15), false)
})

t.test('response heads and their framing', async t => {
  const ok = res('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nKeep-Alive: timeout=5, max=100\r\n\r\n')
  t.equal(ok.status, 200)
  t.equal(ok.reason, 'OK')
  t.equal(ok.bodyLength, 5)
  t.same(ok.fields.filter((f, i) => i % 3 === 2 && ok.fields[i - 1] === 'set-cookie'), ['a=1', 'b=2'])
  t.same(parseKeepAlive(ok.keepAliveHint), { timeout: 5000, max: 100 })
  t.equal(res('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n').chunked, true)
  t.equal(res('HTTP/1.1 200 OK\r\n\r\n').bodyLength, -1, 'no framing: until the backend closes')
  t.equal(res('HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n').reason, '', 'reason phrase may be missing')
  t.equal(res('HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n').bodyLength, 0)
  t.equal(res('HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n').bodyLength, 0)
  t.equal(res('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n', 'HEAD').bodyLength, 0, 'a response to HEAD has no body')
  t.equal(res('HTTP/1.1 100 Continue\r\n\r\n').bodyLength, 0)
  t.equal(res('HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n').keepAlive, false)
  t.equal(res('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n').keepAlive, false)
  t.throws(() => res('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n'), { status: 502 })
  t.throws(() => res('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n'), { status: 502 })
  t.throws(() => res('HTTP/1.1 2000 OK\r\n\r\n'), { status: 502 })
  t.throws(() => res('ICY 200 OK\r\n\r\n'), { status: 502 })
  t.same(parseKeepAlive(null), { timeout: -1, max: -1 })
  t.same(parseKeepAlive('max=3'), { timeout: -1, max: 3 })
})

t.test('idle time from a keep-alive hint', async t => {
  t.equal(idleFromHint(-1), 4000, 'no hint: below common backend defaults')
  t.equal(idleFromHint(5000), 4000)
  t.equal(idleFromHint(1000), 500)
  t.equal(idleFromHint(0), 0, 'timeout=0: never reuse')
  t.equal(idleFromHint(600000), 60000, 'capped')
})

function readChunked (text, pieces = 1, onData = null) {
  const buf = Buffer.from(text, 'latin1')
  const reader = new ChunkedReader()
  const step = Math.ceil(buf.length / pieces)
  for (let at = 0; at < buf.length; at += step) {
    const end = reader.read(buf, at, Math.min(at + step, buf.length), onData)
    if (end !== -1) return end
  }
  return -1
}

t.test('chunked bodies', async t => {
  const body = '5\r\nhello\r\n6;name=value\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n'
  for (const pieces of [1, 3, body.length]) {
    let data = ''
    const end = readChunked(body + 'NEXT', pieces === body.length ? body.length + 4 : pieces, (b, s, e) => { data += b.toString('latin1', s, e) })
    t.equal(end, body.length, `the end is found (${pieces} pieces)`)
    t.equal(data, 'hello world', `the data (${pieces} pieces)`)
  }
  t.equal(readChunked('A\r\n0123456789\r\n0\r\n\r\n'), 20, 'hex sizes, either case')
  const zeros = '0000000000000000000005\r\nhello\r\n000000000000000000000\r\n\r\n'
  t.equal(readChunked(zeros), zeros.length, 'leading zeros beyond 16 digits: a legal number (RFC 9112 7.1)')
  const longest = `${'0'.repeat(255)}5\r\nhello\r\n0\r\n\r\n`
  t.equal(readChunked(longest), longest.length, 'up to 256 digits in all')
  t.throws(() => readChunked(`${'0'.repeat(256)}5\r\n`), { message: /chunk size line too long/ })
  t.throws(() => readChunked('0001000000000000\r\n'), { message: /too large/ }, 'zeros do not hide 13 significant digits')
  const quoted = '1;a=b;c="d \\"e\\" f";g\r\nx\r\n0\r\n\r\n'
  t.equal(readChunked(quoted), quoted.length, 'token, quoted and bare extensions')
  t.equal(readChunked('a\r\n0123456789\r\n'), -1, 'not finished')
  const bad = [
    ['', 'no size', 'x\r\n'],
    ['space after size', '5 \r\nhello\r\n0\r\n\r\n'],
    ['tab after size', '5\t\r\nhello\r\n0\r\n\r\n'],
    ['space before size', ' 5\r\nhello\r\n0\r\n\r\n'],
    ['bare LF after size', '5\nhello\r\n0\r\n\r\n'],
    ['data longer than size', '3\r\nhello\r\n0\r\n\r\n'],
    ['size too large', 'fffffffffffff\r\n'],
    ['negative size', '-5\r\nhello\r\n'],
    ['0x prefix', '0x5\r\nhello\r\n'],
    ['control byte in extension', '5;a\x01\r\nhello\r\n'],
    ['whitespace in extension', '5;a=\t\r\nhello\r\n'],
    ['non-ASCII in extension', '5;\xff\r\nhello\r\n'],
    ['colon in extension name', '5;e:t=1\r\nhello\r\n'],
    ['empty extension', '5;\r\nhello\r\n'],
    ['empty extension value', '5;a=\r\nhello\r\n'],
    ['space in trailer name', '0\r\nX-Tr iler: 1\r\n\r\n'],
    ['trailer without colon', '0\r\nXTrailer\r\n\r\n'],
    ['space before extension', '5 ;a\r\nhello\r\n'],
    ['folded trailer', '0\r\nX: 1\r\n folded\r\n\r\n'],
    ['bare LF in trailer', '0\r\nX: 1\nY: 2\r\n\r\n']
  ].map(c => c.length === 3 ? [c[1], c[2]] : c)
  for (const [name, text] of bad) {
    t.throws(() => readChunked(text), { status: 400, message: /malformed chunked body/ }, name)
  }
  t.throws(() => readChunked('fffffffffffff\r\n'), { message: /too large/ })
  const big = new ChunkedReader(502)
  t.throws(() => big.read(Buffer.from('zz\r\n'), 0, 4), { status: 502 }, 'responses fail with 502')
})

t.test('the request head lila sends', async t => {
  const head = req('POST /x HTTP/1.1\r\nHost: example.test\r\nConnection: X-Hop, close, Content-Length, Host\r\nX-Hop: 1\r\nKeep-Alive: 1\r\nTE: trailers\r\nTrailer: X\r\nProxy-Connection: x\r\nContent-Length: 2\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\nVia: 1.0 other\r\n\r\n')
  const text = requestHead(head, from('10.0.0.9'), 'backend:80', { proto: 'http', via: 'lila-abc', forwarded: false, host: null, request: null })
  t.equal(text, 'POST /x HTTP/1.1\r\nHost: example.test\r\nContent-Length: 2\r\n' +
    'X-Forwarded-For: 1.1.1.1, 2.2.2.2, 10.0.0.9\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: example.test\r\n' +
    'Via: 1.0 other, 1.1 lila-abc\r\n\r\n',
  'hop-by-hop gone; Connection cannot remove Host or Content-Length; forwarding headers lila\'s own, Via one list')
  const chunked = req('POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n')
  t.match(requestHead(chunked, from('::1'), 'b:1', { proto: 'http', via: 'v', forwarded: true, host: null, request: null }), /\r\nForwarded: for="\[::1\]";proto=http;host=h\r\n[\s\S]*\r\nTransfer-Encoding: chunked\r\n\r\n$/)
  const announced = req('POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n')
  t.match(requestHead(announced, from('::1'), 'b:1', { proto: 'http', via: 'v', forwarded: false, host: null, request: null }), /\r\nTrailer: X-Sum\r\n/,
    'Trailer is end-to-end (RFC 9110 6.6.2): kept on a chunked request')
  const response = res('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n')
  t.match(responseHead(response, { chunked: true }), /\r\nTrailer: X-Sum\r\n/, 'and on a chunked response')
  t.notMatch(responseHead(response, { chunked: false, close: true }), /Trailer/, 'dropped with the trailers when decoded for HTTP/1.0')
  const old = req('GET / HTTP/1.0\r\n\r\n')
  t.match(requestHead(old, from('1.2.3.4'), 'b:1', { proto: 'http', via: 'v', forwarded: false, host: null, request: null }), /^GET \/ HTTP\/1\.1\r\nHost: b:1\r\n/, 'HTTP/1.0 without Host: the backend address')
})

t.test('an absolute-form target: its authority is the Host (RFC 9112 3.2.2)', async t => {
  const settings = { proto: 'http', via: 'v', forwarded: true, host: null, request: null }
  const head = req('GET http://evil.example:8080/abs?q HTTP/1.1\r\nHost: good.example\r\n\r\n')
  t.equal(head.host, 'evil.example:8080')
  t.equal(head.path, '/abs')
  const text = requestHead(head, from('10.0.0.9'), 'b:1', settings)
  t.same(text.match(/^Host: .*$/gm), ['Host: evil.example:8080'], 'one Host, the target\'s; the conflicting one is gone')
  t.match(text, /\r\nX-Forwarded-Host: evil\.example:8080\r\n[\s\S]*;host="evil\.example:8080"\r\n/)
  const origin = req('GET /abs HTTP/1.1\r\nHost: good.example\r\n\r\n')
  t.same(requestHead(origin, from('10.0.0.9'), 'b:1', settings).match(/^Host: .*$/gm), ['Host: good.example'],
    'an origin-form target keeps its Host')
  t.throws(() => req('GET http://user@evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n'),
    { status: 400, message: 'user information in the request target' })
})

t.test('the response head the client gets', async t => {
  const r = res('HTTP/1.1 200 OK\r\nConnection: X-Secret\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a\r\nSet-Cookie: b\r\n\r\n')
  t.equal(responseHead(r, { chunked: true, close: false }), 'HTTP/1.1 200 OK\r\nSet-Cookie: a\r\nSet-Cookie: b\r\nTransfer-Encoding: chunked\r\n\r\n')
  t.throws(() => res('HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n'), /more than one Content-Length/, 'a repeated Content-Length from a backend is refused too')
  t.equal(responseHead(res('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n', 'HEAD'), {}), 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n', 'HEAD keeps the length it would have had')
  t.equal(responseHead(r, { chunked: false, close: true }), 'HTTP/1.1 200 OK\r\nSet-Cookie: a\r\nSet-Cookie: b\r\nConnection: close\r\n\r\n')
  t.equal(responseHead(res('HTTP/1.1 204 No Content\r\n\r\n'), { keepAlive10: true }), 'HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n')
})

t.test('loop detection looks for lila\'s own Via token only', async t => {
  t.equal(viaLoops(req('GET / HTTP/1.1\r\nHost: x\r\nVia: 1.1 lila-abc\r\n\r\n'), 'lila-abc'), true)
  t.equal(viaLoops(req('GET / HTTP/1.1\r\nHost: x\r\nVia: 1.0 a, 1.1 lila-abc (x)\r\n\r\n'), 'lila-abc'), true)
  t.equal(viaLoops(req('GET / HTTP/1.1\r\nHost: x\r\nVia: 1.1 lila-abcd\r\n\r\n'), 'lila-abc'), false, 'another lila')
  t.equal(viaLoops(req('GET / HTTP/1.1\r\nHost: x\r\nVia: 1.0 a,\t1.1\tlila-abc\r\n\r\n'), 'lila-abc'), true, 'tabs are whitespace too')
  t.equal(viaLoops(req('GET / HTTP/1.1\r\nHost: x\r\nVia: 1.1\xa0lila-abc\r\n\r\n'), 'lila-abc'), false, 'a no-break space is not')
  t.equal(viaLoops(req('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), 'lila-abc'), false)
})

t.test('known names and repeated values: found in the head, each head still its own', async t => {
  // fields.js keeps the last value of a few names (Host, Date, Connection, ...) and the
  // usual names; a head that differs by a byte, a length or a case gets its own.
  const hosts = ['a.example', 'a.example', 'a.example.org', 'a.exampl', 'b.example', 'a.example']
  for (const host of hosts) {
    const head = req(`GET / HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: ua/${host.length}\r\n\r\n`)
    t.equal(head.host, host, `Host ${host}`)
    t.same(head.fields, ['Host', 'host', host, 'User-Agent', 'user-agent', `ua/${host.length}`])
  }
  const cased = req('GET / HTTP/1.1\r\nhOST: a.example\r\nHOST-X: 1\r\nHosts: 2\r\n\r\n')
  t.same(cased.fields, ['hOST', 'host', 'a.example', 'HOST-X', 'host-x', '1', 'Hosts', 'hosts', '2'],
    'a known name in another case, or one that starts like it, is read as sent')
  const values = ['keep-alive', 'keep-alive', 'keep-alive, upgrade', 'close', 'keep-alivE']
  for (const value of values) {
    const head = res(`HTTP/1.1 200 OK\r\nDate: Sat, 28 Nov 2026 20:00:0${value.length % 10} GMT\r\nConnection: ${value}\r\nContent-Length: 0\r\n\r\n`)
    t.equal(head.fields[2], `Sat, 28 Nov 2026 20:00:0${value.length % 10} GMT`, `Date beside ${value}`)
    t.equal(head.fields[5], value, `Connection: ${value}`)
  }
  refused(t, 'GET / HTTP/1.1\r\nHost: a.example\r\nHo st: x\r\n\r\n', 400, 'invalid header name "Ho st"')
})
