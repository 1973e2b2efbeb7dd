'use strict'

// --max-body-size: a request body over it is answered 413, before any of it is read
// when its length is said, as it comes when not; with curl over HTTP/1.1 (a length,
// chunked, Expect: 100-continue) and HTTP/2 (with and without content-length), and
// Node's HTTP/2 client for a gRPC call. The backend never gets a whole body over it.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { httpBackend, spawnLila, runLila, curl, within } = require('./fixtures/helpers')
const { h2connect, h2request } = require('./fixtures/h2')
const { tmpDir } = require('./fixtures/tmp')

const LIMIT = 100 * 1024

// A backend that answers each request with the size of the body it got whole, and
// counts the requests it got and the bodies it got whole.
async function countingBackend (t) {
  const seen = { whole: [], requests: 0 }
  const backend = await httpBackend(t, 'a', (req, res) => {
    seen.requests++
    let bytes = 0
    req.on('data', chunk => { bytes += chunk.length })
    req.on('end', () => {
      seen.whole.push(bytes)
      res.end(`got ${bytes}`)
    })
  })
  return { backend, seen }
}

function files (t) {
  const dir = tmpDir(t, 'lila-body-size-')
  const write = (name, size) => {
    const file = path.join(dir, name)
    fs.writeFileSync(file, Buffer.alloc(size, 'b'))
    return `@${file}`
  }
  return { at: write('at', LIMIT), over: write('over', LIMIT + 1), large: write('large', 4 * 1024 * 1024) }
}

t.test('--max-body-size: at the limit passes, past it 413, whichever framing and protocol', async t => {
  const { backend, seen } = await countingBackend(t)
  const lila = await spawnLila(t, [backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    '--max-body-size', '100k'])
  const url = `http://127.0.0.1:${lila.port}/upload`
  const body = files(t)
  const ways = {
    'HTTP/1.1 with a length': [],
    'HTTP/1.1 chunked': ['-H', 'Transfer-Encoding: chunked'],
    'HTTP/1.1 with Expect: 100-continue': ['-H', 'Expect: 100-continue', '--expect100-timeout', '30'],
    'HTTP/2 with content-length': ['--http2-prior-knowledge'],
    'HTTP/2 without content-length': ['--http2-prior-knowledge', '-H', 'content-length:']
  }
  for (const [way, args] of Object.entries(ways)) {
    const at = await curl([...args, '--data-binary', body.at, '-w', ' %{http_code}', url])
    t.equal(`${at.stdout} ${at.stderr}`, `got ${LIMIT} 200 `, `${way}: a body of exactly 100k reaches the backend`)
    const before = seen.requests
    for (const size of ['over', 'large']) {
      const over = await curl([...args, '--data-binary', body[size], '-o', '/dev/null', '-w', '%{http_code}', url])
      t.equal(`${over.stdout} ${over.stderr}`, '413 ', `${way}: a body ${size === 'over' ? 'a byte over' : 'of 4 MiB'}: 413`)
    }
    // A length said over the limit is refused before a backend is asked; a body of
    // unknown length may have reached one before it passed the limit.
    if (!way.includes('chunked') && !way.includes('without')) t.equal(seen.requests, before, `${way}: no backend asked`)
  }
  t.same(seen.whole, Array(5).fill(LIMIT), 'the backend got no body over the limit whole')
  const words = await curl(['--data-binary', body.over, url])
  t.equal(words.stdout, '413 Content Too Large: the request body is over --max-body-size (102400 bytes)\n')
})

t.test('--max-body-size: a gRPC call over it gets RESOURCE_EXHAUSTED', async t => {
  const { backend } = await countingBackend(t)
  const lila = await spawnLila(t, [backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    '--max-body-size', '1k'])
  const session = await h2connect(t, lila.port)
  const call = await within(10000, 'the call\'s answer', h2request(session, {
    method: 'POST',
    path: '/pkg.Service/Method',
    headers: { 'content-type': 'application/grpc', te: 'trailers' },
    body: Buffer.alloc(2048)
  }))
  t.equal(call.status, 200)
  const status = (call.trailers && call.trailers['grpc-status']) || call.headers['grpc-status']
  t.equal(status, '8', 'grpc-status 8, RESOURCE_EXHAUSTED')
})

