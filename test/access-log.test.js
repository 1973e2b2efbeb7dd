'use strict'

// --access-log: exactly one parseable line on stdout per connection (tcp) or request
// (http), whatever ended it, in text and in JSON.

const t = require('tap')
const net = require('net')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')
const {
  spawnLila, tcpBackend, resettingBackends, exchange, httpBackend, request, deadPort, settled, statusJson, until, within
} = require('./fixtures/helpers')

const TIME = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z'
// A logged time (ms precision) between the test's start and now.
const isDuring = (time, started) => time >= started - 1 && time <= Date.now()
const TCP_LINE = new RegExp(`^(${TIME}) (\\S+) -> (\\S+) tcp in=(\\d+) out=(\\d+) (\\d+\\.\\d\\d)ms$`)
const HTTP_LINE = new RegExp(`^(${TIME}) (\\S+) -> (\\S+) "(\\S+) (\\S+) (HTTP/1\\.[01])" (\\d{3}) in=(\\d+) out=(\\d+) (\\d+\\.\\d\\d)ms$`)

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const LOCAL = ['--host', '127.0.0.1', '--port', '0', '--status-port', '0', '--check', 'none']
const stdoutLines = lila => lila.stdout.split('\n').filter(Boolean)
const linesOf = (lila, n) => until(() => stdoutLines(lila).length >= n, `${n} access log lines (got: ${lila.stdout})`).then(() => stdoutLines(lila))

t.test('tcp, text: one line per connection, served or not', async t => {
  const [a, b] = await Promise.all(['a', 'b'].map(name => tcpBackend(t, name)))
  const dead = `127.0.0.1:${await deadPort()}`
  const started = Date.now()
  const lila = await spawnLila(t, ['rr', a.address, b.address, ...LOCAL, '--access-log'])
  for (let i = 0; i < 4; i++) await exchange(lila.port, 'hello')
  await settled(lila)
  const lines = await linesOf(lila, 4)
  t.equal(lines.length, 4, 'exactly one line per connection')
  const parsed = lines.map(line => TCP_LINE.exec(line))
  t.ok(parsed.every(Boolean), `every line parses:\n${lines.join('\n')}`)
  t.same(parsed.map(m => m[3]).sort(), [a.address, a.address, b.address, b.address].sort())
  t.ok(parsed.every(m => m[2] === '127.0.0.1' && m[4] === '5' && m[5] === '2'), 'client, bytes in ("hello") and out ("a\\n")')
  t.ok(parsed.every(m => isDuring(Date.parse(m[1]), started)), 'the time is when it happened')
  t.ok(parsed.every(m => Number(m[6]) <= Date.now() - started), 'the duration is within the test\'s own')
  t.equal((await lila.stop()).code, 0)

  // A connection no backend could take is a line too, with "-" for the backend.
  const none = await spawnLila(t, ['rr', dead, ...LOCAL, '--access-log', 'text'])
  await exchange(none.port, 'x')
  const [line] = await linesOf(none, 1)
  t.match(line, TCP_LINE)
  t.equal(TCP_LINE.exec(line)[3], '-')
  t.equal((await none.stop()).code, 0)
  t.equal(stdoutLines(none).length, 1)
})

// --retry-on reset: the client's bytes went to a backend that reset, again to the next,
// which reset too, and no backend is left: the line names the last that took them.
t.test('tcp, json: bytes that every backend took and reset name the last one', async t => {
  const { backends: [a, b], resets } = await resettingBackends(t, ['a', 'b'])
  const lila = await spawnLila(t, ['rr', a.address, b.address, ...LOCAL, '--retry-on', 'reset', '--retries', '1',
    '--eject-after', '0', '--access-log', 'json'])
  const { error } = await exchange(lila.port, 'hello')
  t.equal(error && error.code, 'ECONNRESET', 'the client is reset, as the backends did')
  t.equal(resets.length, 2, 'both backends took the bytes and reset')
  const [line] = await linesOf(lila, 1)
  const entry = JSON.parse(line)
  t.match(entry, { protocol: 'tcp', client: '127.0.0.1', bytesIn: 5, bytesOut: 0 })
  t.equal(entry.backend, { a: a.address, b: b.address }[resets[1]], 'the backend that reset last')
  await settled(lila)
  t.equal((await lila.stop()).code, 0)
  t.equal(stdoutLines(lila).length, 1, 'one line')
})

