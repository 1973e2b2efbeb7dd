'use strict'

// Request IDs and header control (--request-id, --set-header, --del-header,
// --set-response-header, --del-response-header, --host-header): the pure parts
// (header-rules.js, request-id.js, the rewrites), then the real executable between curl
// and real backends, HTTP/1.1 and HTTP/2 on both sides, and lila's own answers.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawnLila, runLila, httpBackend, deadPort, curl, until } = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')
const { dnsServer } = require('./fixtures/dns-server')
const { requestIdOf } = require('../lib/proxy/http/request-id')
const { parseRequestHead, parseResponseHead } = require('../lib/proxy/http1/parse')
const { h1Request: requestHead, h2Request: requestList, h1Response: responseHead, settingsOf: rewriteOf, rulesOf } = require('./fixtures/rewrite')
const { reply } = require('../lib/proxy/http1/replies')
const { answerList } = require('../lib/proxy/http2/replies')
const { listObject } = require('./fixtures/h2')
const { tmpDir } = require('./fixtures/tmp')

// What an HTTP/2 backend gets, as an object.
const backendRequestHeaders = (...args) => listObject(requestList(...args))
const { parseCommandLine } = require('../lib/config/argv')
const { parseConfigFile } = require('../lib/config/file')

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const LOCAL = ['--host', '127.0.0.1', '--port', '0', '--check', 'none']
const H2C = '--http2-prior-knowledge'

const req = text => {
  const buf = Buffer.from(text)
  return parseRequestHead(buf, 0, buf.length)
}
const res = text => {
  const buf = Buffer.from(text)
  return parseResponseHead(buf, 0, buf.length, 'GET')
}
// The rewrite settings http/protocol.js makes, with the header options compiled.
const settingsOf = options => rewriteOf({ proto: 'http', via: 'v', forwarded: false, ...rulesOf(options) })
const field = (name, value) => {
  const colon = `${name}: ${value}`.indexOf(':')
  return { name: name.slice(0, colon), value }
}

t.test('no header option: nothing compiled, the rewrites as before', async t => {
  t.same(rulesOf({}), { idHeader: null, host: null, request: null, response: null })
  const head = req('GET / HTTP/1.1\r\nHost: h\r\nX-Request-ID: r\r\n\r\n')
  const text = requestHead(head, { clientAddress: '10.0.0.9', requestId: null }, 'b:1', settingsOf({}))
  t.equal(text, 'GET / HTTP/1.1\r\nHost: h\r\nX-Request-ID: r\r\nX-Forwarded-For: 10.0.0.9\r\n' +
    'X-Forwarded-Proto: http\r\nX-Forwarded-Host: h\r\nVia: 1.1 v\r\n\r\n')
})

t.test('the request ID: the client\'s when good, else a new UUID', async t => {
  const id = text => requestIdOf(req(`GET / HTTP/1.1\r\nHost: h\r\n${text}\r\n`), 'x-request-id')
  t.equal(id('X-Request-ID: abc-123_XYZ.=/+\r\n'), 'abc-123_XYZ.=/+', 'kept')
  t.equal(id('x-request-id: first\r\nX-Request-ID: second\r\n'), 'first', 'the first field decides')
  t.match(id(''), UUID, 'none: a new one')
  t.match(id('X-Request-ID: two words\r\n'), UUID, 'a space: replaced')
  t.match(id(`X-Request-ID: ${'a'.repeat(201)}\r\n`), UUID, 'over 200 characters: replaced')
  t.equal(id(`X-Request-ID: ${'a'.repeat(200)}\r\n`), 'a'.repeat(200), '200 characters: kept')
  t.match(id('X-Request-ID: caf\xe9\r\n'), UUID, 'not ASCII: replaced')
  t.not(id(''), id(''), 'each new one differs')
})

