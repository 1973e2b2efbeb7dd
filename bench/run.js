#!/usr/bin/env node
'use strict'

// The benchmark runner: every workload against every contender, one at a time.
//
//   node bench/run.js [--quick] [--only W1,W3,H1,G1,R1] [--contenders lila-tcp,haproxy-tcp]
//                     [--lila PATH] [--backend nginx|go|node[,...]] [--loadgen wrk|node]
//                     [--seconds N] [--warmup N] [--repeat N] [--out FILE] [--no-probes]
//
// Each cell: start the contender pinned to CPU 0, check it with one request, warm up,
// measure (CPU time of its process tree before and after, requests per backend before
// and after), stop it. Results go to stdout and to bench/RESULTS.md (a filtered run
// writes only when --out is given, so quick iterations do not clobber the full table).
// The section of bench/RESULTS.md that bench/nodes.js writes (NODES_START to its end)
// is kept when the table is written again.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { parseArgs } = require('util')
const procs = require('./procs')
const { KINDS, isKind, backendMissing, startBackends, get, getH2, grpcHealthCheck, redisCommand } = require('./backends')
const { runLoad, runH2load, runGhz, ghzPath, runRedisBenchmark } = require('./loadgen')
const { treeCpuMicros, cpuJiffies, busyPercent } = require('./cpu')
const { allContenders } = require('./contenders')
const { markdown } = require('./report')

const LB_CPU = 0 // the balancer under test
const LOAD_CPU = 1 // load generator and backends

// `modes`: the balance modes compared; `delays`: per-backend response delay in ms;
// `backend`: a fixed kind of backend (else the run's --backend, one row set per kind);
// `layers`: the contenders' layers that can carry it (else all); `h2`: HTTP/2 clients
// (h2load, `streams` in flight per connection), once per protocol to the backends in
// `backendProtocols`; `grpc`: gRPC unary calls (ghz, `concurrency` calls in flight over
// `connections` connections) to gRPC backends, which speak h2c.
const WORKLOADS = [
  { id: 'W1', title: 'keep-alive, 5-byte body, 50 connections', path: '/', connections: 50, close: false, modes: ['rr'], delays: [0, 0] },
  { id: 'W2', title: 'new connection per request (Connection: close), 5-byte body, 50 connections', path: '/', connections: 50, close: true, modes: ['rr'], delays: [0, 0] },
  { id: 'W3', title: '1 MiB bodies, keep-alive, 8 connections', path: '/1m', connections: 8, close: false, modes: ['rr'], delays: [0, 0] },
  { id: 'W4', title: 'backend A answers in 20 ms, B in 2 ms; keep-alive, 50 connections; round-robin vs least-connections', path: '/', connections: 50, close: false, modes: ['rr', 'lc'], delays: [20, 2] },
  { id: 'W4c', title: 'backend A answers in 20 ms, B in 2 ms; new connection per request, 50 connections; round-robin vs least-connections', path: '/', connections: 50, close: true, modes: ['rr', 'lc'], delays: [20, 2] },
  { id: 'W1h2', title: 'HTTP/1.1 clients to h2c backends: keep-alive, 5-byte body, 50 connections', path: '/', connections: 50, close: false, backendProtocols: ['h2'], modes: ['rr'], delays: [0, 0], layers: ['http'] },
  { id: 'H1', title: 'HTTP/2 clients (h2c by prior knowledge), 5-byte body, h2load: 10 connections × 10 streams', path: '/', connections: 10, streams: 10, h2: true, backendProtocols: ['h1', 'h2'], modes: ['rr'], delays: [0, 0], layers: ['none', 'http'] },
  { id: 'G1', title: 'gRPC unary calls (grpc.health.v1.Health/Check), ghz: 50 concurrent calls over 10 connections', connections: 10, concurrency: 50, grpc: true, backendProtocols: ['h2'], modes: ['rr'], delays: [0, 0], backend: 'grpc', layers: ['none', 'http'] },
  { id: 'P1', title: 'POST, 4 KiB request bodies, keep-alive, 50 connections', path: '/', connections: 50, close: false, post: 4096, modes: ['rr'], delays: [0, 0], layers: ['none', 'http'] },
  { id: 'P2', title: 'POST, 256 KiB request bodies, keep-alive, 8 connections', path: '/', connections: 8, close: false, post: 262144, modes: ['rr'], delays: [0, 0], layers: ['none', 'http'] },
  { id: 'P1h2', title: 'POST from HTTP/2 clients (h2c), 4 KiB request bodies, h2load: 10 connections × 10 streams', path: '/', connections: 10, streams: 10, h2: true, post: 4096, backendProtocols: ['h1'], modes: ['rr'], delays: [0, 0], layers: ['none', 'http'] },
  { id: 'P2h2', title: 'POST from HTTP/2 clients (h2c), 256 KiB request bodies, h2load: 8 connections × 1 stream', path: '/', connections: 8, streams: 1, h2: true, post: 262144, backendProtocols: ['h1'], modes: ['rr'], delays: [0, 0], layers: ['none', 'http'] },
  { id: 'R1', title: 'redis-benchmark -t get,set -c 50 -P 1 through the tcp balancers, two redis-servers', connections: 50, modes: ['rr'], delays: [0, 0], backend: 'redis', layers: ['none', 'tcp'] }
]
// W4 and W4c need backends that wait before answering: only the Node one can.
for (const w of WORKLOADS) if (!w.backend && w.delays.some(d => d > 0)) w.backend = 'node'

