'use strict'

// The backends behind every balancer, one of three kinds answering the same requests
// with the same bodies: small nginx instances (C, sendfile for the 1 MiB body), a Go
// net/http server (peers/go-backend, built here with `go build`: Go's buffered writes,
// a goroutine per connection), or the raw-socket Node server in backend-server.js (the
// only kind that can answer after a fixed delay, for W4). And, for the redis workload,
// redis-server instances; for the gRPC workload, a Go gRPC server (peers/grpc-backend).
// Each backend is its own process so that each counts only what it served: nginx
// through stub_status, Go and Node through their /__count path (the gRPC backend's on
// a second port), redis through INFO stats.

const fs = require('fs')
const path = require('path')
const http = require('http')
const net = require('net')
const crypto = require('crypto')
const procs = require('./procs')

const BIG_BODY_BYTES = 1024 * 1024

// The kinds --backend takes for W1-W3. `go/16k`: the Go backend writing bodies in
// 16 KiB writes (any size in KiB) instead of one.
const KINDS = ['nginx', 'go', 'go/<N>k', 'node']
const GO_KIND = /^go(?:\/(\d+)k)?$/

function isKind (kind) {
  return kind === 'nginx' || kind === 'node' || (GO_KIND.test(kind) && Number(kind.match(GO_KIND)[1] || 1) > 0)
}

// Why backends of `kind` cannot run here (a tool is missing), or null.
function backendMissing (kind) {
  if (kind === 'nginx') return procs.which('nginx') ? null : 'nginx is not installed (apt-get install nginx)'
  if (GO_KIND.test(kind)) return goTool() ? null : 'Go is not installed (https://go.dev/dl/, or apt-get install golang-go)'
  if (kind === 'redis') {
    const missing = ['redis-server', 'redis-benchmark'].filter(t => !procs.which(t))
    return missing.length === 0 ? null : `${missing.join(' and ')} not installed (apt-get install redis-server redis-tools)`
  }
  if (kind === 'grpc') return goTool() ? null : 'Go is not installed (https://go.dev/dl/; the gRPC backend needs Go 1.26 or later)'
  return null
}

// Start `delays.length` backends of `kind` ('nginx' | 'go[/Nk]' | 'node' | 'redis' | 'grpc'),
// pinned to `cpu`. Returns { addresses, counts(), stop() }; counts() resolves with how
// many requests each backend has served so far.
async function startBackends ({ kind, delays, dir, cpu }) {
  const started = []
  const go = kind.match(GO_KIND)
  try {
    const goBinary = go ? await buildGoBackend() : kind === 'grpc' ? await buildGrpcBackend() : null
    const writeSize = go && go[1] ? Number(go[1]) * 1024 : 0
    for (let i = 0; i < delays.length; i++) {
      const name = String.fromCharCode(65 + i) // A, B, ...
      if (kind === 'nginx') started.push(await startNginxBackend({ name, dir, cpu }))
      else if (go) started.push(await startGoBackend({ name, binary: goBinary, writeSize, cpu }))
      else if (kind === 'grpc') started.push(await startGrpcBackend({ name, binary: goBinary, cpu }))
      else if (kind === 'redis') started.push(await startRedisBackend({ name, dir, cpu }))
      else started.push(await startNodeBackend({ name, delay: delays[i], cpu }))
    }
  } catch (err) {
    await Promise.all(started.map(b => b.stop()))
    throw err
  }
  return {
    addresses: started.map(b => `127.0.0.1:${b.port}`),
    // Where they speak HTTP/2 by prior knowledge (h2c): nginx on a port of its own, Go
    // (1.24 and later) and the gRPC backend on the same one; null when they cannot.
    h2Addresses: started.every(b => b.h2Port || b.h2c) ? started.map(b => `127.0.0.1:${b.h2Port || b.port}`) : null,
    counts: () => Promise.all(started.map(b => b.count())),
    stop: () => Promise.all(started.map(b => b.stop()))
  }
}

async function startNodeBackend ({ name, delay, cpu }) {
  const script = path.join(__dirname, 'backend-server.js')
  const handle = await procs.start(['node', script, '--port', '0', '--delay', String(delay), '--name', name], {
    cpu, ready: /backend \w+ listening on 127\.0\.0\.1:(\d+)/
  })
  const port = Number(handle.ready[1])
  return { port, stop: handle.stop, count: async () => Number(await get(port, '/__count')) }
}

// ---- Go: peers/go-backend and peers/grpc-backend, built once per source and Go version

const GO_SOURCE = path.join(__dirname, 'peers', 'go-backend')
const GRPC_SOURCE = path.join(__dirname, 'peers', 'grpc-backend')
const CACHE = path.join(__dirname, '.cache')

