#!/usr/bin/env node
'use strict'

// Rules at the edge, measured: what --compress costs and gains at each level, against
// nginx's `gzip on` and Caddy's `encode`, and what a password costs (bcrypt, checked
// once) against the credentials remembered after it.
//
//   node --expose-gc bench/edge.js [--seconds N] [--out FILE]
//                             (default 3 s a cell, written to bench/RESULTS-edge.md)
//
// Compression, three ways over the same bodies (the tree's own: the status page as
// HTML, package-lock.json, the ./lila bundle as JavaScript, the README and docs as
// text):
//   lila's compressor (proxy/edge/compressor.js) in this process, each level: CPU per
//     MiB of body (process.cpuUsage) and the ratio, the body written in 64 KiB pieces
//     each flushed as the proxy does; and the memory a stream holds
//   nginx (gzip on, its default level 1, and gzip_comp_level 5) and Caddy (encode gzip)
//     in front of the same Node backend: the peer's CPU per MiB (utime+stime from /proc)
//     with Accept-Encoding: gzip less the same without, so that only what compressing
//     adds is counted, and the ratio its answers show
// lila's first row is the compressor's own cost, measured in this process; its second,
// lila --compress end to end, measured as the peers are.
//
// The machine is shared: quote the ratios between rows, not the absolute numbers.

const fs = require('fs')
const os = require('os')
const path = require('path')
const http = require('http')
const crypto = require('crypto')
const { performance } = require('perf_hooks')
const procs = require('./procs')
const { treeCpuMicros } = require('./cpu')
const { Compressor } = require('../lib/proxy/edge/compressor')
const { parsePasswords } = require('../lib/proxy/edge/passwords')
const { BasicAuth } = require('../lib/proxy/edge/basic-auth')
const { formatBcrypt, bcryptDigest } = require('../lib/proxy/edge/bcrypt')

const ROOT = path.join(__dirname, '..')
const args = process.argv.slice(2)
const option = (name, fallback) => {
  const i = args.indexOf(name)
  return i === -1 ? fallback : args[i + 1]
}
const SECONDS = Number(option('--seconds', '3'))
const OUT = option('--out', path.join(__dirname, 'RESULTS-edge.md'))
const MiB = 1024 * 1024

// The bodies: [name, content-type, Buffer].
function corpora () {
  const { renderPage } = require('../lib/admin/status-page')
  const backend = i => ({
    address: `10.0.${i >> 8}.${i & 255}:8080`, status: i % 7 ? 'up' : 'down', reason: i % 7 ? null : 'connect refused', weight: 1, effectiveWeight: 1, live: i % 5, total: 1000 + i * 37, failures: i % 3, bytesIn: i * 12345, bytesOut: i * 67890, latency: 1.5, responses: { '2xx': 900 + i, '5xx': i % 4 }, ejections: {}, faultsInjected: {}, responseTime: { count: 0, sum: 0, bounds: [], counts: [] }, p50: 1.2, p99: 8.5
  })
  const listener = n => ({ name: `web-${n}`, protocol: 'http', mode: 'round-robin', active: 3, waiting: 0, queued: 0, accepted: 12345, unserved: 0, queueTimeouts: 0, retries: { 502: 3 }, limited: {}, backends: Array.from({ length: 60 }, (_, i) => backend(i + n * 60)), routes: [] })
  const snapshot = { startedAt: 0, listeners: [listener(0), listener(1), listener(2)] }
  const html = Buffer.from(renderPage(snapshot, { now: 1e12 }))
  const docs = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).map(f => path.join('docs', f))]
  const text = Buffer.concat(docs.map(f => fs.readFileSync(path.join(ROOT, f))))
  return [
    ['html', 'text/html; charset=utf-8', html],
    ['json', 'application/json', fs.readFileSync(path.join(ROOT, 'package-lock.json'))],
    ['js', 'application/javascript', fs.readFileSync(path.join(ROOT, 'lila'))],
    ['text', 'text/plain; charset=utf-8', text]
  ]
}

const CANDIDATES = [
  ['gzip', 1], ['gzip', 3], ['gzip', 4], ['gzip', 5], ['gzip', 6], ['gzip', 9],
  ['br', 1], ['br', 2], ['br', 3], ['br', 4], ['br', 5], ['br', 6]
]
const levelsOf = (encoding, level) => encoding === 'gzip'
  ? { gzip: { level }, br: null }
  : { gzip: null, br: { quality: level, window: 18 } }