t.test('http, json: one object per request, with what the client was answered', async t => {
  let holding = null
  const backend = await httpBackend(t, 'a', (req, res) => {
    if (req.url === '/missing') {
      res.statusCode = 404
      return res.end('no\n')
    }
    if (req.url === '/slow') {
      holding = res
      return
    }
    res.end('hello\n')
  })
  const started = Date.now()
  const lila = await spawnLila(t, ['rr', backend.address, ...LOCAL, '--protocol', 'http', '--access-log', 'json'])
  t.equal((await request(lila.port, { path: '/a?b="c"' })).status, 200)
  t.equal((await request(lila.port, { path: '/missing' })).status, 404)
  t.equal((await request(lila.port, { method: 'POST', path: '/post', body: 'twelve bytes' })).status, 200)
  // A client that leaves (resets) before its response: 499.
  const client = net.connect(lila.port, '127.0.0.1')
  client.on('error', () => {})
  client.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => holding !== null, 'the slow request to reach the backend')
  client.resetAndDestroy()
  await settled(lila)
  holding.end()

  const lines = await linesOf(lila, 4)
  t.equal(lines.length, 4, 'exactly one line per request')
  const entries = lines.map(line => JSON.parse(line))
  for (const entry of entries) {
    t.same(Object.keys(entry), ['time', 'listener', 'protocol', 'client', 'backend', 'method', 'target', 'version', 'status', 'bytesIn', 'bytesOut', 'ms', 'host', 'referer', 'userAgent'])
    t.match(entry, { listener: `127.0.0.1:${lila.port}`, protocol: 'http', client: '127.0.0.1', backend: backend.address, version: 'HTTP/1.1' })
    t.ok(typeof entry.ms === 'number' && entry.ms >= 0 && entry.ms <= Date.now() - started, 'a duration within the test\'s own')
    t.ok(isDuring(Date.parse(entry.time), started), 'the time is when it happened')
  }
  t.same(entries.map(e => [e.method, e.target, e.status]), [
    ['GET', '/a?b="c"', 200],
    ['GET', '/missing', 404],
    ['POST', '/post', 200],
    ['GET', '/slow', 499]
  ])
  t.ok(entries[2].bytesIn > 12 && entries[2].bytesIn < 200, 'bytes in count the head and the body')
  const served = (await statusJson(lila)).listeners[0].backends[0]
  t.equal(served.total, 4)
  t.equal((await lila.stop()).code, 0)
})