t.test('requests: set and del have the last word, X-Forwarded-* included; placeholders; Host', async t => {
  const settings = settingsOf({
    requestId: 'X-Request-ID',
    setHeader: [field('X-Env', 'prod'), field('X-Forwarded-Proto', 'https'), field('X-Client', '{client_ip} {request_id}')],
    delHeader: ['X-Secret', 'X-Forwarded-Host']
  })
  const head = req('POST /p HTTP/1.1\r\nHost: front.example\r\nX-Env: dev\r\nX-Secret: s\r\nx-request-id: old\r\n' +
    'X-Forwarded-Proto: ftp\r\nContent-Length: 0\r\n\r\n')
  const ctx = { clientAddress: '10.0.0.9', requestId: 'id-1' }
  t.equal(requestHead(head, ctx, 'b:1', settings),
    'POST /p HTTP/1.1\r\nHost: front.example\r\nContent-Length: 0\r\nX-Forwarded-For: 10.0.0.9\r\n' +
    'X-Env: prod\r\nX-Forwarded-Proto: https\r\nX-Client: 10.0.0.9 id-1\r\nX-Request-ID: id-1\r\nVia: 1.1 v\r\n\r\n')

  const h2 = backendRequestHeaders(head, ctx, 'b:1', settings, 'http')
  t.equal(h2[':authority'], 'front.example')
  t.equal(h2['x-env'], 'prod')
  t.equal(h2['x-forwarded-proto'], 'https')
  t.equal(h2['x-client'], '10.0.0.9 id-1')
  t.equal(h2['x-request-id'], 'id-1')
  t.notOk('x-secret' in h2, 'removed')
  t.notOk('x-forwarded-host' in h2, 'lila\'s own removed too')

  const fixed = settingsOf({ hostHeader: 'api.internal:8080' })
  const backend = settingsOf({ hostHeader: 'backend' })
  const host = text => text.match(/^Host: .*$/gm)
  t.same(host(requestHead(head, ctx, 'b:1', fixed)), ['Host: api.internal:8080'], 'a fixed Host, one')
  t.same(host(requestHead(head, ctx, 'b:1', backend)), ['Host: b:1'], 'the backend\'s')
  t.match(requestHead(head, ctx, 'b:1', backend), /\r\nX-Forwarded-Host: front\.example\r\n/, 'X-Forwarded-Host: the client\'s')
  const absolute = req('GET http://abs.example/x HTTP/1.1\r\nHost: abs.example\r\n\r\n')
  t.same(host(requestHead(absolute, ctx, 'b:1', fixed)), ['Host: api.internal:8080'], 'over an absolute-form target too')
  t.equal(backendRequestHeaders(head, ctx, 'b:1', fixed, 'http')[':authority'], 'api.internal:8080', ':authority')
  t.equal(backendRequestHeaders(head, ctx, 'b:1', backend, 'http')[':authority'], 'b:1')
})

t.test('responses: set and del, lila\'s own answers included', async t => {
  const { response } = rulesOf({
    requestId: 'X-Request-ID',
    setResponseHeader: [field('X-Frame-Options', 'DENY'), field('Set-Cookie', 'a=1'), field('Set-Cookie', 'b=2')],
    delResponseHeader: ['Server', 'Cache-Control']
  })
  const ctx = { clientAddress: '10.0.0.9', requestId: 'id-1' }
  const backend = res('HTTP/1.1 200 OK\r\nServer: x\r\nX-Frame-Options: SAMEORIGIN\r\nX-Request-ID: theirs\r\nContent-Length: 2\r\n\r\n')
  t.equal(responseHead(backend, {}, response, ctx), 'HTTP/1.1 200 OK\r\nX-Frame-Options: DENY\r\nSet-Cookie: a=1\r\n' +
    'Set-Cookie: b=2\r\nX-Request-ID: id-1\r\nContent-Length: 2\r\n\r\n')
  t.equal(responseHead(backend, {}), 'HTTP/1.1 200 OK\r\nServer: x\r\nX-Frame-Options: SAMEORIGIN\r\nX-Request-ID: theirs\r\n' +
    'Content-Length: 2\r\n\r\n', 'without rules, as it came')

  const text = reply(502, 'backend down', { close: true, rules: response, ctx }).toString()
  t.equal(text, 'HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n' +
    'X-Frame-Options: DENY\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Request-ID: id-1\r\nContent-Length: 47\r\nConnection: close\r\n\r\n' +
    '502 Bad Gateway: backend down\nrequest ID: id-1\n')
  const h2 = answerList(503, 'none', { retryAfter: 5, rules: response, ctx })
  t.same(listObject(h2.list), {
    ':status': '503',
    'content-type': 'text/plain; charset=utf-8',
    'content-length': '47',
    'retry-after': '5',
    'x-frame-options': 'DENY',
    'set-cookie': ['a=1', 'b=2'],
    'x-request-id': 'id-1'
  })
  t.equal(h2.body.toString(), '503 Service Unavailable: none\nrequest ID: id-1\n')
})