// One body through a Compressor, in 64 KiB writes each flushed before the next (as
// bodies arrive from a backend read by read): resolves with the compressed size.
function compressOnce (encoding, levels, body) {
  return new Promise((resolve, reject) => {
    let out = 0
    const noStats = { compressed () {} }
    const c = new Compressor(encoding, {
      data: chunk => { out += chunk.length; return true },
      drain: () => {},
      end: () => resolve(out),
      error: reject
    }, noStats, levels)
    let at = 0
    const next = () => {
      if (at >= body.length) return c.end()
      c.write(body.subarray(at, at + 65536))
      at += 65536
      setImmediate(next) // the flush of this write runs first
    }
    next()
  })
}

async function measureLevel (encoding, level, bodies) {
  const levels = levelsOf(encoding, level)
  let bytesIn = 0
  let bytesOut = 0
  const ratios = {}
  for (const [name, , body] of bodies) {
    const size = await compressOnce(encoding, levels, body)
    ratios[name] = size / body.length
  }
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  while (performance.now() - t0 < SECONDS * 1000) {
    for (const [, , body] of bodies) {
      const size = await compressOnce(encoding, levels, body)
      bytesOut += size
      bytesIn += body.length
    }
  }
  const cpu = process.cpuUsage(cpu0)
  const cpuMsPerMiB = (cpu.user + cpu.system) / 1000 / (bytesIn / MiB)
  return { encoding, level, cpuMsPerMiB, ratio: bytesOut / bytesIn, ratios }
}

// Memory a stream holds while open: N compressors, each given a 64 KiB body and left
// open, measured as resident plus external memory.
async function memoryPerStream (encoding, level, body) {
  const N = 200
  if (global.gc) global.gc() // node --expose-gc: steadier figures
  const before = process.memoryUsage().rss
  const open = []
  for (let i = 0; i < N; i++) {
    let compressed
    const out = new Promise(resolve => { compressed = resolve })
    const sink = { data: () => { compressed(); return true }, drain () {}, end () {}, error () {} }
    const c = new Compressor(encoding, sink, { compressed () {} }, levelsOf(encoding, level))
    c.write(body.subarray(i * 1024, i * 1024 + 65536)) // flushed at the end of this turn
    await out
    open.push(c)
  }
  if (global.gc) global.gc()
  const after = process.memoryUsage().rss
  for (const c of open) c.destroy()
  return Math.max(0, (after - before) / N)
}

// ---- peers ----

async function startBackend (bodies) {
  const byPath = new Map(bodies.map(([name, type, body]) => [`/${name}`, [type, body]]))
  const server = http.createServer((req, res) => {
    const [type, body] = byPath.get(req.url) || ['text/plain', Buffer.from('none')]
    res.writeHead(200, { 'content-type': type, 'content-length': body.length })
    res.end(body)
  })
  await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
  return server
}

const GZIP_TYPES = 'application/json application/javascript text/plain text/css'

async function startNginx (dir, backendPort, level) {
  const nginx = procs.which('nginx')
  if (nginx === null) return { missing: 'nginx is not installed' }
  const prefix = path.join(dir, `nginx-${level}`)
  fs.mkdirSync(prefix, { recursive: true })
  const port = await procs.freePort()
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(k => `${k}_temp_path ${prefix}/${k}_temp;`).join('\n  ')
  const conf = path.join(prefix, 'nginx.conf')
  fs.writeFileSync(conf, `worker_processes 1;
daemon off;
pid ${prefix}/nginx.pid;
error_log stderr error;
events { worker_connections 1024; }
http {
  access_log off;
  ${temp}
  upstream be { server 127.0.0.1:${backendPort}; keepalive 16; }
  gzip on;
  gzip_comp_level ${level};
  gzip_types ${GZIP_TYPES};
  gzip_min_length 1024;
  gzip_proxied any;
  server {
    listen 127.0.0.1:${port};
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`)
  const handle = await procs.start([nginx, '-p', prefix, '-c', conf, '-e', 'stderr'], {})
  await waitFor(port)
  return { name: `nginx gzip_comp_level ${level}${level === 1 ? ' (its default)' : ''}`, port, handle }
}