// The go command: on PATH, or where the official tarball puts it.
function goTool () {
  return procs.which('go') || procs.which('/usr/local/go/bin/go')
}

// The go-backend binary, built if the cache has none for this source and this Go:
// bench/.cache/go-backend-<hash>. Standard library only; the build is kept offline
// (GOPROXY=off, GOTOOLCHAIN=local), so it needs no network. Resolves with its path.
function buildGoBackend () {
  return buildGo({ source: GO_SOURCE, name: 'go-backend', what: 'the Go backend', offline: true })
}

// The grpc-backend binary (bench/.cache/grpc-backend-<hash>). It requires
// google.golang.org/grpc (go.mod and go.sum pin it), so unless the module cache already
// holds the modules, the build fetches them through the Go module proxy (GOPROXY as the
// environment sets it); Go itself is never downloaded (GOTOOLCHAIN=local). A failed
// build rejects with Go's last lines, and the gRPC workload is skipped with them.
function buildGrpcBackend () {
  return buildGo({ source: GRPC_SOURCE, name: 'grpc-backend', what: 'the Go gRPC backend', offline: false })
}

async function buildGo ({ source, name, what, offline }) {
  const go = goTool()
  if (!go) throw new Error(backendMissing('go'))
  const version = procs.runSync([go, 'version']).out.trim()
  const hash = crypto.createHash('sha256').update(version)
  const sources = fs.readdirSync(source).filter(f => f === 'go.mod' || f === 'go.sum' || f.endsWith('.go')).sort()
  for (const file of sources) hash.update(file).update(fs.readFileSync(path.join(source, file)))
  const binary = path.join(CACHE, `${name}-${hash.digest('hex').slice(0, 12)}`)
  if (fs.existsSync(binary)) return binary
  fs.mkdirSync(CACHE, { recursive: true })
  process.stderr.write(`building ${what} (${version}) into ${path.relative(process.cwd(), binary)}\n`)
  const env = { ...process.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0' }
  // Offline: no module may be fetched (the standard library only); -mod=mod lets a
  // go.mod without a go.sum build. Otherwise Go's defaults: modules from GOPROXY,
  // checked against go.sum.
  if (offline) Object.assign(env, { GOPROXY: 'off', GOFLAGS: '-mod=mod' })
  if (!env.GOCACHE && !env.HOME) env.GOCACHE = path.join(CACHE, 'go-build')
  if (!env.GOMODCACHE && !env.GOPATH && !env.HOME) env.GOMODCACHE = path.join(CACHE, 'go-mod')
  const partial = `${binary}.${process.pid}.tmp`
  const r = procs.runSync([go, 'build', '-trimpath', '-o', partial, '.'], { cwd: source, env, timeout: 600000 })
  if (r.code !== 0) {
    fs.rmSync(partial, { force: true })
    throw new Error(`go build of ${path.relative(__dirname, source)} failed: ${r.error ? r.error.message : procs.tail(r.out)}`)
  }
  fs.renameSync(partial, binary)
  return binary
}

async function startGoBackend ({ name, binary, writeSize, cpu }) {
  const handle = await procs.start([binary, '-port', '0', '-name', name, '-write-size', String(writeSize)], {
    cpu, ready: /backend \w+ listening on 127\.0\.0\.1:(\d+)/
  })
  const port = Number(handle.ready[1])
  // Go 1.24 and later serve h2c on the same port (the ready line says so).
  const h2c = /\(h1, h2c\)/.test(handle.output())
  return { port, h2c, stop: handle.stop, count: async () => Number(await get(port, '/__count')) }
}

// The gRPC backend: gRPC (h2c) on `port`, its call count over HTTP/1.1 on a second port
// that its ready line names.
async function startGrpcBackend ({ name, binary, cpu }) {
  const handle = await procs.start([binary, '-port', '0', '-name', name], {
    cpu, ready: /grpc backend \w+ listening on 127\.0\.0\.1:(\d+) \(count on 127\.0\.0\.1:(\d+)\)/
  })
  const port = Number(handle.ready[1])
  const countPort = Number(handle.ready[2])
  return { port, h2c: true, stop: handle.stop, count: async () => Number(await get(countPort, '/__count')) }
}

// ---- redis-server, for the redis-benchmark workload ---------------------------------

// No persistence (nothing written to disk), 127.0.0.1 only. Counts commands processed
// (INFO stats), less the INFO commands the bench itself sent.
async function startRedisBackend ({ name, dir, cpu }) {
  const server = procs.which('redis-server')
  if (!server) throw new Error(backendMissing('redis'))
  const workdir = path.join(dir, `redis-${name}`)
  fs.mkdirSync(workdir, { recursive: true })
  const { port, stop } = await startOnFreePort(port => procs.start([server, '--port', String(port),
    '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', workdir,
    '--logfile', '', '--maxclients', '10000'], { cpu }))
  let infoRequests = 0
  const count = async () => {
    const text = await redisCommand(port, ['INFO', 'stats'])
    infoRequests++
    const m = text.match(/total_commands_processed:(\d+)/)
    return Number(m[1]) - infoRequests
  }
  return { port, stop, count }
}

// One redis command on a fresh connection; resolves with the reply as text (a bulk or
// simple string; an error reply rejects).
function redisCommand (port, args, { timeoutMs = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    const timer = setTimeout(() => socket.destroy(new Error(`redis ${args[0]} on port ${port}: timed out`)), timeoutMs)
    let reply = ''
    socket.setEncoding('latin1')
    socket.write(`*${args.length}\r\n${args.map(a => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`)
    socket.on('data', chunk => {
      reply += chunk
      const done = text => { clearTimeout(timer); socket.destroy(); resolve(text) }
      if (reply[0] === '+' && reply.endsWith('\r\n')) return done(reply.slice(1, -2))
      if (reply[0] === '-' && reply.endsWith('\r\n')) {
        clearTimeout(timer)
        socket.destroy()
        return reject(new Error(`redis ${args[0]} on port ${port}: ${reply.slice(1, -2)}`))
      }
      if (reply[0] === '$') {
        const nl = reply.indexOf('\r\n')
        const length = nl === -1 ? -1 : Number(reply.slice(1, nl))
        if (nl !== -1 && reply.length >= nl + 2 + length + 2) done(reply.slice(nl + 2, nl + 2 + length))
      }
    })
    socket.on('error', err => { clearTimeout(timer); reject(err) })
  })
}

