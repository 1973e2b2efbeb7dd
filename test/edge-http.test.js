'use strict'

// Rules at the edge for HTTP requests, through the real executable and real clients
// (curl, Node's http and http2): compression (gzip and brotli, what is left alone,
// server-sent events event by event), --allow/--deny answered 403, --basic-auth with
// htpasswd -B users, a route's strip, W3C trace context; HTTP/1.1 and HTTP/2 clients.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const zlib = require('zlib')
const http = require('http')
const http2 = require('http2')
const { httpBackend, spawnLila, curl, within } = require('./fixtures/helpers')
const { h2connect, h2request } = require('./fixtures/h2')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')
const { htpasswdLine } = require('./fixtures/htpasswd')

const htpasswd = tool('htpasswd')

const html = Buffer.from(`<!doctype html><title>lila</title>${'<p>Hello, compressible world.</p>\n'.repeat(2000)}`)

// A backend: /page (64 KiB of HTML), /small (500 bytes), /gzipped (already gzip), /events
// (server-sent events, one each time `next()` is called), /echo (what it got).
async function backendFor (t) {
  const events = { waiting: null, sent: 0 }
  const bodies = []
  const backend = await httpBackend(t, 'a', (req, res) => {
    if (req.url === '/page') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': html.length, etag: '"v1"' })
      return res.end(html)
    }
    if (req.url === '/small') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 500 })
      return res.end('s'.repeat(500))
    }
    if (req.url === '/gzipped') {
      const body = zlib.gzipSync(html)
      res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip', 'content-length': body.length })
      return res.end(body)
    }
    if (req.url === '/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      res.flushHeaders() // the head now: the first event waits for the client
      events.waiting = res
      return
    }
    let length = 0
    req.on('data', chunk => { length += chunk.length })
    req.on('end', () => {
      if (req.method === 'POST') bodies.push(length)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ url: req.url, headers: req.headers }))
    })
  })
  backend.bodies = bodies // the lengths of the POST bodies it got
  // Send event i, whose decoded text the test then waits for before asking the next.
  backend.sendEvent = () => {
    const i = events.sent++
    events.waiting.write(`id: ${i}\ndata: ${'event '.repeat(20)}${i}\n\n`)
    if (i === 4) events.waiting.end()
  }
  backend.eventsOpen = () => events.waiting !== null
  return backend
}

async function lilaFor (t, backend, args) {
  return spawnLila(t, [backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', ...args])
}

// GET through Node's http with `headers`; the body as it came (not decoded).
function get (port, pathName, headers = {}, localAddress = undefined) {
  return within(10000, `GET ${pathName}`, new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: pathName, headers, localAddress, agent: false }, res => {
      const chunks = []
      res.on('data', chunk => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
    })
    req.on('error', reject)
  }))
}

// An htpasswd file (htpasswd -B) with alice:wonderland; a test asks htpasswd.skip first.
function writeUsers (t) {
  const file = path.join(tempDir(t), 'users')
  fs.writeFileSync(file, htpasswdLine('alice', 'wonderland') + '\n')
  return file
}

function tempDir (t) {
  const dir = tmpDir(t, 'lila-edge-http-')
  return dir
}

t.test('curl --compressed gets gzip with Vary; the body decodes to the backend\'s', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--compress'])
  const dir = tempDir(t)
  const out = path.join(dir, 'body')
  const result = await curl(['--compressed', '-D', '-', '-o', out, `http://127.0.0.1:${lila.port}/page`])
  t.match(result.stdout, /^content-encoding: gzip\r$/im, 'Content-Encoding: gzip')
  t.match(result.stdout, /^vary: Accept-Encoding\r$/im, 'Vary: Accept-Encoding')
  t.notMatch(result.stdout, /^content-length:/im, 'no Content-Length: chunked')
  t.match(result.stdout, /^etag: W\/"v1"\r$/im, 'the ETag made weak')
  t.ok(fs.existsSync(out) && fs.readFileSync(out).equals(html), 'curl decodes the backend\'s bytes')
  const raw = await get(lila.port, '/page', { 'accept-encoding': 'gzip' })
  t.ok(raw.body.length < html.length / 5, `compressed: ${html.length} -> ${raw.body.length} bytes`)
  t.ok(raw.headers['content-encoding'] === 'gzip' && zlib.gunzipSync(raw.body).equals(html), 'gunzip gives it back')
})