async function startCaddy (dir, backendPort) {
  const caddy = procs.which('caddy')
  if (caddy === null) return { missing: 'caddy is not installed' }
  const port = await procs.freePort()
  const file = path.join(dir, 'Caddyfile')
  fs.writeFileSync(file, `{
  admin off
  auto_https off
}
http://127.0.0.1:${port} {
  encode gzip
  reverse_proxy 127.0.0.1:${backendPort}
}
`)
  const handle = await procs.start([caddy, 'run', '--config', file, '--adapter', 'caddyfile'], { env: { ...process.env, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir } })
  await waitFor(port)
  return { name: 'Caddy encode gzip (its default level)', port, handle }
}

// lila itself, end to end: --compress (gzip first) in front of the same backend.
async function startLila (dir, backendPort) {
  const port = await procs.freePort()
  const argv = [...procs.lilaArgv(path.join(ROOT, 'lila')), `127.0.0.1:${backendPort}`, '--protocol', 'http',
    '--host', '127.0.0.1', '--port', String(port), '--check', 'none', '--compress', '--log-level', 'warn']
  const handle = await procs.start(argv, {})
  await waitFor(port)
  return { name: 'lila --compress (gzip, end to end)', port, handle }
}

async function waitFor (port) {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise(resolve => {
      const s = require('net').connect(port, '127.0.0.1')
      s.once('connect', () => { s.destroy(); resolve(true) })
      s.once('error', () => resolve(false))
    })
    if (ok) return
    await procs.sleep(50)
  }
  throw new Error(`port ${port} never opened`)
}

// Requests for SECONDS, 4 at a time, cycling through the bodies: the peer's CPU per
// MiB of body and the bytes that came back.
async function load (peer, bodies, acceptEncoding) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })
  let bytesIn = 0
  let bytesOut = 0
  const cpu0 = treeCpuMicros(peer.handle.pid)
  const deadline = performance.now() + SECONDS * 1000
  const worker = async offset => {
    for (let i = offset; performance.now() < deadline; i++) {
      const [name, , body] = bodies[i % bodies.length]
      // (not `bytesOut += await ...`: that reads bytesOut before the wait, and the four
      // workers would overwrite each other's counts)
      const received = await new Promise((resolve, reject) => {
        http.get({ host: '127.0.0.1', port: peer.port, path: `/${name}`, agent, headers: { 'accept-encoding': acceptEncoding } }, res => {
          let n = 0
          res.on('data', chunk => { n += chunk.length })
          res.on('end', () => resolve(n))
        }).on('error', reject)
      })
      bytesOut += received
      bytesIn += body.length
    }
  }
  await Promise.all([0, 1, 2, 3].map(worker))
  const cpu = treeCpuMicros(peer.handle.pid) - cpu0
  agent.destroy()
  return { cpuMsPerMiB: cpu / 1000 / (bytesIn / MiB), ratio: bytesOut / bytesIn }
}

// ---- passwords ----

async function passwords () {
  const rows = []
  for (const cost of [5, 10]) {
    const salt = crypto.randomBytes(16)
    const file = parsePasswords(`alice:${formatBcrypt(cost, salt, bcryptDigest('pw', salt, cost))}\n`, 'bench')
    const tries = cost === 5 ? 40 : 5
    const t0 = process.cpuUsage()
    for (let i = 0; i < tries; i++) await file.verify('alice', 'pw')
    const first = process.cpuUsage(t0)
    const auth = new BasicAuth(file, { realm: 'bench' })
    const header = `Basic ${Buffer.from('alice:pw').toString('base64')}`
    await auth.check(header)
    const n = 200000
    const t1 = process.cpuUsage()
    for (let i = 0; i < n; i++) auth.check(header)
    const cached = process.cpuUsage(t1)
    const firstUs = (first.user + first.system) / tries
    const cachedUs = (cached.user + cached.system) / n
    rows.push({ cost, firstUs, cachedUs })
  }
  return rows
}