t.test('options: the command line, the config file (lists, true) and LILA_ variables agree', async t => {
  const listenerOf = (argv, env = {}) => parseCommandLine([':9001', '--protocol', 'http', ...argv], env).config.listeners[0]
  const file = json => parseConfigFile(JSON.stringify({ listeners: [{ protocol: 'http', backends: [':9001'], ...json }] }), 'lila.json').listeners[0]
  const cli = listenerOf(['--request-id', '--set-header', 'X-A: 1', '--set-header', 'X-B:2', '--del-header', 'X-C', '--host-header', 'backend'])
  t.equal(cli.requestId, 'X-Request-ID', 'a bare --request-id')
  t.same(cli.setHeader, [{ name: 'X-A', value: '1' }, { name: 'X-B', value: '2' }])
  t.same(cli.delHeader, ['X-C'])
  t.equal(cli.hostHeader, 'backend')
  const json = file({ 'request-id': true, 'set-header': ['X-A: 1', 'X-B:2'], 'del-header': 'X-C', 'host-header': 'backend' })
  for (const key of ['requestId', 'setHeader', 'delHeader', 'hostHeader']) t.same(json[key], cli[key], `${key}: the file as argv`)
  const env = listenerOf([], { LILA_REQUEST_ID: '1', LILA_SET_HEADER: 'X-A: 1\nX-B:2\n', LILA_DEL_HEADER: 'X-C', LILA_HOST_HEADER: 'backend' })
  for (const key of ['requestId', 'setHeader', 'delHeader', 'hostHeader']) t.same(env[key], cli[key], `${key}: the environment as argv`)
  t.equal(listenerOf(['--request-id', 'X-Correlation-ID']).requestId, 'X-Correlation-ID', '--request-id NAME')
  t.equal(listenerOf(['--request-id=X-Trace']).requestId, 'X-Trace')
  t.equal(file({ 'request-id': false }).requestId, null, 'false: off')
  t.throws(() => file({ 'set-header': ['X-A: 1', 'Connection: x'] }),
    { message: 'lila.json: listeners[0].set-header[1]: cannot set header "Connection": it is hop-by-hop: lila writes the connection\'s own' })
  t.throws(() => file({ 'set-header': 3 }), { message: 'lila.json: listeners[0].set-header: expected a string or a list of strings, got 3' })
  t.throws(() => listenerOf([], { LILA_DEL_HEADER: 'X-A\nVia' }),
    { message: 'cannot remove header "Via" for LILA_DEL_HEADER: lila\'s Via is how it finds a loop' })
})

// A response from curl: { status, headers: { lower-case name: [values] }, body }.
async function fetch (args) {
  const { code, stdout, stderr } = await curl(['-i', ...args])
  if (code !== 0) throw new Error(`curl ${args.join(' ')}: ${stderr}`)
  const end = stdout.indexOf('\r\n\r\n')
  const [statusLine, ...lines] = stdout.slice(0, end).split('\r\n')
  const headers = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    const name = line.slice(0, colon).toLowerCase();
    (headers[name] ||= []).push(line.slice(colon + 1).trim())
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: stdout.slice(end + 4) }
}

// A backend of either protocol that answers with `fields` and remembers each request's
// headers (lower-case names; repeated ones joined by Node's HTTP/1.1 server).
async function echoBackend (t, protocol, fields = {}) {
  if (protocol === 'h1') {
    const b = await httpBackend(t, 'h1', (req, res) => {
      for (const [name, value] of Object.entries(fields)) res.setHeader(name, value)
      res.end('ok\n')
    })
    b.lastHeaders = () => b.last.headers
    return b
  }
  const b = await h2Backend(t, 'h2', stream => {
    stream.respond({ ':status': 200, ...fields })
    stream.end('ok\n')
  })
  b.lastHeaders = () => b.last
  return b
}

const jsonLines = (lila, n) => until(() => lila.stdout.split('\n').filter(Boolean).length >= n, `${n} log lines`)
  .then(() => lila.stdout.split('\n').filter(Boolean).map(line => JSON.parse(line)))