t.test('http, text: lila\'s own answers and the quoting of odd targets', async t => {
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${await deadPort()}`, ...LOCAL, '--protocol', 'http', '--retries', '0', '--access-log'])
  t.equal((await request(lila.port, { path: '/x"y\\z' })).status, 502)
  const [line] = await within(5000, 'a line', linesOf(lila, 1))
  const match = HTTP_LINE.exec(line.replace(/\\"/g, '%22').replace(/\\\\/g, '%5C'))
  t.ok(match, line)
  t.equal(match[3], lila.lines.find(l => /127\.0\.0\.1:\d+ +up/.test(l)).match(/127\.0\.0\.1:\d+/)[0], 'the backend that failed')
  t.equal(match[7], '502')
  t.match(line, / "GET \/x\\"y\\\\z HTTP\/1\.1" 502 /, 'quotes and backslashes escaped')
  t.equal((await lila.stop()).code, 0)
})

t.test('combined: the Combined Log Format, read by a regular expression and by goaccess', async t => {
  const fs = require('fs')
  const path = require('path')
  const { spawnSync } = require('child_process')
  const { curl } = require('./fixtures/helpers')
  const backend = await httpBackend(t, 'a')
  // A zone that is not the test machine's UTC, with a half hour: +0530 all year.
  const env = { ...process.env, TZ: 'Asia/Kolkata' }
  const started = Date.now()
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--access-log', 'combined', ...LOCAL], { env })
  const url = `http://127.0.0.1:${lila.port}/page?q=1`
  await curl(['-o', '/dev/null', '-A', 'lila-test "agent"/1.0\tcaf\u00e9', '-e', 'http://ref.example/from', url])
  await curl(['-o', '/dev/null', `http://127.0.0.1:${lila.port}/other`])
  const lines = await linesOf(lila, 2)
  const COMBINED = /^(\S+) - - \[(\d\d)\/([A-Z][a-z]{2})\/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-]\d{4})\] "(\S+) (\S+) (HTTP\/1\.[01])" (\d{3}) (\d+) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"$/
  const first = COMBINED.exec(lines[0])
  t.ok(first, `a combined line: ${lines[0]}`)
  t.same([first[1], first[9], first[10], first[11], first[12]], ['127.0.0.1', 'GET', '/page?q=1', 'HTTP/1.1', '200'])
  t.equal(first[14], 'http://ref.example/from', 'the Referer')
  t.equal(first[15], 'lila-test \\"agent\\"/1.0\\x09caf\\xC3\\xA9', 'the User-Agent: quotes escaped, a tab and UTF-8 bytes as \\xHH')
  t.equal(first[8], '+0530', 'the offset of lila\'s local time zone')
  const month = String(MONTHS.indexOf(first[3]) + 1).padStart(2, '0')
  const when = Date.parse(`${first[4]}-${month}-${first[2]}T${first[5]}:${first[6]}:${first[7]}+05:30`)
  t.ok(when >= started - 1000 && when <= Date.now(), `the local time, read with its offset, is when it happened: ${first[0]}`)
  t.match(lines[1], /"GET \/other HTTP\/1\.1" 200 \d+ "-" "curl\/[\d.]+"$/, 'no Referer: "-"')

  const goaccess = tool('goaccess')
  if (goaccess.skip) return t.skip(goaccess.skip)
  const dir = tmpDir(t, 'lila-goaccess-')
  fs.writeFileSync(path.join(dir, 'access.log'), lines.join('\n') + '\n')
  const report = path.join(dir, 'report.json')
  const run = spawnSync(goaccess.path, [path.join(dir, 'access.log'), '--log-format=COMBINED', '--no-global-config', '-o', report], { encoding: 'utf8' })
  t.equal(run.status, 0, run.stderr)
  const general = JSON.parse(fs.readFileSync(report, 'utf8')).general
  t.equal(general.total_requests, 2, 'goaccess read both requests')
  t.equal(general.failed_requests, 0, 'and failed to parse none')
})

t.test('http, json: bytes out are the bytes the client got, a head held to the end counted once', async t => {
  // An h2c backend's answer without a length, whose end comes after its head with no
  // data: lila frames it in chunks for an HTTP/1.1 client, the head held until the end.
  const http2 = require('http2')
  const { listenOn } = require('./fixtures/helpers')
  const server = http2.createServer()
  server.on('stream', (stream, headers) => {
    stream.respond({ ':status': 200, 'content-type': 'text/plain' })
    if (headers[':path'] === '/empty') setImmediate(() => stream.end())
    else stream.end('hello\n')
  })
  await listenOn(t, server)
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${server.address().port}`, ...LOCAL, '--protocol', 'http',
    '--backend-protocol', 'h2', '--access-log', 'json'])
  const client = net.connect(lila.port, '127.0.0.1')
  t.teardown(() => client.destroy())
  let got = ''
  let wanted = null
  client.on('data', chunk => {
    got += chunk.toString('latin1')
    if (wanted !== null && got.endsWith('0\r\n\r\n')) wanted()
  })
  const received = []
  for (const path of ['/empty', '/full']) {
    got = ''
    const done = new Promise(resolve => { wanted = resolve })
    client.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`)
    await within(5000, () => `${path}, got ${JSON.stringify(got)}`, done)
    t.match(got, /^HTTP\/1\.1 200 OK\r\n[^]*Transfer-Encoding: chunked\r\n/, `${path}: in lila's chunks`)
    received.push(Buffer.byteLength(got, 'latin1'))
  }
  const entries = (await linesOf(lila, 2)).map(line => JSON.parse(line))
  t.same(entries.map(e => e.target), ['/empty', '/full'])
  t.equal(entries[0].bytesOut, received[0], 'bytesOut: what the client got, byte for byte, the head once')
  t.ok(entries[1].bytesOut > 0 && entries[1].bytesOut <= received[1], 'and never more than it got')
})