// ---- nginx --------------------------------------------------------------------------

// One nginx master + one worker per backend. keepalive_requests is raised so that
// keep-alive workloads stay keep-alive (nginx closes after 1000 requests by default).
async function startNginxBackend ({ name, dir, cpu }) {
  const nginx = procs.which('nginx')
  if (!nginx) throw new Error(`${backendMissing('nginx')}, use --backend go or node`)
  const big = path.join(dir, 'big.bin')
  if (!fs.existsSync(big)) fs.writeFileSync(big, Buffer.alloc(BIG_BODY_BYTES, 'x'))
  const prefix = path.join(dir, `backend-${name}`)
  fs.mkdirSync(prefix, { recursive: true })
  // A second port speaks HTTP/2 by prior knowledge (h2c) for the HTTP/2 workload's h2
  // backends: nginx 1.22 serves h2c only on a listen of its own, without HTTP/1.1.
  let h2Port = null
  const { port, stop } = await startOnFreePort(async port => {
    h2Port = await procs.freePort()
    if (h2Port === port) h2Port = await procs.freePort()
    const conf = path.join(prefix, 'nginx.conf')
    fs.writeFileSync(conf, `# generated by lila bench: backend ${name}
worker_processes 1;
daemon off;
pid ${prefix}/nginx.pid;
error_log stderr error;
events { worker_connections 16384; }
http {
  access_log off;
  ${tempPaths(prefix)}
  default_type text/plain;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  sendfile on;
  server {
    listen 127.0.0.1:${port} backlog=4096;
    listen 127.0.0.1:${h2Port} http2 backlog=4096;
    location = / { return 200 "hello"; }
    location = /1m { alias ${big}; }
    location = /__count { stub_status; }
  }
}
`)
    return procs.start([nginx, '-p', prefix, '-c', conf, '-e', 'stderr'], { cpu })
  })
  // stub_status counts every request, its own included: report requests served minus
  // the /__count requests made so far.
  let countRequests = 0
  const count = async () => {
    const text = await get(port, '/__count')
    countRequests++
    const m = text.match(/\n\s*(\d+)\s+(\d+)\s+(\d+)/)
    return Number(m[3]) - countRequests
  }
  return { port, h2Port, stop, count }
}

// For programs that take a fixed port: pick a free one, start, wait until it accepts;
// pick another if some other process took it meanwhile (bounded retries). -> { port,
// pid, stop }
async function startOnFreePort (startOn) {
  for (let attempt = 0; ; attempt++) {
    const port = await procs.freePort()
    const handle = await startOn(port)
    try {
      await waitForPort(port, handle)
      return { port, pid: handle.pid, stop: handle.stop }
    } catch (err) {
      await handle.stop()
      if (attempt < 3 && /in use/i.test(handle.output())) continue
      throw err
    }
  }
}

// nginx creates its temp directories at start-up; keep them in our temp dir rather
// than in /var/lib/nginx, which may not be writable or may not exist.
function tempPaths (prefix) {
  return ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map(kind => `${kind}_temp_path ${prefix}/${kind}_temp;`).join('\n  ')
}