t.test('a client that says br gets brotli that decodes to the backend\'s bytes', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--compress'])
  const res = await get(lila.port, '/page', { 'accept-encoding': 'br' })
  t.equal(res.headers['content-encoding'], 'br', 'Content-Encoding: br')
  t.ok(res.headers['content-encoding'] === 'br' && zlib.brotliDecompressSync(res.body).equals(html), 'decodes to the same bytes')
  const refused = await get(lila.port, '/page', { 'accept-encoding': 'br;q=0, gzip;q=0' })
  t.equal(refused.headers['content-encoding'], undefined, 'q=0 for both: none')
  t.ok(refused.body.equals(html), 'the bytes as they were')
  t.equal(refused.headers.vary, 'Accept-Encoding', 'and Vary all the same')
})

t.test('a 500-byte body, a Content-Encoding: gzip answer and a HEAD pass untouched', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--compress'])
  const small = await get(lila.port, '/small', { 'accept-encoding': 'gzip, br' })
  t.equal(small.headers['content-encoding'], undefined, '500 bytes: not compressed')
  t.equal(small.headers['content-length'], '500')
  t.equal(small.body.toString(), 's'.repeat(500))
  const gzipped = await get(lila.port, '/gzipped', { 'accept-encoding': 'gzip, br' })
  t.ok(gzipped.body.equals(zlib.gzipSync(html)), 'the backend\'s gzip bytes, as they were')
  t.equal(gzipped.headers['content-length'], String(zlib.gzipSync(html).length))
})

t.test('server-sent events arrive event by event, compressed', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--compress'])
  const got = await within(15000, 'the events', new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: lila.port, path: '/events', headers: { 'accept-encoding': 'gzip' }, agent: false }, res => {
      const decoded = []
      let text = ''
      const gunzip = zlib.createGunzip()
      gunzip.on('data', chunk => {
        text += chunk
        // Each event decodes whole before the backend is told to send the next.
        while (text.includes('\n\n')) {
          const event = text.slice(0, text.indexOf('\n\n'))
          text = text.slice(text.indexOf('\n\n') + 2)
          decoded.push(event)
          if (decoded.length < 5) backend.sendEvent()
        }
      })
      gunzip.on('end', () => resolve({ encoding: res.headers['content-encoding'], decoded }))
      gunzip.on('error', reject)
      res.pipe(gunzip)
      backend.sendEvent()
    })
    req.on('error', reject)
  }))
  t.equal(got.encoding, 'gzip')
  t.same(got.decoded.map(e => e.split('\n')[0]), ['id: 0', 'id: 1', 'id: 2', 'id: 3', 'id: 4'], 'five events, each before the next was sent')
})