function parseOptions (argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      contenders: { type: 'string' },
      lila: { type: 'string', default: path.join(__dirname, '..', 'lila') },
      backend: { type: 'string' },
      loadgen: { type: 'string' },
      seconds: { type: 'string' },
      warmup: { type: 'string' },
      repeat: { type: 'string', default: '1' },
      out: { type: 'string' },
      'no-probes': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false }
    }
  })
  const list = text => text ? text.split(',').map(s => s.trim()).filter(Boolean) : null
  return {
    quick: values.quick,
    label: values.quick ? 'quick' : values.seconds || values.warmup ? 'custom' : 'full',
    only: list(values.only),
    contenders: list(values.contenders),
    lilaPath: path.resolve(values.lila),
    backends: list(values.backend),
    loadgen: values.loadgen || null,
    seconds: Number(values.seconds || (values.quick ? 3 : 10)),
    warmup: Number(values.warmup || (values.quick ? 1 : 3)),
    repeat: Math.max(1, Math.min(10, Number(values.repeat) || 1)),
    out: values.out || null,
    probes: !values['no-probes'],
    help: values.help
  }
}

async function main () {
  const opts = parseOptions(process.argv.slice(2))
  if (opts.help) {
    process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(3, 8).map(l => l.slice(3)).join('\n') + '\n')
    return
  }
  procs.installCleanup()
  // 0755: nginx workers run as another user when started by root and must read big.bin.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-bench-'))
  fs.chmodSync(dir, 0o755)
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))

  const notes = []
  const contenders = pickContenders(opts)
  const loadgen = opts.loadgen || (procs.which('wrk') ? 'wrk' : 'node')
  if (loadgen === 'node' && !opts.loadgen) notes.push('wrk is not installed (apt-get install wrk): the Node load generator (loadgen.js) was used; it saturates sooner, so req/s are lower than with wrk')
  const backendKinds = opts.backends || [procs.which('nginx') ? 'nginx' : 'node']
  const unknownKinds = backendKinds.filter(k => !isKind(k))
  if (unknownKinds.length > 0) usage(`unknown backend ${unknownKinds.join(', ')}; expected some of ${KINDS.join(', ')}`)
  if (backendKinds[0] === 'node' && !opts.backends) notes.push('nginx is not installed: the Node backends (backend-server.js) were used for every workload')
  if (!procs.which('taskset')) notes.push('taskset is not installed (util-linux): nothing was pinned to a CPU')
  const workloads = pickWorkloads(opts, backendKinds)
  for (const w of workloads) {
    if (w.backend === 'node' && w.delays.some(d => d > 0)) {
      notes.push(`${w.id}: the delayed backends are always the Node backends (backend-server.js), as nginx and the Go backend do not wait before answering`)
    }
  }

  notes.push('Peers run with the configs generated in contenders.js: HAProxy `nbthread 1`, defaults otherwise ' +
    '(16 KiB buffers, no splicing), `http-reuse always` in http mode; nginx `worker_processes 1`, upstream ' +
    'keepalive 128 in http mode; Caddy `reverse_proxy` (GOMAXPROCS=1, 128 idle connections per backend, h2c where ' +
    'the workload needs it); http-proxy with a keep-alive agent. The L7 peers add X-Forwarded-For/-Proto/-Host as lila http does.')
  notes.push('share A/B: requests each backend served in the measured interval. Through a tcp balancer with keep-alive ' +
    '(W1, W3, W4) backends are chosen per connection, not per request, so W4 shows the slow backend\'s connections ' +
    'serving fewer requests whatever the mode.')

  const cells = []
  const started = Date.now()
  const loadBefore = os.loadavg()[0]
  for (const w of workloads) {
    // The backend hit directly has nothing to balance in W4; R1 goes through tcp only.
    // HTTP/2 (H1): each http contender once per protocol to the backends; the backend
    // hit directly only in h2 (the client's own protocol).
    const runs = w.modes.flatMap(mode => (w.backendProtocols || [undefined]).flatMap(backendProtocol => contenders
      .filter(c => !(c.name === 'direct' && w.modes.length > 1) && (!w.layers || w.layers.includes(c.layer)))
      .filter(c => !(c.name === 'direct' && backendProtocol === 'h1'))
      .filter(c => !c.h2Only || w.h2 || w.grpc)
      .map(c => ({ mode, backendProtocol, contender: c }))))
    // Backends that cannot run here skip the workload, saying why.
    let backends = null
    let skipped = backendMissing(w.backend)
    if (skipped === null && w.h2 && !procs.which('h2load')) skipped = 'h2load is not installed (apt-get install nghttp2-client)'
    if (skipped === null && w.grpc && !ghzPath()) skipped = 'ghz is not installed (GOBIN=$PWD/.tools go install github.com/bojand/ghz/cmd/ghz@latest)'
    if (skipped === null) {
      try {
        backends = await startBackends({ kind: w.backend, delays: w.delays, dir, cpu: LOAD_CPU })
      } catch (err) {
        skipped = `${w.backend} backends did not start: ${oneLine(err.message)}`
      }
    }
    if (skipped !== null) {
      for (const { mode, backendProtocol, contender } of runs) {
        const cell = { workload: w.id, contender: contender.name, mode, backendProtocol, status: 'skipped', reason: skipped }
        cells.push(cell)
        progress(cell)
      }
      continue
    }
    try {
      for (const { mode, backendProtocol, contender } of runs) {
        const cell = await measureCell({ w, mode, backendProtocol, contender, backends, dir, opts, loadgen })
        cells.push(cell)
        progress(cell)
        await procs.sleep(200) // let the last connections close before the next cell
      }
    } finally {
      await backends.stop()
    }
  }

  let probes = null
  if (opts.probes && (!opts.contenders || opts.contenders.some(n => n.startsWith('lila')))) {
    process.stderr.write('probes: memory per connection and start-up time\n')
    probes = await require('./memory').probe({ lilaPath: opts.lilaPath, count: 10000 })
  }

  const meta = describeMachine(opts, { loadgen, workloads, seconds: (Date.now() - started) / 1000 })
  meta.loadAverage = `${loadBefore.toFixed(2)} before the run, ${os.loadavg()[0].toFixed(2)} after (1-minute load average; the bench itself keeps about 2 busy)`
  const text = markdown({ meta, workloads, cells, notes, probes })
  process.stdout.write(`\n${text}\n`)
  const filtered = opts.only || opts.contenders
  const out = opts.out || (filtered ? null : path.join(__dirname, 'RESULTS.md'))
  if (out) {
    fs.writeFileSync(out, text + '\n' + keptSection(out))
    process.stderr.write(`written to ${out}\n`)
  }
}