t.test('--max-body-size: a size it cannot read is a usage error; it needs http', async t => {
  for (const [value, words] of [['0', '"0"'], ['1.5m', '"1.5m"'], ['10x', '"10x"'], ['10mb', '"10mb"']]) {
    const run = await runLila(['rr', '127.0.0.1:9', '--protocol', 'http', '--max-body-size', value])
    t.equal(run.code, 2)
    t.equal(run.stderr.split('\n')[0], `lila: invalid value ${words} for --max-body-size: expected a size in bytes, or with k, m or g (KiB, MiB, GiB), e.g. 10m`)
  }
  const tcp = await runLila(['rr', '127.0.0.1:9', '--max-body-size', '1m'])
  t.equal(tcp.code, 2)
  t.equal(tcp.stderr.split('\n')[0], 'lila: option --max-body-size needs --protocol http')
})

t.test('--max-body-size per route: a route\'s own in place of the listener\'s, which the others keep', async t => {
  const { backend, seen } = await countingBackend(t)
  const lila = await spawnLila(t, [backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    '--max-body-size', '1k',
    '--route', `/upload=max-body-size=1m ${backend.address}`,
    '--route', `/tiny=max-body-size=10 ${backend.address}`,
    '--route', `/api=${backend.address}`])
  const post = async (where, size) => (await curl(['--data-binary', `@${bodyFile(t, size)}`, '-o', '/dev/null', '-w', '%{http_code}',
    `http://127.0.0.1:${lila.port}${where}`])).stdout
  t.equal(await post('/upload', 512 * 1024), '200', '/upload: 512 KiB under its own 1m')
  t.equal(await post('/upload', 1024 * 1024 + 1), '413', '/upload: past its 1m')
  t.equal(await post('/tiny', 11), '413', '/tiny: past its 10 bytes')
  t.equal(await post('/tiny', 10), '200')
  t.equal(await post('/api', 2048), '413', '/api, a route without its own: the listener\'s 1k')
  t.equal(await post('/other', 2048), '413', 'the listener\'s own backends: 1k')
  t.equal(await post('/other', 1024), '200')
  t.same(seen.whole, [512 * 1024, 10, 1024])
})

t.test('--max-body-size per route in the config file, inherited from the listener otherwise', async t => {
  const { backend } = await countingBackend(t)
  const dir = tmpDir(t, 'lila-body-size-')
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({
    listeners: [{
      protocol: 'http',
      host: '127.0.0.1',
      port: 0,
      check: 'none',
      'max-body-size': 100,
      backends: [backend.address],
      routes: [{ match: '/upload', 'max-body-size': '1k', backends: [backend.address] }, { match: '/api', backends: [backend.address] }]
    }]
  }))
  const lila = await spawnLila(t, ['--config', file])
  const post = async (where, size) => (await curl(['--data-binary', `@${bodyFile(t, size)}`, '-o', '/dev/null', '-w', '%{http_code}',
    `http://127.0.0.1:${lila.port}${where}`])).stdout
  t.equal(await post('/upload', 1024), '200')
  t.equal(await post('/upload', 1025), '413')
  t.equal(await post('/api', 101), '413', 'a route without its own has the listener\'s')
  t.equal(await post('/api', 100), '200')
})

// A file of `size` bytes, removed with the test.
function bodyFile (t, size) {
  const dir = tmpDir(t, 'lila-body-size-')
  const file = path.join(dir, 'body')
  fs.writeFileSync(file, Buffer.alloc(size, 'b'))
  return file
}
