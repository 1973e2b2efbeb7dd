'use strict'

// Rules at the edge, the pure parts: addresses (--allow, --deny), Accept-Encoding, what
// is compressed and how its head changes, the streaming compressor, trace context, a
// route's strip, and the Rules object an HTTP exchange asks (compileEdge), with its
// counts and log lines.

const t = require('tap')
const zlib = require('zlib')
const crypto = require('crypto')
const { AddressGate } = require('../lib/proxy/edge/addresses')
const { encodingChooser, qValues } = require('../lib/proxy/edge/negotiate')
const { compressible, compressedFields, typeMatcher, MIN_LENGTH } = require('../lib/proxy/edge/compress')
const { Compressor } = require('../lib/proxy/edge/compressor')
const { nextTraceparent } = require('../lib/proxy/edge/trace')
const { parseTraceparent } = require('../lib/wire/trace-context')
const { stripPrefix } = require('../lib/proxy/edge/prefix')
const { EdgeStats } = require('../lib/proxy/edge/stats')
const { compileEdge, loadEdge } = require('../lib/proxy/edge/rules')
const { parseCommandLine } = require('../lib/config/argv')
const { OPTIONS } = require('../lib/config/options')
const { captureLog, within, until } = require('./fixtures/helpers')

t.test('AddressGate: IPv4, IPv6 and IPv4-mapped alike; deny wins', async t => {
  const gate = new AddressGate(['10.0.0.0/8', '2001:db8::/32', '127.0.0.1/32'], ['10.9.0.0/16', '2001:db8:bad::/48'])
  const cases = {
    '10.1.2.3': null,
    '::ffff:10.1.2.3': null,
    '10.9.1.1': 'deny',
    '::ffff:10.9.1.1': 'deny',
    '11.0.0.1': 'allow',
    '2001:db8::1': null,
    '2001:DB8::1': null,
    '2001:db8:bad::1': 'deny',
    '2001:db9::1': 'allow',
    '127.0.0.1': null,
    '127.0.0.2': 'allow',
    '::1': 'allow',
    'unix:': 'allow'
  }
  for (const [address, verdict] of Object.entries(cases)) t.equal(gate.judge(address), verdict, address)
  const denyOnly = new AddressGate([], ['127.0.0.2/32'])
  t.equal(denyOnly.judge('127.0.0.2'), 'deny')
  t.equal(denyOnly.judge('127.0.0.1'), null)
  t.equal(denyOnly.judge('unix:'), null, 'an address on no list passes a deny list')
  const mapped = new AddressGate(['::ffff:192.168.0.0/112'], [])
  t.equal(mapped.judge('192.168.3.4'), null, 'an IPv4-mapped network takes the IPv4 address')
})

t.test('Accept-Encoding: q-values, *, x-gzip, lila\'s order on a tie', async t => {
  const choose = encodingChooser(['br', 'gzip'])
  const cases = [
    [undefined, null],
    ['', null],
    ['identity', null],
    ['gzip', 'gzip'],
    ['GZIP', 'gzip'],
    ['x-gzip', 'gzip'],
    ['br', 'br'],
    ['gzip, deflate, br, zstd', 'br'],
    ['gzip, br;q=0', 'gzip'],
    ['br;q=0, gzip;q=0', null],
    ['gzip;q=1, br;q=0.9', 'gzip'],
    ['gzip;q=0.5, br;q=0.500', 'br'],
    ['*', 'br'],
    ['*;q=0.1, br;q=0', 'gzip'],
    ['deflate, *;q=0', null],
    ['gzip;q=2', null], // unreadable: left out
    ['gzip ; q=0.8 , br ; q=0.7', 'gzip'],
    ['gzip;q=0.8;level=1', 'gzip'],
    [',, gzip ,', 'gzip']
  ]
  for (const [header, expected] of cases) t.equal(choose(header), expected, JSON.stringify(header))
  t.equal(encodingChooser(['gzip', 'br'])('br, gzip'), 'gzip', 'a tie goes to the order offered')
  t.equal(encodingChooser(['gzip'])('br'), null, 'only what is offered')
  t.same([...qValues('a;q=0.1, b, a;q=1')], [['a', 0.1], ['b', 1]], 'a coding named twice keeps its first')
})

const headOf = fields => name => fields[name]
const TYPES = typeMatcher(OPTIONS.find(o => o.name === 'compress-types').default)