// One contender, one workload, one balance mode.
async function measureCell ({ w, mode, backendProtocol, contender, backends, dir, opts, loadgen }) {
  const cell = { workload: w.id, contender: contender.name, mode, backendProtocol, status: 'ok' }
  const missing = contender.missing() ||
    (w.h2 || w.grpc || backendProtocol === 'h2'
      ? contender.cannotH2({ backendProtocol, grpc: Boolean(w.grpc), h2: Boolean(w.h2 || w.grpc) })
      : null)
  if (missing) return { ...cell, status: 'skipped', reason: missing }
  const addresses = backendProtocol === 'h2' ? backends.h2Addresses : backends.addresses
  if (!addresses) return { ...cell, status: 'skipped', reason: `${w.backend} backends do not speak h2c (the Node backend never; Go before 1.24)` }
  let lb
  try {
    lb = await contender.start({
      backends: addresses, mode, dir, cpu: LB_CPU, h2: Boolean(w.h2 || w.grpc), grpc: Boolean(w.grpc), backendProtocol
    })
  } catch (err) {
    return { ...cell, status: 'skipped', reason: `did not start: ${oneLine(err.message)}` }
  }
  try {
    let load
    if (w.backend === 'redis') {
      // One command must go through before anything is measured; then a warm-up that
      // also tells how many requests fill the interval (redis-benchmark counts requests,
      // not seconds).
      if (await redisCommand(lb.port, ['PING']) !== 'PONG') throw new Error('PING through the balancer: no PONG')
      const params = { port: lb.port, connections: w.connections, cpu: LOAD_CPU }
      const warm = await runRedisBenchmark({ ...params, requests: 5000 * Math.max(1, opts.warmup), timeoutMs: 60000 })
      // Two commands: each gets half the interval.
      const requests = Math.max(10000, Math.min(5e6, Math.round(warm.rps * opts.seconds / 2 / 1000) * 1000))
      const timeoutMs = (opts.seconds * 5 + 30) * 1000
      load = { run: () => runRedisBenchmark({ ...params, requests, timeoutMs }) }
    } else if (w.grpc) {
      // One call must go through (grpc-status 0) before anything is measured.
      await grpcHealthCheck(lb.port)
      const params = { port: lb.port, connections: w.connections, concurrency: w.concurrency, cpu: LOAD_CPU, dir }
      if (opts.warmup > 0) await runGhz({ ...params, seconds: opts.warmup })
      load = { run: () => runGhz({ ...params, seconds: opts.seconds }) }
    } else if (w.h2) {
      await getH2(lb.port, w.path)
      const params = {
        port: lb.port, urlPath: w.path, connections: w.connections, streams: w.streams, cpu: LOAD_CPU, dir
      }
      params.post = w.post || 0
      if (opts.warmup > 0) await runH2load({ ...params, seconds: opts.warmup })
      load = { run: () => runH2load({ ...params, seconds: opts.seconds }) }
    } else {
      await get(lb.port, w.path) // one request must go through before anything is measured
      const params = {
        tool: loadgen, port: lb.port, urlPath: w.path, connections: w.connections, close: w.close, cpu: LOAD_CPU, dir
      }
      params.post = w.post || 0
      if (opts.warmup > 0) await runLoad({ ...params, seconds: opts.warmup })
      load = { run: () => runLoad({ ...params, seconds: opts.seconds }) }
    }
    // With --repeat, keep the interval in which other processes disturbed the
    // balancer's core least: the closest to the balancer having CPU 0 to itself.
    let best = null
    for (let i = 0; i < opts.repeat; i++) {
      const m = await measureInterval({ lb, load, backends })
      if (best === null || (m.otherLbCpuPct ?? 0) < (best.otherLbCpuPct ?? 0)) best = m
    }
    return { ...cell, ...best, repeats: opts.repeat }
  } catch (err) {
    return { ...cell, status: 'failed', reason: oneLine(err.message) }
  } finally {
    await lb.stop()
  }
}