for (const protocol of ['h1', 'h2']) {
  t.test(`request IDs, ${protocol} backend: generated, kept, replaced; to the backend, the client, the log`, async t => {
    const backend = await echoBackend(t, protocol, { 'x-request-id': 'the-backend-s-own' })
    const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--backend-protocol', protocol,
      '--request-id', '--access-log', 'json', ...LOCAL])
    const url = `http://127.0.0.1:${lila.port}/id`
    const ids = []
    for (const client of [[], [H2C]]) {
      for (const [sent, kept] of [[null, false], ['abc-123.XYZ', true], ['bad id', false], ['x'.repeat(201), false]]) {
        const what = `${client.length ? 'HTTP/2' : 'HTTP/1.1'} client, ${sent === null ? 'no ID' : `ID ${sent.slice(0, 12)}`}`
        const r = await fetch([...client, url, ...(sent === null ? [] : ['-H', `X-Request-ID: ${sent}`])])
        t.equal(r.status, 200)
        t.equal(r.headers['x-request-id'].length, 1, `${what}: one ID in the response`)
        const [id] = r.headers['x-request-id']
        if (kept) t.equal(id, sent, `${what}: kept`)
        else t.match(id, UUID, `${what}: a new one`)
        t.equal(backend.lastHeaders()['x-request-id'], id, `${what}: the backend got it`)
        ids.push(id)
      }
    }
    t.equal(new Set(ids).size, ids.length - 1, 'new IDs all differ (the kept one came twice)')
    const entries = await jsonLines(lila, ids.length)
    t.same(entries.map(e => e.requestId), ids, 'each in its access log line')
    t.equal((await lila.stop()).code, 0)
  })
}

t.test('lila\'s own answers: the 502 page and its headers carry the ID and the response headers; combined log', async t => {
  const dead = `127.0.0.1:${await deadPort()}`
  for (const protocol of ['h1', 'h2']) {
    const lila = await spawnLila(t, ['rr', dead, '--protocol', 'http', '--backend-protocol', protocol,
      '--request-id', 'X-Correlation-ID', '--set-response-header', 'X-Frame-Options: DENY', '--access-log', 'combined', ...LOCAL])
    const url = `http://127.0.0.1:${lila.port}/down`
    const ids = []
    for (const client of [[], [H2C]]) {
      for (const sent of [null, 'trace-42']) {
        const what = `${protocol} backend, ${client.length ? 'HTTP/2' : 'HTTP/1.1'} client, ${sent || 'no ID'}`
        const r = await fetch([...client, url, ...(sent === null ? [] : ['-H', `X-Correlation-ID: ${sent}`])])
        t.equal(r.status, 502, what)
        const [id] = r.headers['x-correlation-id']
        t.equal(id, sent === null ? id : sent)
        t.match(id, sent === null ? UUID : /^trace-42$/, `${what}: the ID in a header`)
        t.match(r.body, new RegExp(`^502 Bad Gateway: .*\nrequest ID: ${id}\n$`), `${what}: and in the body`)
        t.same(r.headers['x-frame-options'], ['DENY'], `${what}: the response headers too`)
        ids.push(id)
      }
    }
    await until(() => lila.stdout.split('\n').filter(Boolean).length >= ids.length, 'the log lines')
    const lines = lila.stdout.split('\n').filter(Boolean)
    t.same(lines.map(line => / 502 \d+ "-" "curl\/[^"]+" "([^"]+)"$/.exec(line)?.[1]), ids,
      'each combined line ends with its ID, quoted')
    t.equal((await lila.stop()).code, 0)
  }
})

for (const protocol of ['h1', 'h2']) {
  t.test(`set and del, requests and responses, ${protocol} backend, HTTP/1.1 and HTTP/2 clients`, async t => {
    const backend = await echoBackend(t, protocol, { server: 'echo', 'x-powered-by': 'node', 'x-frame-options': 'SAMEORIGIN' })
    const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--backend-protocol', protocol,
      '--set-header', 'X-Env: prod', '--set-header', 'X-Forwarded-Proto: https', '--set-header', 'X-Client: ip={client_ip}',
      '--del-header', 'X-Secret', '--set-response-header', 'X-Frame-Options: DENY',
      '--set-response-header', 'Set-Cookie: a=1', '--set-response-header', 'Set-Cookie: b=2',
      '--del-response-header', 'Server', '--del-response-header', 'X-Powered-By', ...LOCAL])
    for (const client of [[], [H2C]]) {
      const what = client.length ? 'HTTP/2 client' : 'HTTP/1.1 client'
      const r = await fetch([...client, `http://127.0.0.1:${lila.port}/`, '-H', 'X-Secret: s', '-H', 'X-Env: dev'])
      t.equal(r.status, 200)
      const seen = backend.lastHeaders()
      t.equal(seen['x-env'], 'prod', `${what}: set, the client's replaced`)
      t.equal(seen['x-forwarded-proto'], 'https', `${what}: set over lila's own`)
      t.equal(seen['x-client'], 'ip=127.0.0.1', `${what}: {client_ip}`)
      t.notOk('x-secret' in seen, `${what}: removed`)
      t.equal(seen['x-forwarded-for'], '127.0.0.1', `${what}: the rest as ever`)
      t.same(r.headers['x-frame-options'], ['DENY'], `${what}: the backend's replaced`)
      t.same(r.headers['set-cookie'], ['a=1', 'b=2'], `${what}: a name set twice, both`)
      t.notOk(r.headers.server || r.headers['x-powered-by'], `${what}: removed from the response`)
    }
    t.equal((await lila.stop()).code, 0)
  })
}