t.test('what is compressed: the types, the size, and what is never touched', async t => {
  const yes = { 'content-type': 'text/html; charset=utf-8' }
  t.ok(compressible('GET', 200, headOf(yes), TYPES), 'text/html, length unknown')
  for (const type of ['text/plain', 'text/event-stream', 'application/json', 'application/ld+json', 'application/problem+json',
    'application/javascript', 'text/javascript', 'application/xml', 'application/atom+xml', 'image/svg+xml', 'application/wasm', 'TEXT/CSS']) {
    t.ok(compressible('GET', 200, headOf({ 'content-type': type }), TYPES), type)
  }
  for (const type of ['image/png', 'application/octet-stream', 'application/grpc', 'video/mp4', 'application/zip', 'font/woff2', 'application/+json']) {
    t.notOk(compressible('GET', 200, headOf({ 'content-type': type }), TYPES), type)
  }
  t.notOk(compressible('GET', 200, headOf({}), TYPES), 'no content-type')
  t.ok(compressible('GET', 200, headOf({ ...yes, 'content-length': String(MIN_LENGTH) }), TYPES), '1 KiB')
  t.notOk(compressible('GET', 200, headOf({ ...yes, 'content-length': '500' }), TYPES), '500 bytes')
  t.notOk(compressible('GET', 200, headOf({ ...yes, 'content-encoding': 'gzip' }), TYPES), 'already encoded')
  t.ok(compressible('GET', 200, headOf({ ...yes, 'content-encoding': 'identity' }), TYPES), 'identity is no coding')
  t.notOk(compressible('GET', 200, headOf({ ...yes, 'cache-control': 'public, no-transform' }), TYPES), 'no-transform')
  t.notOk(compressible('GET', 200, headOf({ ...yes, 'cache-control': 'No-Transform' }), TYPES), 'No-Transform')
  t.ok(compressible('GET', 200, headOf({ ...yes, 'cache-control': 'max-age=60' }), TYPES))
  for (const status of [101, 103, 204, 206, 304]) t.notOk(compressible('GET', status, headOf(yes), TYPES), `status ${status}`)
  for (const status of [201, 404, 500]) t.ok(compressible('GET', status, headOf(yes), TYPES), `status ${status}`)
  t.notOk(compressible('HEAD', 200, headOf(yes), TYPES), 'HEAD')
  const mine = typeMatcher(['application/x-custom', 'text/*'])
  t.ok(mine('application/x-custom;v=1'))
  t.notOk(mine('application/json'), 'a list of its own replaces the default')
})

t.test('a compressed head: Content-Encoding, no length, Vary, a weak ETag', async t => {
  t.same(compressedFields(headOf({ 'content-length': '5000', etag: '"abc"' }), 'gzip'), [
    ['vary', 'Accept-Encoding'], ['content-encoding', 'gzip'], ['content-length', null], ['accept-ranges', null], ['etag', 'W/"abc"']
  ])
  t.same(compressedFields(headOf({ etag: 'W/"abc"', vary: 'Origin' }), 'br'), [
    ['vary', 'Origin, Accept-Encoding'], ['content-encoding', 'br'], ['content-length', null], ['accept-ranges', null]
  ], 'a weak ETag stays; Vary keeps what it had')
  t.same(compressedFields(headOf({ vary: 'origin, accept-encoding' }), 'gzip').filter(([n]) => n === 'vary'), [], 'Vary already says it')
  t.same(compressedFields(headOf({ vary: '*' }), 'gzip').filter(([n]) => n === 'vary'), [], 'Vary: *')
  t.same(compressedFields(headOf({}), null), [['vary', 'Accept-Encoding']], 'not compressed for this client: Vary only')
})

// A sink for a Compressor: what came out, with a switch to say the client is full.
function sink () {
  const out = { chunks: [], ended: false, drains: 0, full: false, errors: [], waiters: [] }
  out.data = chunk => {
    out.chunks.push(chunk)
    for (const w of out.waiters.splice(0)) w()
    return !out.full
  }
  out.drain = () => { out.drains++ }
  out.end = () => {
    out.ended = true
    for (const w of out.waiters.splice(0)) w()
  }
  out.error = err => out.errors.push(err)
  out.next = () => within(5000, 'compressed bytes', new Promise(resolve => out.waiters.push(resolve)))
  return out
}