// One measured interval: load, and around it the balancer tree's CPU time, per-CPU busy
// time and the backends' request counters.
async function measureInterval ({ lb, load, backends }) {
  const before = await backends.counts()
  const cpuBefore = lb.pid === null ? null : treeCpuMicros(lb.pid)
  const jiffiesBefore = cpuJiffies()
  const t0 = process.hrtime.bigint()
  const r = await load.run()
  const wallMicros = Number(process.hrtime.bigint() - t0) / 1000
  const cpuAfter = lb.pid === null ? null : treeCpuMicros(lb.pid)
  const jiffiesAfter = cpuJiffies()
  const after = await backends.counts()

  const served = after.map((n, i) => n - before[i])
  const total = served.reduce((a, b) => a + b, 0)
  const cpuMicros = cpuBefore === null ? null : cpuAfter - cpuBefore
  return {
    tool: r.tool,
    tests: r.tests, // redis-benchmark: req/s per command
    requests: r.requests,
    rps: r.rps,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    errors: r.non2xx + r.socketErrors,
    shares: served.map(n => total === 0 ? 0 : n / total),
    loadCpuPct: busyPercent(jiffiesBefore, jiffiesAfter, LOAD_CPU),
    // CPU 0 busy with anything but the balancer: other jobs on a shared machine.
    otherLbCpuPct: cpuMicros === null
      ? null
      : Math.max(0, busyPercent(jiffiesBefore, jiffiesAfter, LB_CPU) - 100 * cpuMicros / wallMicros),
    lbCpuPct: cpuMicros === null ? null : 100 * cpuMicros / wallMicros,
    lbCpuUsPerReq: cpuMicros === null || r.requests === 0 ? null : cpuMicros / r.requests
  }
}