async function main () {
  procs.installCleanup()
  const bodies = corpora()
  const lines = []
  const say = line => { console.log(line); lines.push(line) }
  say('# Rules at the edge: compression and passwords')
  say('')
  say(`${new Date().toISOString().slice(0, 10)} · Node ${process.version} · ${os.cpus()[0].model} × ${os.cpus().length} · load ${os.loadavg().map(n => n.toFixed(1)).join(' ')} · ${SECONDS} s a cell`)
  say('')
  say(`Bodies: ${bodies.map(([name, , body]) => `${name} ${(body.length / 1024).toFixed(0)} KiB`).join(', ')} (the tree's own: \`node bench/edge.js\`).`)
  say('')
  say('## lila\'s compressor, each level')
  say('')
  say('| coding | level | CPU ms per MiB | ratio (out/in) | html | json | js | text |')
  say('|---|---|---|---|---|---|---|---|')
  const measured = []
  for (const [encoding, level] of CANDIDATES) {
    const m = await measureLevel(encoding, level, bodies)
    measured.push(m)
    const r = x => x.toFixed(3)
    say(`| ${encoding} | ${level} | ${m.cpuMsPerMiB.toFixed(1)} | ${r(m.ratio)} | ${r(m.ratios.html)} | ${r(m.ratios.json)} | ${r(m.ratios.js)} | ${r(m.ratios.text)} |`)
  }
  say('')
  const { LEVELS } = require('../lib/proxy/edge/compressor')
  const chosen = [['gzip', LEVELS.gzip.level], ['br', LEVELS.br.quality]]
  const memory = []
  for (const [e, l] of chosen) memory.push(`${e} ${l}: ${((await memoryPerStream(e, l, bodies[2][2])) / 1024).toFixed(0)} KiB`)
  say(`Memory a stream holds, the chosen levels (resident, 200 streams open, 64 KiB into each): ${memory.join(', ')}`)
  say('')

  say('## Against nginx and Caddy (gzip), compression\'s own CPU')
  say('')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-bench-edge-'))
  const backend = await startBackend(bodies)
  const peers = []
  const backendPort = backend.address().port
  const starts = [
    () => startLila(dir, backendPort),
    () => startNginx(dir, backendPort, 1), () => startNginx(dir, backendPort, 5), () => startCaddy(dir, backendPort)
  ]
  for (const start of starts) {
    try {
      const peer = await start()
      if (peer.missing) say(`Not measured: ${peer.missing}`)
      else peers.push(peer)
    } catch (err) {
      say(`Not measured: ${err.message}`)
    }
  }
  const lilaGzip = measured.find(m => m.encoding === 'gzip' && m.level === LEVELS.gzip.level)
  say('')
  say(`| who | CPU ms per MiB compressed | ratio (out/in) | CPU ÷ lila gzip ${LEVELS.gzip.level} | ratio ÷ lila gzip ${LEVELS.gzip.level} |`)
  say('|---|---|---|---|---|')
  say(`| lila gzip ${LEVELS.gzip.level} (the compressor alone) | ${lilaGzip.cpuMsPerMiB.toFixed(1)} | ${lilaGzip.ratio.toFixed(3)} | 1.00 | 1.00 |`)
  for (const peer of peers) {
    const plain = await load(peer, bodies, 'identity')
    const gzip = await load(peer, bodies, 'gzip')
    const cost = gzip.cpuMsPerMiB - plain.cpuMsPerMiB
    say(`| ${peer.name} | ${cost.toFixed(1)} | ${gzip.ratio.toFixed(3)} | ${(cost / lilaGzip.cpuMsPerMiB).toFixed(2)} | ${(gzip.ratio / lilaGzip.ratio).toFixed(2)} |`)
    await peer.handle.stop()
  }
  backend.close()
  fs.rmSync(dir, { recursive: true, force: true })
  say('')

  say('## Passwords: a bcrypt check, and the credentials remembered after it')
  say('')
  say('| htpasswd -B -C | first check (µs CPU) | remembered (µs CPU) | ratio |')
  say('|---|---|---|---|')
  for (const row of await passwords()) {
    say(`| ${row.cost} | ${row.firstUs.toFixed(0)} | ${row.cachedUs.toFixed(2)} | ${(row.firstUs / row.cachedUs).toFixed(0)}× |`)
  }
  fs.writeFileSync(OUT, lines.join('\n') + '\n')
  console.log(`\nwritten to ${path.relative(process.cwd(), OUT)}`)
  procs.killAll()
}

main().catch(err => {
  console.error(err)
  procs.killAll()
  process.exit(1)
})