t.test('--deny: a client from 127.0.0.2 gets 403 while one from 127.0.0.1 is served', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--deny', '127.0.0.2'])
  const served = await curl(['--interface', '127.0.0.1', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${lila.port}/page`])
  t.equal(served.stdout, '200')
  const refused = await curl(['--interface', '127.0.0.2', '-w', '\n%{http_code}', `http://127.0.0.1:${lila.port}/page`])
  t.match(refused.stdout, /\n403$/, '403 Forbidden')
  t.equal(backend.requests, 1, 'the refused request never reached the backend')
  const h2 = await curl(['--http2-prior-knowledge', '--interface', '127.0.0.2', '-o', '/dev/null', '-w', '%{http_code} %{http_version}', `http://127.0.0.1:${lila.port}/page`])
  t.equal(h2.stdout, '403 2', 'HTTP/2 too')
})

t.test('a route\'s allow list, on top of the listener\'s', async t => {
  const backend = await backendFor(t)
  const admin = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--route', `/admin=allow=127.0.0.1 ${admin.address}`])
  t.equal((await get(lila.port, '/admin/x', {}, '127.0.0.2')).status, 403, '/admin from 127.0.0.2')
  t.equal((await get(lila.port, '/admin/x', {}, '127.0.0.1')).status, 200, '/admin from 127.0.0.1')
  t.equal((await get(lila.port, '/page', {}, '127.0.0.2')).status, 200, 'elsewhere from 127.0.0.2')
})

t.test('--basic-auth: htpasswd -B users get in, others 401 with the realm; the backend never sees the password', async t => {
  if (htpasswd.skip) return t.skip(htpasswd.skip)
  const users = writeUsers(t)
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--basic-auth', users, '--basic-auth-realm', 'staff'])
  const url = `http://127.0.0.1:${lila.port}/echo`
  const none = await curl(['-D', '-', '-o', '/dev/null', url])
  t.match(none.stdout, /^HTTP\/1\.1 401 /, 'no credentials: 401')
  t.match(none.stdout, /^www-authenticate: Basic realm="staff", charset="UTF-8"\r$/im, 'with the realm')
  const wrong = await curl(['-u', 'alice:nope', '-o', '/dev/null', '-w', '%{http_code}', url])
  t.equal(wrong.stdout, '401', 'a wrong password: 401')
  const nobody = await curl(['-u', 'bob:wonderland', '-o', '/dev/null', '-w', '%{http_code}', url])
  t.equal(nobody.stdout, '401', 'a user not in the file: 401')
  for (let i = 0; i < 3; i++) {
    const ok = await curl(['-u', 'alice:wonderland', url])
    const seen = JSON.parse(ok.stdout || '{}')
    t.equal(seen.url, '/echo', `alice gets in (${i + 1})`)
    t.equal(seen.headers && seen.headers.authorization, undefined, 'the backend gets no Authorization')
  }
  const h2 = await curl(['--http2-prior-knowledge', '-u', 'alice:wonderland', '-o', '/dev/null', '-w', '%{http_code}', url])
  t.equal(h2.stdout, '200', 'HTTP/2 too')
  const h2none = await curl(['--http2-prior-knowledge', '-o', '/dev/null', '-w', '%{http_code}', url])
  t.equal(h2none.stdout, '401', 'HTTP/2 without credentials: 401')
  t.equal(backend.requests, 4, 'only alice\'s requests reached the backend')
})

t.test('a stripped route\'s backend sees /x for /api/x, and X-Forwarded-Prefix', async t => {
  const backend = await backendFor(t)
  const api = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--route', `/api=strip ${api.address}`])
  for (const [asked, seen] of [['/api/x', '/x'], ['/api/x/y?z=1', '/x/y?z=1'], ['/api', '/'], ['/api?q', '/?q']]) {
    const res = await get(lila.port, asked)
    const body = res.status === 200 ? JSON.parse(res.body) : {}
    t.equal(body.url, seen, `${asked} -> ${seen}`)
    t.equal(body.headers && body.headers['x-forwarded-prefix'], '/api')
  }
  const session = await h2connect(t, lila.port).catch(() => null)
  const h2 = session === null ? { status: 0, body: Buffer.from('{}') } : await h2request(session, { path: '/api/x' })
  t.equal(h2.status === 200 && JSON.parse(h2.body).url, '/x', 'HTTP/2 too')
})

t.test('--trace: a traceparent keeps its trace id through lila; one is made where none came', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--trace'])
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
  const kept = JSON.parse((await get(lila.port, '/echo', { traceparent, tracestate: 'congo=t61rcWkgMzE' })).body)
  t.match(kept.headers.traceparent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/, 'the trace ID kept')
  t.not(kept.headers.traceparent, traceparent, 'a new parent ID')
  t.equal(kept.headers.tracestate, 'congo=t61rcWkgMzE', 'tracestate passes')
  const made = JSON.parse((await get(lila.port, '/echo')).body)
  t.match(made.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/, 'a new trace')
  const session = await h2connect(t, lila.port).catch(() => null)
  const h2 = session === null ? { status: 0, body: Buffer.from('{"headers":{}}') } : await h2request(session, { path: '/echo', headers: { traceparent } })
  const sent = JSON.parse(h2.body).headers.traceparent || ''
  t.match(sent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/, 'HTTP/2 too')
  t.not(sent, traceparent, 'HTTP/2: a new parent ID')
})