function progress (c) {
  const what = `${c.workload} ${c.contender} ${c.mode}${c.backendProtocol ? ` to ${c.backendProtocol}` : ''}`
  if (c.status !== 'ok') return process.stderr.write(`${what}: ${c.status}: ${c.reason}\n`)
  const cpu = c.lbCpuUsPerReq == null ? '' : `, LB ${c.lbCpuUsPerReq.toFixed(1)} µs/req (${Math.round(c.lbCpuPct)}% CPU)`
  process.stderr.write(`${what}: ${Math.round(c.rps)} req/s, p99 ${c.p99Ms.toFixed(2)} ms, ${c.errors} errors${cpu}\n`)
}

// What bench/nodes.js wrote at the end of `file`, from its heading on ('' if none).
const NODES_START = '## Node versions'
function keptSection (file) {
  let old = ''
  try { old = fs.readFileSync(file, 'utf8') } catch {}
  const at = old.indexOf(`\n${NODES_START}\n`)
  return at === -1 ? '' : old.slice(at)
}

function oneLine (text) {
  return String(text).split('\n').filter(Boolean).join(' | ').slice(0, 300)
}

function pickContenders (opts) {
  const all = allContenders({ lilaPath: opts.lilaPath })
  if (!opts.contenders) return all
  const unknown = opts.contenders.filter(n => !all.some(c => c.name === n))
  if (unknown.length > 0) usage(`unknown contender ${unknown.join(', ')}; expected some of ${all.map(c => c.name).join(', ')}`)
  return all.filter(c => opts.contenders.includes(c.name))
}

// The workloads asked for, those without a fixed backend once per backend kind: with
// one kind their ids stay W1..W3, with several each gets the kind (W1 nginx, W1 go).
function pickWorkloads (opts, backendKinds) {
  let picked = WORKLOADS
  if (opts.only) {
    const unknown = opts.only.filter(id => !WORKLOADS.some(w => w.id.toLowerCase() === id.toLowerCase()))
    if (unknown.length > 0) usage(`unknown workload ${unknown.join(', ')}; expected some of ${WORKLOADS.map(w => w.id).join(', ')}`)
    picked = WORKLOADS.filter(w => opts.only.some(id => id.toLowerCase() === w.id.toLowerCase()))
  }
  return picked.flatMap(w => w.backend
    ? [w]
    : backendKinds.map(kind => ({ ...w, id: backendKinds.length > 1 ? `${w.id} ${kind}` : w.id, backend: kind })))
}

function usage (message) {
  process.stderr.write(`bench: ${message}\n`)
  process.exit(2)
}

function backendName (kind) {
  if (kind.startsWith('go/')) return `Go net/http writing bodies in ${kind.slice(3, -1)} KiB writes (peers/go-backend)`
  return {
    nginx: 'nginx, 1 worker each',
    go: 'Go net/http (peers/go-backend)',
    node: 'bench/backend-server.js',
    redis: 'redis-server',
    grpc: 'Go gRPC, grpc-go (peers/grpc-backend)'
  }[kind]
}