// Resolves once 127.0.0.1:port accepts a connection; rejects if the process exits
// or it takes too long.
async function waitForPort (port, handle, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (handle && handle.exited()) throw new Error(`exited: ${procs.tail(handle.output())}`)
    const ok = await new Promise(resolve => {
      const s = require('net').connect(port, '127.0.0.1')
      s.once('connect', () => { s.destroy(); resolve(true) })
      s.once('error', () => resolve(false))
    })
    if (ok) return
    await procs.sleep(50)
  }
  throw new Error(`port ${port} not open after ${timeoutMs} ms: ${procs.tail(handle ? handle.output() : '')}`)
}

// One GET on a fresh connection; resolves with the body (rejects on non-200).
function get (port, urlPath, { timeoutMs = 5000, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, agent: false, headers, timeout: timeoutMs }, res => {
      let body = ''
      res.setEncoding('latin1')
      res.on('data', chunk => { if (body.length < 65536) body += chunk })
      res.on('end', () => res.statusCode === 200
        ? resolve(body)
        : reject(new Error(`GET ${urlPath} on port ${port}: status ${res.statusCode}`)))
    })
    req.on('timeout', () => req.destroy(new Error(`GET ${urlPath} on port ${port}: timed out`)))
    req.on('error', reject)
  })
}

// One GET over HTTP/2 by prior knowledge (h2c) on a fresh connection; resolves with the
// body (rejects on non-200).
function getH2 (port, urlPath, { timeoutMs = 5000 } = {}) {
  const http2 = require('http2')
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`)
    const fail = err => { session.destroy(); reject(new Error(`h2c GET ${urlPath} on port ${port}: ${err.message}`)) }
    session.setTimeout(timeoutMs, () => fail(new Error('timed out')))
    session.on('error', fail)
    const req = session.request({ ':path': urlPath })
    let status = 0
    let body = ''
    req.setEncoding('latin1')
    req.on('response', headers => { status = headers[':status'] })
    req.on('data', chunk => { if (body.length < 65536) body += chunk })
    req.on('end', () => {
      session.close()
      if (status === 200) resolve(body)
      else reject(new Error(`h2c GET ${urlPath} on port ${port}: status ${status}`))
    })
    req.on('error', fail)
  })
}

// One gRPC unary call of grpc.health.v1.Health/Check (empty request: service "") over
// h2c on a fresh connection, encoded by hand; resolves with the health status (1:
// SERVING), rejects on anything but HTTP 200 with grpc-status 0.
function grpcHealthCheck (port, { timeoutMs = 5000 } = {}) {
  const http2 = require('http2')
  const what = `gRPC Health/Check on port ${port}`
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`)
    const fail = err => { session.destroy(); reject(new Error(`${what}: ${err.message}`)) }
    session.setTimeout(timeoutMs, () => fail(new Error('timed out')))
    session.on('error', fail)
    const req = session.request({
      ':method': 'POST', ':path': '/grpc.health.v1.Health/Check', 'content-type': 'application/grpc', te: 'trailers'
    })
    let status = 0
    let grpcStatus = null
    let grpcMessage = ''
    const chunks = []
    req.on('response', headers => {
      status = headers[':status']
      // A trailers-only answer (an error) carries grpc-status in its headers.
      if (headers['grpc-status'] !== undefined) grpcStatus = headers['grpc-status']
      grpcMessage = headers['grpc-message'] || ''
    })
    req.on('trailers', trailers => {
      grpcStatus = trailers['grpc-status']
      grpcMessage = trailers['grpc-message'] || ''
    })
    req.on('data', chunk => { if (chunks.length < 16) chunks.push(chunk) })
    req.on('end', () => {
      session.close()
      if (status !== 200) return reject(new Error(`${what}: HTTP status ${status}`))
      if (String(grpcStatus) !== '0') return reject(new Error(`${what}: grpc-status ${grpcStatus} ${grpcMessage}`.trim()))
      // One message: flag byte, 4-byte length, then HealthCheckResponse (field 1,
      // varint: 0x08 STATUS; absent when 0, UNKNOWN).
      const body = Buffer.concat(chunks)
      const message = body.subarray(5, 5 + (body.length >= 5 ? body.readUInt32BE(1) : 0))
      resolve(message.length >= 2 && message[0] === 0x08 ? message[1] : 0)
    })
    req.on('error', fail)
    req.end(Buffer.alloc(5)) // uncompressed, length 0: an empty HealthCheckRequest
  })
}

module.exports = {
  KINDS,
  isKind,
  backendMissing,
  goTool,
  startBackends,
  startOnFreePort,
  get,
  getH2,
  grpcHealthCheck,
  redisCommand,
  tempPaths
}