t.test('HTTP/2 clients: compression with Vary, brotli, and SSE', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--compress'])
  const session = await h2connect(t, lila.port)
  const gz = await h2request(session, { path: '/page', headers: { 'accept-encoding': 'gzip' } })
  t.equal(gz.headers && gz.headers['content-encoding'], 'gzip')
  t.equal(gz.headers && gz.headers.vary, 'Accept-Encoding')
  t.ok(gz.status === 200 && zlib.gunzipSync(gz.body).equals(html), 'decodes')
  const br = await h2request(session, { path: '/page', headers: { 'accept-encoding': 'br' } })
  t.ok(br.status === 200 && zlib.brotliDecompressSync(br.body).equals(html), 'brotli decodes')
  const curled = await curl(['--http2-prior-knowledge', '--compressed', '-o', '/dev/null', '-w', '%{size_download} %{http_version}', `http://127.0.0.1:${lila.port}/page`])
  const [size, version] = curled.stdout.split(' ')
  t.equal(version, '2')
  t.ok(Number(size) > 0 && Number(size) < html.length / 5, `curl --http2-prior-knowledge --compressed: ${size} bytes`)
})

t.test('the status page counts what was compressed and refused', async t => {
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--compress', '--deny', '127.0.0.2', '--status-port', '0'])
  await get(lila.port, '/page', { 'accept-encoding': 'gzip' })
  await get(lila.port, '/page', {}, '127.0.0.2')
  const snapshot = JSON.parse((await get(lila.statusPort, '/status.json')).body)
  const l = snapshot.listeners[0]
  t.match(l.compression, { gzip: { responses: 1, bytesIn: html.length } })
  t.same(l.refused, { deny: 1 })
  const metrics = (await get(lila.statusPort, '/metrics')).body.toString()
  t.match(metrics, /^lila_listener_compression_in_bytes_total\{listener="[^"]+",encoding="gzip"\} \d+$/m)
})

t.test('gRPC calls: PERMISSION_DENIED by address, UNAUTHENTICATED without credentials', async t => {
  const { load, grpcBackend, echoClient, unary, MISSING } = require('./fixtures/grpc')
  if (load() === null) return t.skip(`gRPC: ${MISSING}`)
  const { grpc } = load()
  const backend = await grpcBackend(t, 'g')
  const denied = await spawnLila(t, [backend.address, '--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--deny', '127.0.0.1'])
  const refused = await unary(echoClient(t, denied.port), 'hi')
  t.equal(refused.err && refused.err.code, grpc.status.PERMISSION_DENIED, `--deny: ${refused.err && refused.err.details}`)
  if (htpasswd.skip) return t.skip(htpasswd.skip)
  const guarded = await spawnLila(t, [backend.address, '--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--basic-auth', writeUsers(t)])
  const client = echoClient(t, guarded.port)
  const none = await unary(client, 'hi')
  t.equal(none.err && none.err.code, grpc.status.UNAUTHENTICATED, 'no credentials')
  const metadata = new grpc.Metadata()
  metadata.set('authorization', `Basic ${Buffer.from('alice:wonderland').toString('base64')}`)
  const ok = await within(10000, 'an authenticated call', new Promise(resolve => client.Unary({ text: 'hi' }, metadata, (err, value) => resolve({ err, value }))))
  t.equal(ok.value && ok.value.text, 'g: hi', 'alice\'s call goes through')
})

t.test('grpcurl: PERMISSION_DENIED by --deny; served from an address not denied', async t => {
  const { load, grpcBackend, grpcurl, MISSING } = require('./fixtures/grpc')
  if (load() === null) return t.skip(`gRPC: ${MISSING}`)
  if (tool('grpcurl').skip) return t.skip(tool('grpcurl').skip)
  const backend = await grpcBackend(t, 'g')
  const lila = await spawnLila(t, [backend.address, '--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    '--deny', '127.0.0.2'])
  const ok = await grpcurl(lila.port, 'lila.test.Echo/Unary', { text: 'hi' })
  t.equal(ok.code, 0, `from 127.0.0.1: ${ok.stderr}`)
  t.match(ok.stdout, /"text": "g: hi"/)
  const denied = await spawnLila(t, [backend.address, '--protocol', 'grpc', '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    '--deny', '127.0.0.1'])
  const refused = await grpcurl(denied.port, 'lila.test.Echo/Unary', { text: 'hi' })
  t.not(refused.code, 0)
  t.match(refused.stderr, /Code: PermissionDenied/, 'grpcurl says PermissionDenied')
  t.match(refused.stderr, /Message: the client's address is on the --deny list/)
  t.equal(backend.calls, 1, 'the refused call never reached the backend')
})

t.test('HTTP/2: server-sent events arrive event by event, compressed; the 401 says its realm', async t => {
  if (htpasswd.skip) return t.skip(htpasswd.skip)
  const users = writeUsers(t)
  const backend = await backendFor(t)
  const lila = await lilaFor(t, backend, ['--compress', '--route', `/echo=basic-auth=${users} ${backend.address}`])
  const session = await h2connect(t, lila.port)
  const decoded = []
  const got = await within(15000, 'the events over HTTP/2', new Promise((resolve, reject) => {
    const stream = session.request({ ':path': '/events', 'accept-encoding': 'br' })
    let text = ''
    const unbrotli = zlib.createBrotliDecompress()
    let encoding = null
    stream.on('response', headers => {
      encoding = headers['content-encoding']
      backend.sendEvent()
    })
    unbrotli.on('data', chunk => {
      text += chunk
      while (text.includes('\n\n')) {
        decoded.push(text.slice(0, text.indexOf('\n\n')))
        text = text.slice(text.indexOf('\n\n') + 2)
        if (decoded.length < 5) backend.sendEvent()
      }
    })
    unbrotli.on('end', () => resolve({ encoding }))
    unbrotli.on('error', reject)
    stream.on('error', reject)
    stream.pipe(unbrotli)
  }))
  t.equal(got.encoding, 'br')
  t.same(decoded.map(e => e.split('\n')[0]), ['id: 0', 'id: 1', 'id: 2', 'id: 3', 'id: 4'], 'five events, each before the next was sent')
  const refused = await h2request(session, { path: '/echo' })
  t.equal(refused.status, 401)
  t.equal(refused.headers['www-authenticate'], 'Basic realm="lila", charset="UTF-8"')
})

t.test('a first password check holds the request, its body unread; the body then reaches the backend whole', async t => {
  const backend = await backendFor(t)
  if (htpasswd.skip) return t.skip(htpasswd.skip)
  const users = writeUsers(t)
  fs.appendFileSync(users, htpasswdLine('bob', 'builder') + '\n')
  // --body-timeout: a body never read on would be a 408, not a hang.
  const lila = await lilaFor(t, backend, ['--basic-auth', users, '--body-timeout', '5s'])
  const dir = tempDir(t)
  const file = path.join(dir, 'body')
  const body = Buffer.alloc(256 * 1024, 'lila ')
  fs.writeFileSync(file, body)
  const url = `http://127.0.0.1:${lila.port}/upload`
  const posted = await curl(['-u', 'alice:wonderland', '--data-binary', `@${file}`, '-o', '/dev/null', '-w', '%{http_code}', url])
  t.equal(posted.stdout, '200', 'answered once bcrypt said yes')
  t.equal(backend.bodies.at(-1), body.length, 'the whole body reached the backend')
  // A body small enough to be read before a backend is taken, sent on 100 Continue,
  // with another user's first check (bcrypt again).
  const small = path.join(dir, 'small')
  fs.writeFileSync(small, body.subarray(0, 16 * 1024))
  const continued = await curl(['-u', 'bob:builder', '-H', 'Expect: 100-continue', '--expect100-timeout', '30',
    '--data-binary', `@${small}`, '-o', '/dev/null', '-w', '%{http_code}', url])
  t.equal(continued.stdout, '200', 'a small body after 100 Continue: read once admitted')
  t.equal(backend.bodies.at(-1), 16 * 1024)
  // Over HTTP/2 the 401 may come while the body is still on its way. RFC 9113 8.1 lets
  // lila reset the stream NO_ERROR then, but curl 7.88 reports error 92 for that while
  // it uploads (against HAProxy's deny: 50 times in 50); lila reads and drops the rest
  // first, as an HTTP/1.1 session does. The second try finds the refusal cached, so
  // its 401 is at once, with most of the body still to come.
  for (const time of ['first', 'second']) {
    const h2 = await curl(['--http2-prior-knowledge', '-u', 'alice:nope', '--data-binary', `@${file}`, '-o', '/dev/null', '-w', '%{http_code}', url])
    t.equal(`${h2.stdout} ${h2.stderr}`, '401 ', `curl over HTTP/2, a wrong password the ${time} time: 401`)
  }
  const session = await h2connect(t, lila.port)
  const wrong = await h2request(session, {
    method: 'POST',
    path: '/upload',
    headers: { authorization: `Basic ${Buffer.from('alice:nope').toString('base64')}` },
    body
  })
  t.equal(wrong.status, 401, 'Node\'s client: 401, the body never read on')
  t.equal(wrong.rstCode, 0, 'the stream ends without error')
  // A body that would not end is dropped for a while, then its stream reset NO_ERROR.
  const endless = await within(15000, 'the endless body\'s stream to close', h2request(session, {
    method: 'POST',
    path: '/upload',
    headers: { authorization: `Basic ${Buffer.from('alice:nope').toString('base64')}`, 'content-length': String(2 ** 30) },
    endStream: false,
    onStream: stream => stream.write(body)
  }))
  t.equal(endless.status, 401)
  t.equal(endless.rstCode, 0, 'reset NO_ERROR once lila stopped waiting for the rest')
  t.equal(backend.bodies.length, 2)
})

t.test('an HTTP/2 client that reads none of its 401 but sends on is not held: its connection idles out', async t => {
  const backend = await backendFor(t)
  if (htpasswd.skip) return t.skip(htpasswd.skip)
  const users = writeUsers(t)
  const lila = await lilaFor(t, backend, ['--basic-auth', users, '--idle-timeout', '1s'])
  // A window of 0: the 401's body cannot go out, so the stream stays open after lila
  // is done with the request, and the client trickles on.
  const session = http2.connect(`http://127.0.0.1:${lila.port}`, { settings: { initialWindowSize: 0 } })
  session.on('error', () => {})
  t.teardown(() => session.destroy())
  const closed = new Promise(resolve => session.once('close', resolve))
  const stream = session.request({
    ':method': 'POST', ':path': '/upload', 'content-length': String(2 ** 30), authorization: `Basic ${Buffer.from('alice:nope').toString('base64')}`
  }, { endStream: false })
  stream.on('error', () => {})
  const status = await within(10000, 'the 401', new Promise(resolve => stream.once('response', h => resolve(h[':status']))))
  t.equal(status, 401)
  const trickle = setInterval(() => stream.write(Buffer.alloc(100, 'x')), 100)
  t.teardown(() => clearInterval(trickle))
  await within(15000, 'lila to close the idle connection', closed)
  t.pass('closed by --idle-timeout, the trickle notwithstanding')
})

t.test('--compress with an HTTP/2 backend and a chunked HTTP/1.1 one with trailers', async t => {
  const { h2Backend } = require('./fixtures/h2')
  const h2 = await h2Backend(t, 'h2', stream => {
    stream.respond({ ':status': 200, 'content-type': 'application/json' })
    stream.end(html)
  })
  const viaH2 = await spawnLila(t, [h2.address, '--protocol', 'http', '--backend-protocol', 'h2', '--host', '127.0.0.1', '--port', '0',
    '--check', 'none', '--compress'])
  const res = await get(viaH2.port, '/', { 'accept-encoding': 'gzip' })
  t.equal(res.headers['content-encoding'], 'gzip')
  t.ok(zlib.gunzipSync(res.body).equals(html), 'an HTTP/2 backend\'s body, gzipped, decodes')
  const chunked = await httpBackend(t, 'c', (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-sum' })
    res.write(html.subarray(0, 30000))
    res.write(html.subarray(30000))
    res.addTrailers({ 'x-sum': 'ok' })
    res.end()
  })
  const viaH1 = await spawnLila(t, [chunked.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--compress'])
  const raw = await curl(['--raw', '-s', '-H', 'accept-encoding: gzip', '-D', '-', '-o', path.join(tempDir(t), 'raw'), `http://127.0.0.1:${viaH1.port}/`])
  t.match(raw.stdout, /^transfer-encoding: chunked\r$/im)
  t.match(raw.stdout, /^content-encoding: gzip\r$/im)
  const decoded = await curl(['--compressed', '-s', `http://127.0.0.1:${viaH1.port}/`])
  t.equal(decoded.stdout, html.toString(), 'a chunked body, unframed then gzipped, decodes')
  const session = await h2connect(t, viaH1.port)
  const trailed = await h2request(session, { path: '/', headers: { 'accept-encoding': 'gzip', te: 'trailers' } })
  t.ok(zlib.gunzipSync(trailed.body).equals(html), 'HTTP/2 client: decodes')
  t.equal(trailed.trailers && trailed.trailers['x-sum'], 'ok', 'the trailers follow the compressed body')
})