const statsFor = () => new EdgeStats(captureLog().log)

t.test('the compressor: each write flushed soon after, event by event (SSE)', async t => {
  for (const encoding of ['gzip', 'br']) {
    const stats = statsFor()
    const out = sink()
    const c = new Compressor(encoding, out, stats)
    const decoder = encoding === 'gzip' ? zlib.createGunzip() : zlib.createBrotliDecompress()
    let decoded = ''
    const arrivals = []
    decoder.on('data', chunk => {
      decoded += chunk
      for (const w of arrivals.splice(0)) w()
    })
    let fed = 0
    for (let i = 0; i < 3; i++) {
      const event = `data: event ${i}\n\n`
      c.write(Buffer.from(event))
      await within(5000, `${encoding} event ${i} decoded`, (async () => {
        while (!decoded.endsWith(event)) {
          const more = Promise.race([out.next(), new Promise(resolve => arrivals.push(resolve))])
          while (fed < out.chunks.length) decoder.write(out.chunks[fed++])
          await more
        }
      })())
      t.equal(decoded, Array.from({ length: i + 1 }, (_, k) => `data: event ${k}\n\n`).join(''), `${encoding}: event ${i} decodes before the next is written`)
    }
    c.end()
    while (!out.ended) await out.next()
    const snapshot = stats.snapshot().compression[encoding]
    t.equal(snapshot.bytesIn, 3 * 'data: event 0\n\n'.length, `${encoding}: bytes in counted`)
    t.equal(snapshot.bytesOut, Buffer.concat(out.chunks).length, `${encoding}: bytes out counted`)
  }
})

t.test('the compressor: a body comes out whole and smaller; back-pressure both ways', async t => {
  const text = Buffer.from(JSON.stringify(Array.from({ length: 20000 }, (_, i) => ({ id: i, name: `item ${i}`, tags: ['a', 'b'] }))))
  for (const encoding of ['gzip', 'br']) {
    const out = sink()
    out.full = true // the client takes nothing until told
    let drains = 0
    let onDrain = null
    out.drain = () => {
      drains++
      if (onDrain !== null) onDrain()
    }
    const c = new Compressor(encoding, out, statsFor())
    // A backend that writes random (incompressible, and never repeated) bytes as fast as
    // it is let.
    let written = 0
    let stuck = false
    for (let i = 0; i < 1000 && !stuck; i++) {
      const noise = crypto.randomBytes(16 * 1024)
      written += noise.length
      if (c.write(noise)) continue
      const seen = drains
      const drained = new Promise(resolve => { onDrain = resolve })
      // Either a drain (the compressor took it in), or both sides full and no drain.
      const full = until(() => c.stream.writableLength >= 64 * 1024 && c.stream.readableLength >= 64 * 1024 && drains === seen, 'the compressor full', { timeout: 5000 }).then(() => 'full')
      stuck = await Promise.race([drained.then(() => false), full.then(() => drains === seen)])
    }
    t.ok(stuck, `${encoding}: with the client full, the backend is held (after ${written} bytes)`)
    t.ok(written < 2 * 1024 * 1024, `${encoding}: what waits stays bounded: ${written} bytes written`)
    const drained = new Promise(resolve => { onDrain = resolve })
    out.full = false
    c.resume()
    await within(5000, 'drain', drained)
    t.pass(`${encoding}: drain() once the client took the bytes`)
    c.destroy()

    const whole = sink()
    const d = new Compressor(encoding, whole, statsFor())
    for (let at = 0; at < text.length; at += 16384) d.write(text.subarray(at, at + 16384))
    d.end()
    while (!whole.ended) await whole.next()
    const body = Buffer.concat(whole.chunks)
    const back = encoding === 'gzip' ? zlib.gunzipSync(body) : zlib.brotliDecompressSync(body)
    t.ok(back.equals(text), `${encoding}: decodes to the same bytes`)
    t.ok(body.length < text.length / 4, `${encoding}: ${text.length} -> ${body.length} bytes`)
  }
})