t.test('--host-header: the backend as written, or a fixed value; HTTP/1.1 Host and HTTP/2 :authority', async t => {
  for (const protocol of ['h1', 'h2']) {
    const backend = await echoBackend(t, protocol)
    const dns = await dnsServer(t, { 'api.lila.test': { A: ['127.0.0.1'] } })
    const written = `api.lila.test:${backend.port}`
    const cases = [['backend', written], ['fixed.example:8443', 'fixed.example:8443']]
    for (const [value, expected] of cases) {
      const lila = await spawnLila(t, ['rr', written, '--dns-server', dns.address, '--protocol', 'http',
        '--backend-protocol', protocol, '--host-header', value, ...LOCAL])
      for (const client of [[], [H2C]]) {
        const what = `${protocol} backend, ${client.length ? 'HTTP/2' : 'HTTP/1.1'} client, --host-header ${value}`
        const r = await fetch([...client, `http://127.0.0.1:${lila.port}/`, '-H', 'Host: front.example'])
        t.equal(r.status, 200, what)
        const seen = backend.lastHeaders()
        t.equal(protocol === 'h1' ? seen.host : seen[':authority'], expected, what)
        t.equal(seen['x-forwarded-host'], 'front.example', `${what}: X-Forwarded-Host still the client's`)
      }
      t.equal((await lila.stop()).code, 0)
    }
  }
})

t.test('a bad value in the config file or the environment: one line, exit 2', async t => {
  const dir = tmpDir(t, 'lila-headers-')
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({ listeners: [{ protocol: 'http', backends: [':9001'], 'del-response-header': ['Content-Length'] }] }))
  const bad = await runLila(['--config', file])
  t.equal(bad.code, 2)
  t.equal(bad.stderr, `lila: ${file}: listeners[0].del-response-header[0]: cannot remove header "Content-Length": ` +
    'it frames the message: lila writes it from the body\nTry \'lila --help\'.\n')
  const env = await runLila([':9001', '--protocol', 'http'], { env: { ...process.env, LILA_HOST_HEADER: 'a/b' } })
  t.equal(env.code, 2)
  t.equal(env.stderr, 'lila: invalid host "a/b" for LILA_HOST_HEADER: expected backend, or a host name or address ' +
    'with an optional :port\nTry \'lila --help\'.\n')
})

t.test('SIGHUP reloads the header options', async t => {
  const backend = await echoBackend(t, 'h1')
  const dir = tmpDir(t, 'lila-headers-')
  const file = path.join(dir, 'lila.json')
  const write = options => fs.writeFileSync(file, JSON.stringify({
    listeners: [{ name: 'web', protocol: 'http', host: '127.0.0.1', port: 0, check: 'none', backends: [backend.address], ...options }]
  }))
  write({ 'set-header': 'X-Env: blue' })
  const lila = await spawnLila(t, ['--config', file])
  const url = `http://127.0.0.1:${lila.port}/`
  t.equal((await fetch([url])).status, 200)
  t.equal(backend.lastHeaders()['x-env'], 'blue')
  write({ 'set-header': ['X-Env: green'], 'request-id': true })
  lila.child.kill('SIGHUP')
  const [line] = await lila.waitForLine(/reload: web: .*/)
  t.match(line, /set-header X-Env: blue -> X-Env: green, request-id none -> X-Request-ID|request-id none -> X-Request-ID.*set-header X-Env: blue -> X-Env: green/, 'said in the log')
  await lila.waitForLine(/reloaded/)
  const r = await fetch([url])
  t.equal(backend.lastHeaders()['x-env'], 'green', 'the new value')
  t.match(r.headers['x-request-id'][0], UUID, 'and request IDs from now on')
  t.equal((await lila.stop()).code, 0)
})
