'use strict'

// HTTP/2 through the spawned lila with clients and servers that are not Node's: nghttp
// as a client, nghttpd as a backend (both nghttp2's); and 64 MiB bodies both ways at
// once, byte for byte, with a slow reader on each side, in every pairing that has
// HTTP/2 in it (h2 to h2, h1 to h2, h2 to h1). curl, h2load, grpcurl, @grpc/grpc-js and
// Chromium are in http2-tools.test.js, grpc.test.js and browser-h2.test.js.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const http = require('http')
const http2 = require('http2')
const crypto = require('crypto')
const { spawn } = require('child_process')
const { spawnLila, httpBackend, within, listenOn } = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')
const { tool } = require('./fixtures/tools')
const { NGHTTP, NO_NGHTTPD, patterned, nghttpd } = require('./fixtures/nghttp')
const { writeAll, readDigest } = require('./fixtures/bodies')

const MIB = 1024 * 1024
const LOCAL = ['--host', '127.0.0.1', '--port', '0']
const H2 = ['--protocol', 'http', '--backend-protocol', 'h2']

// What a command writes on its stdout, as bytes.
function run (command, args) {
  return within(60000, `${command} ${args.join(' ')}`, new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] })
    const chunks = []
    child.stdout.on('data', chunk => chunks.push(chunk))
    child.on('error', reject)
    child.on('close', code => resolve({ code, out: Buffer.concat(chunks) }))
  }))
}

t.test('nghttp through lila: a 3 MiB body byte for byte, an upload, several streams at once', { skip: tool('nghttp').skip }, async t => {
  const big = patterned(3 * MIB)
  const backend = await httpBackend(t, 'app', (req, res) => {
    let size = 0
    req.on('data', chunk => { size += chunk.length })
    req.on('end', () => {
      if (req.url === '/big') return res.end(big)
      res.end(`${req.method} ${req.url} ${size}\n`)
    })
  })
  const lila = await spawnLila(t, [backend.address, '--protocol', 'http', ...LOCAL])
  const base = `http://127.0.0.1:${lila.port}`
  const got = await run(NGHTTP, [`${base}/big`])
  t.equal(got.code, 0)
  t.ok(got.out.equals(big), '3 MiB, byte for byte')
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lila-nghttp-')), 'upload')
  t.teardown(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }))
  fs.writeFileSync(file, patterned(100000))
  const upload = await run(NGHTTP, ['-d', file, `${base}/up`])
  t.equal(upload.out.toString(), 'POST /up 100000\n', 'an upload of 100,000 bytes')
  const three = await run(NGHTTP, [`${base}/a`, `${base}/b`, `${base}/c`])
  t.same(three.out.toString().split('\n').filter(Boolean).sort(), ['GET /a 0', 'GET /b 0', 'GET /c 0'], 'three streams on one connection')
  t.equal(backend.requests, 5)
})

t.test('nghttpd behind lila: files, an upload echoed, more streams than it allows a session', { skip: NO_NGHTTPD }, async t => {
  const port = await nghttpd(t, ['--echo-upload', '-m', '2'])
  const lila = await spawnLila(t, [`127.0.0.1:${port}`, ...H2, ...LOCAL])
  const session = http2.connect(`http://127.0.0.1:${lila.port}`)
  t.teardown(() => session.destroy())
  const fetch = (path, body = null) => within(30000, `${path} through lila`, new Promise((resolve, reject) => {
    const req = session.request({ ':method': body === null ? 'GET' : 'POST', ':path': path })
    const chunks = []
    let status = 0
    req.on('response', headers => { status = headers[':status'] })
    req.on('data', chunk => chunks.push(chunk))
    req.on('end', () => resolve({ status, body: Buffer.concat(chunks) }))
    req.on('error', reject)
    req.end(body === null ? undefined : body)
  }))
  const index = await fetch('/index.html')
  t.same([index.status, index.body.toString()], [200, 'hello from nghttpd\n'])
  t.ok((await fetch('/big')).body.equals(patterned(3 * MIB)), '3 MiB from nghttpd, byte for byte')
  const upload = patterned(MIB + 5)
  t.ok((await fetch('/echo', upload)).body.equals(upload), '1 MiB up and back (nghttpd\'s 64 KiB windows)')
  const many = await Promise.all(Array.from({ length: 20 }, () => fetch('/index.html')))
  t.same([...new Set(many.map(r => r.status))], [200], '20 at once over sessions of 2 streams, none refused')
  session.close()
})