t.test('traceparent: what is read, what is sent on', async t => {
  const valid = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
  t.same(parseTraceparent(valid), { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentId: '00f067aa0ba902b7', flags: '01' })
  const invalid = [
    undefined, '', valid.toUpperCase(), valid.slice(0, 54), `${valid}-`, `${valid}x`,
    'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g',
    '00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    `${valid}, ${valid}` // two traceparent fields, joined
  ]
  for (const value of invalid) t.equal(parseTraceparent(value), null, JSON.stringify(value))
  t.ok(parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future'), 'a later version with more fields')
  t.equal(parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x'), null, 'more, but not after a "-"')

  const kept = nextTraceparent(valid)
  t.equal(kept.traceId, '4bf92f3577b34da6a3ce929d0e0e4736')
  t.equal(kept.fresh, false)
  t.match(kept.traceparent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/)
  t.not(kept.traceparent.slice(36, 52), '00f067aa0ba902b7', 'a new parent ID: lila\'s hop')
  t.match(nextTraceparent(valid.replace(/-01$/, '-00')).traceparent, /-00$/, 'the flags kept')
  t.match(nextTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future').traceparent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/, 'sent on as version 00')
  const fresh = nextTraceparent('garbage')
  t.equal(fresh.fresh, true)
  t.match(fresh.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/, 'a new trace, sampled')
  t.ok(parseTraceparent(fresh.traceparent), 'which reads back')
  const ids = new Set()
  for (let i = 0; i < 2000; i++) ids.add(nextTraceparent(undefined).traceId)
  t.equal(ids.size, 2000, 'trace IDs do not repeat')
})

t.test('a route\'s strip: the prefix off, whole segments', async t => {
  t.equal(stripPrefix('/api/x', '/api'), '/x')
  t.equal(stripPrefix('/api/x/y?z=1', '/api'), '/x/y?z=1')
  t.equal(stripPrefix('/api', '/api'), '/')
  t.equal(stripPrefix('/api?z', '/api'), '/?z')
  t.equal(stripPrefix('/api/', '/api'), '/')
  t.equal(stripPrefix('/a/b/c', '/a/b'), '/c')
})

// A listener's config with its edge options from the command line.
const configOf = args => parseCommandLine([...args, '--port', '0']).config.listeners[0]
const fields = map => name => map[name]
const basic = (user, password) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`
const SHA_USERS = 'alice:{SHA}JauGvtFJymypwcDV23yakTiN3qs=\nbob:{SHA}' + crypto.createHash('sha1').update('hunter2').digest('base64') + '\n'

function compiled (t, args, files = {}) {
  const config = configOf(args)
  const readFile = file => {
    if (files[file] === undefined) throw Object.assign(new Error('no'), { code: 'ENOENT' })
    return files[file]
  }
  const capture = captureLog('debug')
  const stats = new EdgeStats(capture.log)
  const loaded = loadEdge(config, { readFile })
  return { ...compileEdge(config, loaded, stats), stats, capture, config }
}

t.test('no rules: nothing compiled, nothing to ask', async t => {
  for (const args of [[':9001'], [':9001', '--protocol', 'http'], [':9001', '--protocol', 'http', '--route', '/api=:9002']]) {
    const { gate, own, routes } = compiled(t, args)
    t.equal(gate, null)
    t.equal(own, null)
    t.same([...routes.values()], routes.size ? [null] : [])
  }
})

t.test('tcp: --allow and --deny are the listener\'s gate, asked per connection', async t => {
  const { gate, own, stats } = compiled(t, [':9001', '--allow', '127.0.0.0/8', '--deny', '127.0.0.2'])
  t.equal(own, null)
  t.equal(gate.judge('127.0.0.1'), null)
  t.equal(gate.judge('127.0.0.2'), 'deny')
  t.equal(gate.judge('10.0.0.1'), 'allow')
  t.same(stats.snapshot(), { refused: {}, compression: {}, forwardAuth: { asked: 0, allowed: 0, cached: 0 } }, 'the listener counts what its gate refuses')
})

t.test('http: address and password rules of the listener and the route, in that order, counted and logged', async t => {
  const { gate, own, routes, stats, capture } = compiled(t, [
    ':9001', '--protocol', 'http', '--allow', '127.0.0.0/8', '--basic-auth', '/users', '--basic-auth-realm', 'staff',
    '--route', '/admin=strip deny=127.0.0.3 basic-auth=/admins :9002'
  ], { '/users': SHA_USERS, '/admins': SHA_USERS.split('\n')[1] + '\n' })
  t.equal(gate, null, 'asked per request: a 403 rather than a closed connection')
  t.same(own.admit('10.0.0.1', basic('alice', 's3cr3t'), false), { status: 403, grpcStatus: 7, fields: [], reason: 'allow', detail: 'the client\'s address is not on the --allow list' })
  const missing = own.admit('127.0.0.1', undefined, false)
  t.match(missing, { status: 401, grpcStatus: 16, reason: 'no-credentials', fields: [['www-authenticate', 'Basic realm="staff", charset="UTF-8"']] })
  t.equal(await own.admit('127.0.0.1', basic('alice', 's3cr3t'), false), null, 'alice in')
  t.equal(own.admit('127.0.0.1', basic('alice', 's3cr3t'), false), null, 'remembered: no promise the second time')
  t.match(await own.admit('127.0.0.1', basic('alice', 'nope'), false), { status: 401, reason: 'wrong-credentials' })
  const admin = routes.get('/admin')
  t.match(admin.admit('127.0.0.3', basic('bob', 'hunter2'), false), { status: 403, reason: 'deny' }, 'the route\'s deny list')
  t.match(await admin.admit('127.0.0.1', basic('alice', 's3cr3t'), false), { status: 401, reason: 'wrong-credentials' }, 'alice is not in the route\'s file')
  t.equal(await admin.admit('127.0.0.1', basic('bob', 'hunter2'), false), null, 'bob is in both')
  t.match(stats.snapshot().refused, { allow: 1, 'no-credentials': 1, 'wrong-credentials': 2, deny: 1 })
  await capture.waitFor(/^refused 10\.0\.0\.1: not on --allow$/)
  await capture.waitFor(/^refused 127\.0\.0\.3 on route \/admin: on --deny$/)
  t.equal(capture.lines.filter(line => /wrong user or password/.test(line)).length, 1, 'the second wrong password within the second: counted into the next line')
  t.same(admin.rewriteRequest('/admin/users?x=1', fields({ authorization: 'Basic x' })), {
    path: '/users?x=1', fields: [['x-forwarded-prefix', '/admin'], ['authorization', null]], traceId: null
  }, 'the prefix off, told in X-Forwarded-Prefix; the credentials kept from the backend')
  t.equal(own.rewriteRequest('/x', fields({})), null, 'nothing to change')
})

t.test('--basic-auth-pass: the backend gets the Authorization', async t => {
  const { own } = compiled(t, [':9001', '--protocol', 'http', '--basic-auth', '/users', '--basic-auth-pass'], { '/users': SHA_USERS })
  t.equal(own.rewriteRequest('/', fields({ authorization: basic('alice', 's3cr3t') })), null)
})

t.test('refusals: a line per reason at most once a second, the rest counted into it', async t => {
  const { gate } = compiled(t, [':9001', '--deny', '127.0.0.2'])
  let now = 0
  const capture = captureLog('info')
  const stats = new EdgeStats(capture.log)
  const { throttled } = require('../lib/log')
  stats.lines.set('deny', throttled(line => capture.log.info(line), 1000, () => now))
  for (let i = 0; i < 5; i++) stats.refused(gate.judge('127.0.0.2'), '127.0.0.2')
  stats.refused('allow', '10.0.0.1')
  now = 1500
  stats.refused('deny', '127.0.0.2')
  t.same(capture.lines, [
    'refused 127.0.0.2: on --deny',
    'refused 10.0.0.1: not on --allow',
    'refused 127.0.0.2: on --deny (and 4 more like it in the last 2s)'
  ])
  t.same(stats.snapshot().refused, { deny: 6, allow: 1 })
  const quiet = new EdgeStats(captureLog('info').log)
  quiet.refused('no-credentials', '127.0.0.1')
  t.same(quiet.snapshot().refused, { 'no-credentials': 1 }, 'counted even when its line is below the level')
})

t.test('--compress: the response transform, and the compressor it makes', async t => {
  const { own, stats } = compiled(t, [':9001', '--protocol', 'http', '--compress'])
  const html = fields({ 'content-type': 'text/html', 'content-length': '5000', etag: '"v1"' })
  const plan = own.responseTransform('GET', 'gzip, deflate, br', 200, html)
  const preferred = OPTIONS.find(o => o.name === 'compress').bare.split(',')[0]
  t.equal(plan.encoding, preferred, `a client taking both gets the first of a bare --compress: ${preferred}`)
  t.same(plan.fields.map(([name]) => name), ['vary', 'content-encoding', 'content-length', 'accept-ranges', 'etag'])
  t.same(own.responseTransform('GET', undefined, 200, html), { fields: [['vary', 'Accept-Encoding']], encoding: null }, 'a client that asks for no coding: Vary only')
  t.equal(own.responseTransform('GET', 'gzip', 200, fields({ 'content-type': 'image/png' })), null)
  t.equal(own.responseTransform('HEAD', 'gzip', 200, html), null)
  t.equal(own.responseTransform('GET', 'gzip', 200, fields({ 'content-type': 'text/html', 'content-length': '500' })), null, '500 bytes pass untouched')
  t.equal(own.responseTransform('GET', 'gzip', 200, fields({ 'content-type': 'text/html', 'content-encoding': 'gzip' })), null, 'already gzip: untouched')
  t.equal(own.rewriteRequest('/', fields({})), null, '--compress changes no request')
  const gzip = own.responseTransform('GET', 'gzip', 200, html)
  t.equal(gzip.encoding, 'gzip')
  const out = sink()
  const c = own.compressor('gzip', out)
  c.write(Buffer.from('x'.repeat(5000)))
  c.end()
  while (!out.ended) await out.next()
  t.equal(zlib.gunzipSync(Buffer.concat(out.chunks)).toString(), 'x'.repeat(5000))
  t.match(stats.snapshot().compression[preferred], { responses: preferred === 'gzip' ? 2 : 1 })
  t.match(stats.snapshot().compression.gzip, { bytesIn: 5000 })
})

t.test('--trace: each request a traceparent; tracestate follows its trace', async t => {
  const { own, routes } = compiled(t, [':9001', '--protocol', 'http', '--trace', '--route', '/api=strip :9002'])
  const valid = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
  const kept = own.rewriteRequest('/', fields({ traceparent: valid, tracestate: 'vendor=1' }))
  t.equal(kept.traceId, '4bf92f3577b34da6a3ce929d0e0e4736')
  t.same(kept.fields.map(([name]) => name), ['traceparent'], 'tracestate passes through')
  const fresh = own.rewriteRequest('/', fields({ traceparent: 'bad', tracestate: 'vendor=1' }))
  t.same(fresh.fields.map(([name, value]) => [name, value === null]), [['traceparent', false], ['tracestate', true]], 'a new trace drops the old trace\'s state')
  const api = routes.get('/api').rewriteRequest('/api/x', fields({}))
  t.equal(api.path, '/x')
  t.same(api.fields.map(([name]) => name), ['x-forwarded-prefix', 'traceparent'], 'the listener\'s rules apply on its routes')
})

t.test('the htpasswd files are read at load; the errors say which', async t => {
  t.throws(() => compiled(t, [':9001', '--protocol', 'http', '--basic-auth', '/none']), { name: 'UsageError', message: 'cannot read --basic-auth file "/none": no such file' })
  t.throws(() => compiled(t, [':9001', '--protocol', 'http', '--basic-auth', '/bad'], { '/bad': 'x:y\n' }), { name: 'UsageError', message: /^\/bad: line 1: user "x" has no hash it reads/ })
  let reads = 0
  const config = configOf([':9001', '--protocol', 'http', '--basic-auth', '/u', '--route', '/a=basic-auth=/u :9002'])
  loadEdge(config, { readFile: () => { reads++; return SHA_USERS } })
  t.equal(reads, 1, 'a file named twice is read once')
})

t.test('an HTTP listener judges --allow and --deny per request, a tcp one per connection', async t => {
  const config = configOf([':9001', '--protocol', 'http', '--allow', '127.0.0.1'])
  const { gate, own } = compileEdge(config, loadEdge(config), statsFor())
  t.equal(gate, null, 'no gate on the connection: the exchange answers 403')
  t.equal(own.admit('127.0.0.2', undefined, false).status, 403)
  t.equal(own.admit('127.0.0.1', undefined, false), null)
  const tcp = configOf([':9001', '--allow', '127.0.0.1'])
  const compiled = compileEdge(tcp, loadEdge(tcp), statsFor())
  t.ok(compiled.gate, 'tcp: judged per connection')
  t.equal(compiled.own, null)
})

t.test('lila\'s own answers say a refusal\'s fields and the trace ID; the access log has it in every format', async t => {
  const { answerOf } = require('../lib/proxy/message/replies')
  const { reply } = require('../lib/proxy/http1/replies')
  const { createAccessLog } = require('../lib/admin/access-log')
  const { REFUSALS } = require('../lib/proxy/edge/rules')
  const challenge = [['www-authenticate', 'Basic realm="staff", charset="UTF-8"']]
  const ctx = { clientAddress: '127.0.0.1', requestId: null, traceId: '4bf92f3577b34da6a3ce929d0e0e4736' }
  const answer = answerOf(401, 'credentials needed', { fields: challenge, ctx })
  t.same(answer.fields, ['Content-Type', 'content-type', 'text/plain; charset=utf-8', 'Cache-Control', 'cache-control', 'no-store', 'WWW-Authenticate', 'www-authenticate', 'Basic realm="staff", charset="UTF-8"'])
  t.equal(answer.body.toString(), '401 Unauthorized: credentials needed\ntrace ID: 4bf92f3577b34da6a3ce929d0e0e4736\n')
  const bytes = reply(401, 'credentials needed', { fields: challenge, ctx }).toString()
  t.match(bytes, /^HTTP\/1\.1 401 Unauthorized\r\n/)
  t.match(bytes, /\r\nWWW-Authenticate: Basic realm="staff", charset="UTF-8"\r\n/)
  const grpc = answerOf(REFUSALS.deny.status, REFUSALS.deny.detail, { grpc: 'application/grpc', fields: REFUSALS.deny.fields })
  t.same(grpc.fields.slice(0, 6), ['Content-Type', 'content-type', 'application/grpc', 'grpc-status', 'grpc-status', String(REFUSALS.deny.grpcStatus)], 'a gRPC call: PERMISSION_DENIED')
  t.equal(reply(403, REFUSALS.allow.detail).toString().split('\r\n')[0], 'HTTP/1.1 403 Forbidden')

  const record = { listener: 'l', protocol: 'http', client: '127.0.0.1', backend: null, method: 'GET', target: '/', version: 'HTTP/1.1', status: 403, bytesIn: 1, bytesOut: 2, ms: 1, host: null, referer: null, userAgent: null, traceId: ctx.traceId }
  for (const [format, expected] of [['text', / 1\.00ms trace=4bf92f3577b34da6a3ce929d0e0e4736\n$/], ['json', /"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"/], ['combined', / "-" "-" "-" "4bf92f3577b34da6a3ce929d0e0e4736"\n$/]]) {
    let out = ''
    const log = createAccessLog({ format, stdout: { write: text => { out += text } } })
    log.log(record)
    log.flush()
    t.match(out, expected, format)
  }
})

t.test('the status page and the metrics show what was refused and compressed', async t => {
  const { renderPage } = require('../lib/admin/status-page')
  const { renderMetrics } = require('../lib/admin/metrics')
  const { sumStats } = require('../lib/admin/sum-stats')
  const listener = Object.assign(
    { name: 'web', protocol: 'http', mode: 'random', active: 0, waiting: 0, queued: 0, accepted: 3, unserved: 0 },
    { queueTimeouts: 0, retries: {}, limited: {}, backends: [], routes: [] },
    { refused: { deny: 2, 'wrong-credentials': 1 }, compression: { gzip: { responses: 4, bytesIn: 40960, bytesOut: 4096 } } }
  )
  const page = renderPage({ listeners: [listener] })
  t.match(page, 'refused at the edge 3 (deny: 2, wrong-credentials: 1)')
  t.match(page, 'gzip 4 responses, 40 KiB → 4.0 KiB')
  const metrics = renderMetrics({ listeners: [listener] })
  t.match(metrics, 'lila_listener_refused_total{listener="web",reason="deny"} 2\n')
  t.match(metrics, 'lila_listener_compressed_responses_total{listener="web",encoding="gzip"} 4\n')
  t.match(metrics, 'lila_listener_compression_in_bytes_total{listener="web",encoding="gzip"} 40960\n')
  t.match(metrics, 'lila_listener_compression_out_bytes_total{listener="web",encoding="gzip"} 4096\n')
  const other = { ...listener, refused: { deny: 1 }, compression: {} }
  const summed = sumStats([{ listeners: [listener] }, { listeners: [other] }])
  t.same(summed.listeners[0].refused, { deny: 3, 'wrong-credentials': 1 }, '--workers: summed')
  t.same(summed.listeners[0].compression, { gzip: { responses: 4, bytesIn: 40960, bytesOut: 4096 } })
})