function describeMachine (opts, { loadgen, workloads, seconds }) {
  const cpuinfo = safe(() => fs.readFileSync('/proc/cpuinfo', 'utf8'), '')
  const model = (cpuinfo.match(/^model name\s*:\s*(.*)$/m) || [])[1] || os.cpus()[0]?.model || 'unknown CPU'
  // First line of a tool's version output (some exit non-zero after printing it).
  const firstLine = argv => {
    const r = procs.runSync(argv)
    const line = r.error ? '' : r.out.split('\n')[0].trim()
    return line || null
  }
  const peers = []
  if (procs.which('haproxy')) peers.push((firstLine([procs.which('haproxy'), '-v']) || 'HAProxy ?').replace(/ version /, ' ').replace(/ \d{4}\/.*$/, ''))
  if (procs.which('nginx')) peers.push((firstLine([procs.which('nginx'), '-v']) || 'nginx ?').replace(/^nginx version: nginx\//, 'nginx '))
  if (procs.which('caddy')) peers.push(`Caddy ${(firstLine([procs.which('caddy'), 'version']) || '?').split(' ')[0]}`)
  const hp = safe(() => require(require.resolve('http-proxy/package.json', { paths: [__dirname] })).version, null)
  if (hp) peers.push(`http-proxy ${hp}`)
  if (procs.which('wrk')) peers.push((firstLine(['wrk', '--version']) || 'wrk ?').replace(/ \[.*$/, '').replace(/ +Copyright.*$/, ''))
  const kinds = [...new Set(workloads.map(w => w.backend))]
  if (kinds.some(k => k.startsWith('go') || k === 'grpc') && !backendMissing('go')) {
    peers.push((firstLine([require('./backends').goTool(), 'version']) || 'go ?').replace(/^go version go/, 'Go ').replace(/ \S+\/\S+$/, ''))
  }
  if (kinds.includes('grpc') && ghzPath()) {
    // `go install ...@latest` builds ghz without its version (--version says "dev");
    // the module version is in the binary's build information.
    const built = backendMissing('grpc') ? '' : procs.runSync([require('./backends').goTool(), 'version', '-m', ghzPath()]).out
    const module = built.match(/^\s*mod\s+github\.com\/bojand\/ghz\s+(\S+)/m)
    peers.push(`ghz ${module ? module[1] : firstLine([ghzPath(), '--version']) || '?'}`)
  }
  if (kinds.includes('redis') && !backendMissing('redis')) {
    peers.push((firstLine(['redis-server', '--version']) || 'redis ?').replace(/^Redis server v=(\S+).*$/, 'redis $1'))
  }
  const lilaVersion = firstLine([...procs.lilaArgv(opts.lilaPath), '--version']) || 'lila (version unknown)'
  const commit = firstLine(['git', '-C', path.dirname(opts.lilaPath), 'rev-parse', '--short', 'HEAD'])
  const filters = [opts.only && `--only ${opts.only.join(',')}`, opts.contenders && `--contenders ${opts.contenders.join(',')}`].filter(Boolean)
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    cpuModel: model,
    cores: os.cpus().length,
    kernel: `Linux ${os.release()}`,
    node: process.version,
    peers,
    lila: `${lilaVersion} (${path.relative(process.cwd(), opts.lilaPath) || opts.lilaPath}${commit ? `, commit ${commit}` : ''})`,
    run: `${opts.label}: ${opts.warmup}s warm-up + ${opts.seconds}s measured per cell` +
      `${opts.repeat > 1 ? ` (best of ${opts.repeat}: the interval least disturbed by other processes on CPU 0)` : ''}` +
      `${filters.length ? `, ${filters.join(' ')}` : ''}; took ${Math.round(seconds)}s`,
    loadgen: describeLoadgens(workloads, loadgen),
    backendKind: describeBackends(workloads)
  }
}

// "wrk, 1 thread (W1, W2); h2load, 1 thread (H1); ghz, one core (G1)"
function describeLoadgens (workloads, loadgen) {
  const byTool = new Map()
  for (const w of workloads) {
    const tool = w.grpc
      ? 'ghz, one core'
      : w.h2 ? 'h2load, 1 thread' : w.backend === 'redis' ? 'redis-benchmark' : loadgen === 'wrk' ? 'wrk, 1 thread' : 'bench/loadgen.js'
    if (!byTool.has(tool)) byTool.set(tool, [])
    byTool.get(tool).push(w.id)
  }
  if (byTool.size === 1) return [...byTool.keys()][0]
  return [...byTool].map(([tool, ids]) => `${tool} (${ids.join(', ')})`).join('; ')
}

// "nginx, 1 worker each (W1, W2, W3); bench/backend-server.js (W4, W4c)"
function describeBackends (workloads) {
  const byKind = new Map()
  for (const w of workloads) {
    if (!byKind.has(w.backend)) byKind.set(w.backend, [])
    byKind.get(w.backend).push(w.id)
  }
  return [...byKind].map(([kind, ids]) => `${backendName(kind)} (${ids.join(', ')})`).join('; ')
}

function safe (fn, fallback) {
  try { return fn() } catch { return fallback }
}

main().catch(err => {
  process.stderr.write(`bench: ${err && err.stack}\n`)
  procs.killAll()
  process.exit(1)
})