// 64 MiB both ways at once: the client sends it in 1 MiB blocks as fast as it may, the
// backend echoes what it reads, and each side reads slowly (a pause after every 4 MiB).
const SIZE = 64 * MIB
function blockOf (i) {
  const buf = Buffer.allocUnsafe(MIB)
  for (let j = 0; j < MIB; j += 4) buf.writeUInt32LE((i * 2654435761 + j) >>> 0, j)
  return buf
}
const BLOCKS = Array.from({ length: 4 }, (_, i) => blockOf(i))
const SENT = (() => {
  const hash = crypto.createHash('sha256')
  for (let i = 0; i < SIZE / MIB; i++) hash.update(BLOCKS[i % BLOCKS.length])
  return hash.digest('hex')
})()

// How each side reads (above).
const SLOWLY = { bytes: 4 * MIB, ms: 2 }

// Write the 64 MiB to `writable` under its back-pressure, then end it.
function writeBody (writable) {
  writeAll(writable, Array.from({ length: SIZE / MIB }, (_, i) => BLOCKS[i % BLOCKS.length]))
}

// The backend echoes what it reads as it reads it, slowly.
function echoSlowly (input, output) {
  let since = 0
  input.on('data', chunk => {
    since += chunk.length
    if (!output.write(chunk) || since >= 4 * MIB) {
      since = 0
      input.pause()
      const go = () => setTimeout(() => input.resume(), 2)
      if (output.writableNeedDrain) output.once('drain', go)
      else go()
    }
  })
  input.on('end', () => output.end())
}

async function h2Echo (t) {
  return h2Backend(t, 'echo', stream => {
    stream.respond({ ':status': 200 })
    echoSlowly(stream, stream)
  })
}

async function h1Echo (t) {
  const server = http.createServer((req, res) => {
    res.writeHead(200)
    echoSlowly(req, res)
  })
  const port = await listenOn(t, server)
  return { address: `127.0.0.1:${port}` }
}

function h2Call (port) {
  return within(120000, '64 MiB up and back over HTTP/2', new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`)
    session.on('error', reject)
    const req = session.request({ ':method': 'POST', ':path': '/echo' })
    let status = 0
    req.on('response', headers => { status = headers[':status'] })
    req.on('error', reject)
    readDigest(req, SLOWLY).then(read => {
      session.close()
      resolve({ status, ...read })
    })
    writeBody(req)
  }))
}

function h1Call (port) {
  return within(120000, '64 MiB up and back over HTTP/1.1', new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/echo', agent: false })
    req.on('error', reject)
    req.on('response', res => readDigest(res, SLOWLY).then(read => resolve({ status: res.statusCode, ...read })))
    writeBody(req)
  }))
}

const PAIRINGS = [
  { name: 'HTTP/2 client to an HTTP/2 backend', backend: h2Echo, args: H2, call: h2Call },
  { name: 'HTTP/1.1 client to an HTTP/2 backend', backend: h2Echo, args: H2, call: h1Call },
  { name: 'HTTP/2 client to an HTTP/1.1 backend', backend: h1Echo, args: ['--protocol', 'http'], call: h2Call }
]

for (const { name, backend: start, args, call } of PAIRINGS) {
  t.test(`64 MiB both ways at once, byte for byte, slow readers on both sides: ${name}`, async t => {
    const backend = await start(t)
    const lila = await spawnLila(t, [backend.address, ...args, ...LOCAL])
    const result = await call(lila.port)
    t.equal(result.status, 200)
    t.equal(result.size, SIZE, 'every byte back')
    t.equal(result.digest, SENT, 'the same bytes, in order')
  })
}
