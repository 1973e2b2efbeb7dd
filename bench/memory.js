#!/usr/bin/env node
'use strict'

// Memory of lila, against HAProxy and a bare Node proxy, in one run:
//
//   node bench/memory.js [--lila PATH] [--count 10000] [--only idle,load,startup]
//                        [--seconds 10] [--after 12] [--settle 15] [--node-flags="--max-semi-space-size=2"]
//                        [--no-peers] [--snapshots DIR] [--out FILE]
//
// idle: `count` idle proxied TCP connections, and `count` idle HTTP keep-alive clients
//   (each after one request), held open through lila, through HAProxy, and through
//   node-floor.js (the least a Node program can hold for one: Node's own sockets). For
//   each: RSS once warmed up, RSS with the connections, KiB per connection between the
//   two; for the Node ones also the live heap per connection (after a forced GC), and
//   what is left once the connections close. Each RSS is read once it has settled (no
//   move over 0.5 % for `settle` seconds, cpu.js settledRssKiB): lila's idle collector
//   gives a burst's garbage back 8 to 11 s after it, and a reading before that counted
//   it as memory per connection.
// load: lila and HAProxy under load, tcp and http, the same backends: many keep-alive
//   clients, then 1 MiB bodies, then a new connection per request; RSS (and lila's heap)
//   at the start, the peak under load, at its end, `after` seconds after it stopped,
//   and (lila) after a forced GC: whether the memory comes back.
// startup: `lila --version` against `node -e 0`.
//
// lila and node-floor run as `node --expose-gc --require memory-probe.js ...`; the
// probe answers SIGWINCH with process.memoryUsage() and V8's heap figures, and does
// nothing else (a GC only when asked, after the figures that must not see one). The
// clients and the idle backend live in helper processes ("holders", this file with
// --holder) pinned to CPU 1, lila to CPU 0. Every fd limit is raised through
// `sh -c 'ulimit -n ...; exec ...'`, up to the hard limit.

const fs = require('fs')
const os = require('os')
const net = require('net')
const path = require('path')
const { spawnSync } = require('child_process')
const procs = require('./procs')
const { treeRssKiB, treeCpuMicros, settledRssKiB } = require('./cpu')
const { startBackends, startOnFreePort, get } = require('./backends')
const { runLoad } = require('./loadgen')

const FD_LIMIT = 65536
const OPEN_CONCURRENCY = 200 // connections being set up at once (under lila's backlog)
// Opened and closed first, WARM_ROUNDS times, so code warm-up is not counted: V8
// optimizes a function once it has run often enough, and its optimizing compiler's
// memory (malloc'd on its own threads, kept by glibc's arenas) is then the process's
// for good. One round of 200 left lila's HTTP/2 path to be optimized while the 1,000
// streams measured were opened: 4.7 MiB of compiler memory counted as 4.7 KiB a
// stream (bench/README.md); five rounds of 200, never more open at once, leave it
// to the warm-up without growing the heap to the count measured.
const WARM_CONNECTIONS = 200
const WARM_ROUNDS = 5
const STREAMS_PER_SESSION = 100 // h2: streams per client connection (lila allows 128, HAProxy 100)
const H2_STREAMS = 1000 // h2: streams held open by default (--streams)
const SETTLE_STILL = 15 // s: RSS settled once it held for this long (cpu.js settledRssKiB)
const SETTLE_MAX = 90 // s: the longest wait for it
// run.js's idle http figure: the issue's measure (5,000 clients that each made one
// request and stay connected), as bench/startup.js takes it.
const IDLE_HTTP_CLIENTS = 5000
const STARTUP_RUNS = 21
const LB_CPU = 0
const LOAD_CPU = 1
const PROBE = path.join(__dirname, 'memory-probe.js')
const FLOOR = path.join(__dirname, 'peers', 'node-floor.js')

// The load probe's phases, one after the other on one process.
const PHASES = [
  { id: 'keep-alive', what: '1,000 keep-alive clients, 5-byte bodies', path: '/', connections: 1000, close: false },
  { id: 'bodies', what: '32 keep-alive clients, 1 MiB bodies', path: '/1m', connections: 32, close: false },
  { id: 'close', what: '100 clients, a new connection per request', path: '/', connections: 100, close: true }
]

// ---- What is measured: lila, node-floor (both through the probe) or HAProxy ----------

// Start `kind` ('lila' | 'floor' | 'haproxy') balancing `backends` in `protocol`
// ('tcp' | 'http' | 'h2': http with HTTP/2 clients by prior knowledge).
// Returns { name, pid, port, sample({ gc, snapshot }), stop() }. sample() resolves
// with { rss } (bytes) and, for the Node ones, the heap figures of memory-probe.js.
async function startSubject ({ kind, protocol, backends, dir, opts, maxConn }) {
  const name = `${kind === 'floor' ? 'node-floor' : kind} ${protocol}`
  if (kind === 'haproxy') return startHaproxy({ name, protocol, backends, dir, maxConn })
  const probeFile = path.join(dir, `probe-${kind}-${protocol}-${Date.now()}.json`)
  const script = kind === 'lila' ? opts.lilaPath : FLOOR
  const argv = ['node', '--expose-gc', ...opts.nodeFlags, '--require', PROBE, script,
    'round-robin', ...backends, '--host', '127.0.0.1', '--port', '0']
  // h2: lila's http listener serves HTTP/2 as it is; its streams wait on the backend
  // longer than the probe takes (the default --timeout is 60 s).
  if (protocol !== 'tcp') argv.push('--protocol', kind === 'lila' ? 'http' : protocol)
  if (kind === 'lila' && protocol === 'h2') argv.push('--timeout', '300s')
  if (kind === 'lila' && maxConn) argv.push('--max-conn', String(maxConn))
  const handle = await procs.start(argv, {
    cpu: LB_CPU,
    ulimitN: FD_LIMIT,
    env: { ...process.env, LILA_MEMORY_PROBE: probeFile },
    ready: /listening on 127\.0\.0\.1:(\d+)/
  })
  let seq = 0
  let queue = Promise.resolve() // one request to the probe at a time: they share a file
  const ask = async (gc, maps, snapshot) => {
    const id = ++seq
    fs.writeFileSync(probeFile, JSON.stringify({ seq: id, gc, maps, snapshot }))
    process.kill(handle.pid, 'SIGWINCH')
    const deadline = Date.now() + (snapshot ? 120000 : 10000)
    while (Date.now() < deadline) {
      try {
        const answer = JSON.parse(fs.readFileSync(`${probeFile}.out`, 'utf8'))
        if (answer.seq === id) return answer
      } catch {}
      await procs.sleep(20)
    }
    throw new Error(`${name} did not answer the memory probe`)
  }
  return {
    name,
    pid: handle.pid,
    port: Number(handle.ready[1]),
    node: true,
    output: handle.output,
    sample ({ gc = false, maps = true, snapshot = null } = {}) {
      const answer = queue.then(() => ask(gc, maps, snapshot))
      queue = answer.catch(() => {})
      return answer
    },
    stop: handle.stop
  }
}

function startHaproxy ({ name, protocol, backends, dir, maxConn }) {
  const haproxy = procs.which('haproxy')
  return startOnFreePort(async port => {
    const conf = path.join(dir, `haproxy-${protocol}.cfg`)
    fs.writeFileSync(conf, `# generated by lila bench/memory.js
global
  nbthread 1
  maxconn ${maxConn || 4096}

defaults
  mode ${protocol === 'tcp' ? 'tcp' : 'http'}
  timeout connect 5s
  timeout client 120s
  timeout server 120s
${protocol !== 'tcp' ? '  timeout http-keep-alive 120s\n  option http-keep-alive\n  http-reuse always\n' : ''}${protocol === 'h2' ? '  option abortonclose\n' : ''}
frontend fe
  bind 127.0.0.1:${port}${protocol === 'h2' ? ' proto h2' : ''}
  default_backend be

backend be
  balance roundrobin
${backends.map((b, i) => `  server s${i} ${b}`).join('\n')}
`)
    return procs.start([haproxy, '-db', '-f', conf], { cpu: LB_CPU, ulimitN: FD_LIMIT })
  }).then(({ port, pid, stop }) => ({
    name,
    pid,
    port,
    node: false,
    output: () => '',
    async sample () { return { rss: treeRssKiB(pid) * 1024 } },
    stop
  }))
}

// ---- idle: memory per connection ----------------------------------------------------

function connectionBudget (count, protocol = 'tcp') {
  const lines = []
  // A proxied TCP connection holds two sockets, an idle HTTP client one (the backend
  // connections are pooled); a hundred more for everything else.
  const perConnection = protocol === 'tcp' ? 2 : 1
  const need = perConnection * count + 100
  const hard = hardFdLimit()
  const limit = Math.min(FD_LIMIT, hard)
  let n = count
  if (limit < need) {
    n = Math.floor((limit - 100) / perConnection)
    lines.push(`fd limit: ${count} ${protocol} connections need \`ulimit -n\` ≥ ${need}; the hard limit here is ${hard} ` +
      'and cannot be raised from inside (raise it with `ulimit -Hn` as root, /etc/security/limits.conf or ' +
      `the container's nofile limit), so ${n} connections were used`)
  }
  return { n, lines }
}

function hardFdLimit () {
  const text = procs.runSync(['sh', '-c', 'ulimit -Hn']).out.trim()
  return text === 'unlimited' ? Infinity : Number(text) || 1024
}

// One subject holding `count` idle connections (see the head of this file); h2:
// `count` HTTP/2 streams waiting for their answer (100 per client connection), each
// request held unanswered by the backend.
// `full`: also the live heap (forced GCs) and what is left once they close.
async function idleProbe ({ kind, protocol, count, dir, opts, full = true }) {
  const label = `${kind === 'floor' ? 'node-floor' : kind} ${protocol}`
  const http = protocol === 'http'
  const h2 = protocol === 'h2'
  let backend = null
  let clients = null
  let subject = null
  try {
    backend = await startHolder()
    clients = await startHolder()
    const { port: backendPort } = await backend.ask({ cmd: 'backend', http, hold: h2 })
    const stats = () => backend.ask({ cmd: 'stats' })
    const live = async () => (await stats()).live
    try {
      // HAProxy wants 2 descriptors per connection and a few more under its own limit.
      const maxConn = kind === 'haproxy' ? Math.min(count + 100, Math.floor((Math.min(FD_LIMIT, hardFdLimit()) - 40) / 2)) : count + 100
      subject = await startSubject({ kind, protocol, backends: [`127.0.0.1:${backendPort}`], dir, opts, maxConn })
    } catch (err) {
      return { label, error: `did not start: ${err.message.split('\n')[0]}` }
    }
    const { port } = subject
    let held = 0 // h2: requests the backend had seen before this opening
    const openAll = async n => {
      if (h2) {
        held = (await stats()).requests
        const opened = await clients.ask({ cmd: 'openH2', port, count: n }, 180000)
        if (opened.failed > 0) throw new Error(`${opened.failed} of ${n} streams failed (${opened.firstError})`)
        // A stream counts once its request reached the backend.
        return until(async () => (await stats()).requests - held >= n, 60000).catch(async err => {
          throw new Error(`${err.message} (${(await stats()).requests - held} of ${n}; ${procs.tail(subject.output())})`)
        })
      }
      const opened = await clients.ask({ cmd: 'open', port, count: n, http }, 180000)
      if (opened.failed > 0) throw new Error(`${opened.failed} of ${n} connections failed (${opened.firstError})`)
      // tcp: a client counts once it is connected through to the backend.
      if (!http) {
        await until(async () => await live() >= n, 60000).catch(async err => {
          throw new Error(`${err.message} (${await live()} of ${n}; ${procs.tail(subject.output())})`)
        })
      }
    }
    const closeAll = async () => {
      await clients.ask({ cmd: 'closeAll' })
      // h2 to HTTP/1.1 backends: an abandoned request's backend connection cannot be
      // reused, so it closes too.
      if (h2) await until(async () => await live() === 0, 30000).catch(() => {})
      else if (!http) await until(async () => await live() === 0, 30000)
    }

    // Warm up, then let it go idle and take the baseline; each reading once RSS settled.
    const waits = [] // { seconds, settled } of each reading
    const settle = async () => {
      waits.push(await settledRssKiB(subject.pid, { still: opts.settle, max: SETTLE_MAX }))
    }
    for (let round = 0; round < WARM_ROUNDS; round++) {
      await openAll(WARM_CONNECTIONS)
      await closeAll()
    }
    await settle()
    const base = await subject.sample()
    const t0 = Date.now()
    await openAll(count)
    const setupSeconds = (Date.now() - t0) / 1000
    await settle()
    const loaded = await subject.sample({ snapshot: snapshotPath(opts, `idle-${kind}-${protocol}`) })
    const outcome = { label, kind, protocol, count, setupSeconds, settledIn: waits[1].seconds, base, loaded }
    if (full) {
      outcome.loadedGc = subject.node ? await subject.sample({ gc: true }) : null
      await closeAll()
      await settle()
      outcome.closed = await subject.sample()
      outcome.closedGc = subject.node ? await subject.sample({ gc: true }) : null
    }
    outcome.unsettled = waits.filter(w => !w.settled).length // readings taken at SETTLE_MAX
    return outcome
  } catch (err) {
    return { label, error: err.message.split('\n')[0] }
  } finally {
    if (subject) await subject.stop()
    if (clients) await clients.stop()
    if (backend) await backend.stop()
  }
}

// How long the reading with the connections waited for RSS to settle.
function settledWords (r) {
  const words = `${Math.round(r.settledIn)} s`
  return r.unsettled > 0 ? `${words}; ${r.unsettled} reading(s) not settled in ${SETTLE_MAX} s` : words
}

function snapshotPath (opts, what) {
  return opts.snapshots ? path.join(opts.snapshots, `${what}-${Date.now()}.heapsnapshot`) : null
}

function idleTable (results) {
  const out = []
  out.push('| process | connections (h2: streams) | RSS idle | RSS with them (settled after) | **KiB per connection** | live heap per connection | RSS once they closed | and after a forced GC |')
  out.push('|---|--:|--:|--:|--:|--:|--:|--:|')
  for (const r of results) {
    if (r.error) {
      out.push(`| ${r.label} | not measured: ${r.error} | | | | | | |`)
      continue
    }
    const perConn = (r.loaded.rss - r.base.rss) / r.count / 1024
    const heap = r.loadedGc ? `${((r.loadedGc.heapUsed - r.closedGc.heapUsed) / r.count / 1024).toFixed(2)} KiB` : '—'
    out.push(`| ${r.label} | ${r.count} | ${mib(r.base.rss)} | ${mib(r.loaded.rss)} (${settledWords(r)}) | ` +
      `**${perConn.toFixed(2)}** | ${heap} | ${mib(r.closed.rss)} | ${r.closedGc ? mib(r.closedGc.rss) : '—'} |`)
  }
  // lila beyond Node's own sockets: lila's figure less node-floor's, per protocol.
  const lines = []
  for (const protocol of ['tcp', 'http', 'h2']) {
    const lila = results.find(r => r.kind === 'lila' && r.protocol === protocol && !r.error)
    const floor = results.find(r => r.kind === 'floor' && r.protocol === protocol && !r.error)
    const haproxy = results.find(r => r.kind === 'haproxy' && r.protocol === protocol && !r.error)
    if (!lila) continue
    const per = r => (r.loaded.rss - r.base.rss) / r.count / 1024
    const parts = []
    if (floor) {
      const heap = r => (r.loadedGc.heapUsed - r.closedGc.heapUsed) / r.count / 1024
      parts.push(`${(per(lila) - per(floor)).toFixed(2)} KiB of RSS per ${protocol === 'h2' ? 'stream' : 'connection'} beyond Node's own sockets ` +
        `(live heap: ${(heap(lila) - heap(floor)).toFixed(2)} KiB)`)
    }
    if (haproxy) parts.push(`${(per(lila) / per(haproxy)).toFixed(1)}× HAProxy's per ${protocol === 'h2' ? 'stream' : 'connection'}`)
    if (parts.length > 0) lines.push(`- lila ${protocol}: ${parts.join('; ')}`)
  }
  return [...out, '', ...lines]
}

// ---- load: RSS before, under and after load -----------------------------------------

async function loadProbe ({ kind, protocol, backends, dir, opts, loadgen }) {
  const label = `${kind} ${protocol}`
  let subject = null
  try {
    try {
      subject = await startSubject({ kind, protocol, backends: backends.addresses, dir, opts, maxConn: kind === 'haproxy' ? 4096 : null })
    } catch (err) {
      return { label, error: `did not start: ${err.message.split('\n')[0]}` }
    }
    await get(subject.port, '/')
    await procs.sleep(1000)
    const start = await subject.sample()
    let peak = start
    let peakHeap = start.heapUsed || 0
    const ends = []
    for (const phase of opts.phases) {
      const before = { cpu: treeCpuMicros(subject.pid), sample: await subject.sample({ maps: false }) }
      const sampling = { on: true }
      const sampler = (async () => {
        while (sampling.on) {
          await procs.sleep(500)
          const s = await subject.sample({ maps: false })
          if (s.rss > peak.rss) peak = s
          if (s.heapUsed > peakHeap) peakHeap = s.heapUsed
        }
      })()
      let result
      try {
        result = await runLoad({
          tool: loadgen,
          port: subject.port,
          urlPath: phase.path,
          connections: phase.connections,
          seconds: opts.seconds,
          close: phase.close,
          cpu: LOAD_CPU,
          dir
        })
      } finally {
        sampling.on = false
        await sampler
      }
      const cpuMicros = treeCpuMicros(subject.pid) - before.cpu
      const end = await subject.sample({ maps: false })
      if (end.rss > peak.rss) peak = end
      const gcMs = end.gcTime ? sumGc(end.gcTime) - sumGc(before.sample.gcTime) : null
      ends.push({ phase, result, end, cpuMicros, gcMs })
    }
    // Once a second after the load: when does the memory come back?
    const series = []
    const stopped = Date.now()
    for (let i = 1; i < opts.after; i++) {
      await procs.sleep(stopped + i * 1000 - Date.now())
      series.push({ s: i, rss: treeRssKiB(subject.pid) * 1024 }) // from outside: the probe would allocate
    }
    await procs.sleep(stopped + opts.after * 1000 - Date.now())
    const after = await subject.sample({ snapshot: snapshotPath(opts, `after-load-${kind}-${protocol}`) })
    series.push({ s: opts.after, ...after })
    const afterGc = subject.node ? await subject.sample({ gc: true }) : null
    return { label, kind, protocol, start, peak, peakHeap, ends, series, after, afterGc }
  } catch (err) {
    return { label, error: err.message.split('\n')[0] }
  } finally {
    if (subject) await subject.stop()
  }
}

function loadTable (results, opts) {
  const out = []
  const cell = s => s.heapUsed === undefined ? mib(s.rss) : `${mib(s.rss)} (heap ${mib(s.heapUsed)})`
  const early = Math.min(5, opts.after - 1)
  out.push(`| process | at start | peak under load | end of load | ${early} s after | ${opts.after} s after | after a forced GC | requests (errors) |`)
  out.push('|---|--:|--:|--:|--:|--:|--:|--:|')
  for (const r of results) {
    if (r.error) {
      out.push(`| ${r.label} | not measured: ${r.error} | | | | | | |`)
      continue
    }
    const last = r.ends[r.ends.length - 1].end
    const atEarly = r.series.find(p => p.s === early)
    const peak = r.peak.heapUsed === undefined ? mib(r.peak.rss) : `${mib(r.peak.rss)} (heap ${mib(r.peakHeap)})`
    const requests = r.ends.map(e => `${e.result.requests} (${e.result.non2xx + e.result.socketErrors})`).join(', ')
    out.push(`| ${r.label} | ${cell(r.start)} | ${peak} | ${cell(last)} | ${atEarly ? mib(atEarly.rss) : '—'} | ${cell(r.after)} | ` +
      `${r.afterGc ? cell(r.afterGc) : '—'} | ${requests} |`)
  }
  const lines = []
  for (const protocol of ['tcp', 'http']) {
    const lila = results.find(r => r.kind === 'lila' && r.protocol === protocol && !r.error)
    const haproxy = results.find(r => r.kind === 'haproxy' && r.protocol === protocol && !r.error)
    if (!lila) continue
    const kept = lila.after.rss - lila.start.rss
    let line = `- lila ${protocol}: grew by ${mib(lila.peak.rss - lila.start.rss)} under load and kept ${mib(kept)} of it ` +
      `${opts.after} s after (${Math.round(100 * kept / Math.max(1, lila.peak.rss - lila.start.rss))}%)`
    if (haproxy) {
      line += `; RSS ${opts.after} s after the load ${(lila.after.rss / haproxy.after.rss).toFixed(1)}× HAProxy's, ` +
        `peak ${(lila.peak.rss / haproxy.peak.rss).toFixed(1)}×`
    }
    lines.push(line)
  }
  return [...out, '', ...lines]
}

function sumGc (t) {
  return t.minor + t.major + t.incremental + t.weak
}

// CPU per request in each phase, and the share of it spent in GC pauses (Node ones).
function cpuTable (results) {
  const phases = results.find(r => !r.error)?.ends.map(e => e.phase) || []
  const out = ['| process | ' + phases.map(p => `${p.id}: CPU µs/req (GC share)`).join(' | ') + ' |']
  out.push('|---|' + phases.map(() => '--:').join('|') + '|')
  for (const r of results) {
    if (r.error) continue
    out.push(`| ${r.label} | ` + r.ends.map(e => {
      const perReq = e.cpuMicros / Math.max(1, e.result.requests)
      const gc = e.gcMs === null ? '' : ` (${(100 * e.gcMs * 1000 / Math.max(1, e.cpuMicros)).toFixed(0)}%)`
      return `${perReq.toFixed(1)}${gc}`
    }).join(' | ') + ' |')
  }
  return out
}

function mib (bytes) {
  return `${(bytes / 1048576).toFixed(1)} MiB`
}

async function until (check, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await procs.sleep(100)
  }
  throw new Error(`connections did not reach the expected count on the backend within ${timeoutMs} ms`)
}

// ---- startup ------------------------------------------------------------------------

// `lila --version` against `node -e 0`: the median of each, and the difference, which
// is what loading lila (one file, no dependencies) costs at start. Runs alternate so
// that both see the same background load on a shared machine.
function startupProbe (lilaPath) {
  const once = argv => {
    const t0 = process.hrtime.bigint()
    const r = spawnSync(argv[0], argv.slice(1), { stdio: 'ignore', timeout: 10000 })
    if (r.status !== 0) throw new Error(`${argv.join(' ')} failed`)
    return Number(process.hrtime.bigint() - t0) / 1e6
  }
  const median = runs => runs.sort((a, b) => a - b)[runs.length >> 1]
  try {
    const nodeRuns = []
    const lilaRuns = []
    for (let i = 0; i < STARTUP_RUNS; i++) {
      nodeRuns.push(once(['node', '-e', '0']))
      lilaRuns.push(once([...procs.lilaArgv(lilaPath), '--version']))
    }
    const node = median(nodeRuns)
    const lila = median(lilaRuns)
    return `start-up: \`lila --version\` ${lila.toFixed(1)} ms vs \`node -e 0\` ${node.toFixed(1)} ms (medians of ${STARTUP_RUNS} alternating runs): ` +
      `**lila adds ${(lila - node).toFixed(1)} ms**`
  } catch (err) {
    return `start-up: not measured: ${err.message}`
  }
}

// What run.js prints under "Memory and start-up": lila's idle figures (tcp, http with
// the issue's IDLE_HTTP_CLIENTS clients, h2), HAProxy's http figure beside lila's, each
// read the same way (RSS settled), and start-up.
async function probe ({ lilaPath, count = 10000 }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-memory-'))
  const opts = { lilaPath, nodeFlags: [], snapshots: null, settle: SETTLE_STILL }
  try {
    const lines = []
    const results = []
    for (const protocol of ['tcp', 'http', 'h2']) {
      const budget = protocol === 'h2'
        ? { n: H2_STREAMS, lines: [] }
        : connectionBudget(protocol === 'http' ? IDLE_HTTP_CLIENTS : count, protocol)
      lines.push(...budget.lines)
      results.push(await idleProbe({ kind: 'lila', protocol, count: budget.n, dir, opts, full: false }))
      if (protocol === 'http' && procs.which('haproxy')) {
        const n = Math.min(budget.n, connectionBudget(budget.n, 'tcp').n) // two descriptors a client
        results.push(await idleProbe({ kind: 'haproxy', protocol, count: n, dir, opts, full: false }))
      }
    }
    const per = r => (r.loaded.rss - r.base.rss) / r.count / 1024
    for (const r of results) {
      if (r.error) {
        lines.push(`${r.label}: not measured: ${r.error}`)
        continue
      }
      const what = {
        http: `${r.count} idle keep-alive clients (one request each)`,
        h2: `${r.count} HTTP/2 streams waiting on their backend (${Math.ceil(r.count / STREAMS_PER_SESSION)} client connections)`,
        tcp: `${r.count} idle proxied connections (${2 * r.count} sockets in ${r.kind})`
      }[r.protocol]
      lines.push(`${r.label}: ${what}: RSS ${mib(r.base.rss)} idle → ${mib(r.loaded.rss)} (settled after ` +
        `${settledWords(r)}), **${per(r).toFixed(1)} KiB per ${r.protocol === 'h2' ? 'stream' : 'connection'}** ` +
        `(set up in ${r.setupSeconds.toFixed(1)} s; bench/memory.js has more)`)
    }
    const [lila, haproxy] = ['lila', 'haproxy'].map(kind => results.find(r => r.kind === kind && r.protocol === 'http' && !r.error))
    if (lila && haproxy) lines.push(`idle keep-alive client: lila ${(per(lila) / per(haproxy)).toFixed(1)}× HAProxy's memory`)
    lines.push(startupProbe(lilaPath))
    return lines
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// ---- Holders: the clients, or the idle backend, in a process of their own --------------

async function startHolder () {
  const handle = await procs.start(['node', __filename, '--holder'], {
    cpu: LOAD_CPU, ulimitN: FD_LIMIT, ipc: true, ready: /holder ready/
  })
  let nextId = 0
  const waiting = new Map()
  handle.child.on('message', msg => {
    const w = waiting.get(msg.id)
    if (w) { waiting.delete(msg.id); w(msg) }
  })
  return {
    ask (msg, timeoutMs = 10000) {
      return new Promise((resolve, reject) => {
        const id = ++nextId
        const timer = setTimeout(() => { waiting.delete(id); reject(new Error(`holder did not answer ${msg.cmd} in ${timeoutMs} ms`)) }, timeoutMs)
        waiting.set(id, reply => { clearTimeout(timer); resolve(reply) })
        handle.child.send({ ...msg, id })
      })
    },
    stop: handle.stop
  }
}

function holder () {
  const clients = []
  const sessions = [] // HTTP/2 client sessions
  let live = 0 // backend connections open now
  let requests = 0 // request heads the backend has read
  const HELLO = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello'

  const handlers = {
    // A backend that holds tcp connections open, answers each request (http), or
    // reads each request and never answers (hold).
    backend ({ http, hold }) {
      return new Promise(resolve => {
        const server = net.createServer(socket => {
          live++
          socket.on('error', () => {})
          socket.on('close', () => live--)
          if (http || hold) {
            let buf = ''
            socket.setEncoding('latin1')
            socket.on('data', d => {
              buf += d
              for (let i; (i = buf.indexOf('\r\n\r\n')) !== -1;) {
                buf = buf.slice(i + 4)
                requests++
                if (!hold) socket.write(HELLO)
              }
            })
          }
        })
        server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => resolve({ port: server.address().port }))
      })
    },
    // Open `count` connections, OPEN_CONCURRENCY at a time; for http send one request
    // on each and wait for its response. The connections then stay idle.
    open ({ port, count, http }) {
      return new Promise(resolve => {
        let started = 0
        let finished = 0
        let failed = 0
        let firstError = null
        const launch = () => {
          while (started < count && started - finished < OPEN_CONCURRENCY) {
            started++
            openOne()
          }
          if (finished === count) resolve({ opened: count - failed, failed, firstError })
        }
        const openOne = () => {
          let done = false
          const socket = net.connect({ port, host: '127.0.0.1' })
          const finish = err => {
            if (done) return
            done = true
            if (err) { failed++; firstError ||= err.message }
            finished++
            setImmediate(launch)
          }
          socket.on('error', err => finish(err))
          socket.on('close', () => finish(new Error('closed by the balancer')))
          socket.once('connect', () => {
            clients.push(socket)
            if (!http) return finish()
            socket.once('data', () => finish())
            socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
          })
        }
        launch()
      })
    },
    // Open `count` HTTP/2 streams (GET /), STREAMS_PER_SESSION per connection (h2c by
    // prior knowledge), and resolve once every request is sent. Their answers never come.
    openH2 ({ port, count }) {
      const http2 = require('http2')
      return new Promise(resolve => {
        let pending = count
        let failed = 0
        let firstError = null
        const settle = err => {
          if (err) { failed++; firstError ||= err.message }
          if (--pending === 0) resolve({ opened: count - failed, failed, firstError })
        }
        for (let opened = 0; opened < count; opened += STREAMS_PER_SESSION) {
          const session = http2.connect(`http://127.0.0.1:${port}`)
          session.on('error', () => {})
          sessions.push(session)
          for (let i = opened; i < Math.min(count, opened + STREAMS_PER_SESSION); i++) {
            let done = false
            const once = err => { if (!done) { done = true; settle(err) } }
            const stream = session.request({ ':path': '/' }) // a GET: the request ends with its head
            stream.on('error', err => once(err))
            stream.on('close', () => once(new Error(`stream closed (code ${stream.rstCode})`)))
            stream.on('ready', () => once(null))
          }
        }
      })
    },
    stats: () => ({ live, requests, clients: clients.length }),
    closeAll () {
      for (const s of clients.splice(0)) s.destroy()
      for (const s of sessions.splice(0)) s.destroy()
      return {}
    }
  }

  process.on('message', async msg => {
    const reply = await handlers[msg.cmd](msg)
    process.send({ ...reply, id: msg.id })
  })
  process.on('disconnect', () => process.exit(0)) // the harness went away
  process.stderr.write('holder ready\n')
}

// ---- The report ---------------------------------------------------------------------

function describe (opts, loadgen, backendKind) {
  const version = text => (text.match(/\d+\.\d+(\.\d+)?\S*/) || [''])[0]
  const peers = []
  const haproxy = procs.which('haproxy')
  if (haproxy) peers.push(`HAProxy ${version(procs.runSync([haproxy, '-v']).out)}`)
  if (procs.which('wrk')) peers.push(`wrk ${version(procs.runSync(['wrk', '-v']).out)}`)
  // The commit, when the lila measured is this checkout's (./lila or lib/).
  const root = path.join(__dirname, '..')
  const git = procs.runSync(['git', '-C', root, 'rev-parse', '--short', 'HEAD'])
  let commit = git.code === 0 && !path.relative(root, opts.lilaPath).startsWith('..') ? git.out.trim() : ''
  if (commit && procs.runSync(['git', '-C', root, 'status', '--porcelain', '--', 'lib', 'lila']).out.trim()) commit += ' with changes'
  return [
    `- Date: ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}`,
    `- Machine: ${os.cpus()[0].model.trim()}, ${os.cpus().length} cores, ${os.type()} ${os.release()}, ` +
      `${(os.totalmem() / 2 ** 30).toFixed(0)} GiB; load average ${os.loadavg()[0].toFixed(2)} at the start`,
    `- Node: ${process.version}; peers: ${peers.join(', ') || 'none'}`,
    `- lila: ${path.relative(root, opts.lilaPath).startsWith('..') ? opts.lilaPath : path.relative(root, opts.lilaPath)}` +
      `${commit ? ` (commit ${commit})` : ''}` +
      `, run as \`node --expose-gc ${opts.nodeFlags.length ? opts.nodeFlags.join(' ') + ' ' : ''}--require bench/memory-probe.js\``,
    `- Load: ${loadgen}, on CPU 1 with the backends (${backendKind}); the balancer alone on CPU 0; ` +
      `each phase ${opts.seconds} s`
  ]
}

async function main () {
  const { parseArgs } = require('util')
  const { values } = parseArgs({
    options: {
      lila: { type: 'string', default: path.join(__dirname, '..', 'lila') },
      count: { type: 'string', default: '10000' },
      streams: { type: 'string', default: String(H2_STREAMS) },
      only: { type: 'string', default: 'idle,load,startup' },
      seconds: { type: 'string', default: '10' },
      after: { type: 'string', default: '12' },
      settle: { type: 'string', default: String(SETTLE_STILL) },
      'node-flags': { type: 'string', default: '' },
      'no-peers': { type: 'boolean', default: false },
      subjects: { type: 'string', default: 'lila,floor,haproxy' },
      snapshots: { type: 'string' },
      out: { type: 'string' },
      json: { type: 'string' },
      phases: { type: 'string', default: PHASES.map(p => p.id).join(',') },
      help: { type: 'boolean', short: 'h', default: false }
    }
  })
  if (values.help) {
    process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(3, 7).map(l => l.slice(3)).join('\n') + '\n')
    return
  }
  procs.installCleanup()
  const only = new Set(values.only.split(',').map(s => s.trim()))
  const opts = {
    lilaPath: path.resolve(values.lila),
    nodeFlags: values['node-flags'].split(/\s+/).filter(Boolean),
    seconds: Number(values.seconds),
    after: Number(values.after),
    settle: Number(values.settle),
    snapshots: values.snapshots ? path.resolve(values.snapshots) : null,
    phases: PHASES.filter(p => values.phases.split(',').includes(p.id))
  }
  if (opts.snapshots) fs.mkdirSync(opts.snapshots, { recursive: true })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-memory-'))
  fs.chmodSync(dir, 0o755) // nginx workers run as another user when started by root
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  const subjects = values.subjects.split(',')
  const peers = !values['no-peers'] && subjects.includes('haproxy') && procs.which('haproxy') ? ['haproxy'] : []
  const nodes = ['lila', 'floor'].filter(k => subjects.includes(k))
  const loadgen = procs.which('wrk') ? 'wrk' : 'node'
  const backendKind = procs.which('nginx') ? 'nginx' : 'node'

  const out = ['# lila memory', '', ...describe(opts, loadgen, backendKind), '']
  if (opts.snapshots) out.push(`Heap snapshots were written to ${opts.snapshots}: writing one takes memory, so the figures after it are not comparable.`, '')
  if (!values['no-peers'] && peers.length === 0) out.push('HAProxy is not installed (apt-get install haproxy): no peer figures.', '')
  const say = line => process.stderr.write(`memory: ${line}\n`)
  const raw = {} // every sample, for --json

  if (only.has('idle')) {
    const results = []
    const lines = []
    const counts = {}
    for (const protocol of ['tcp', 'http', 'h2']) {
      const budget = protocol === 'h2' ? { n: Number(values.streams), lines: [] } : connectionBudget(Number(values.count), protocol)
      counts[protocol] = budget.n
      lines.push(...budget.lines)
      if (budget.n === 0) continue
      for (const kind of [...nodes, ...peers]) {
        // HAProxy counts two descriptors per connection whatever the mode.
        const n = kind === 'haproxy' ? Math.min(budget.n, connectionBudget(budget.n, 'tcp').n) : budget.n
        if (n < budget.n) lines.push(`${kind} ${protocol}: HAProxy reserves two descriptors per connection, so ${n} (not ${budget.n}) under this fd limit`)
        say(`idle ${kind} ${protocol}: ${n} ${protocol === 'h2' ? 'streams' : 'connections'}`)
        results.push(await idleProbe({ kind, protocol, count: n, dir, opts }))
      }
    }
    raw.idle = results
    out.push('## Idle connections', '')
    out.push(`Each process holds ${counts.tcp} idle proxied TCP connections (two sockets each in the balancer), ` +
      `${counts.http} idle HTTP keep-alive clients after one request each, or ${counts.h2} HTTP/2 streams ` +
      `(h2c, ${STREAMS_PER_SESSION} per client connection) waiting for an answer the backend (HTTP/1.1, one ` +
      'connection per stream) never sends. node-floor is a bare Node proxy (bench/peers/node-floor.js): ' +
      'what Node\'s own sockets (and, for h2, Http2Streams) cost. Live heap: V8\'s heap in use after a forced GC ' +
      'with the connections, less the same once they closed.', '')
    out.push(...lines.map(l => `- ${l}`), ...(lines.length ? [''] : []))
    out.push(...idleTable(results), '')
  }

  if (only.has('load')) {
    const backends = await startBackends({ kind: backendKind, delays: [0, 0], dir, cpu: LOAD_CPU })
    const results = []
    try {
      for (const protocol of ['tcp', 'http']) {
        for (const kind of [...nodes.filter(k => k === 'lila'), ...peers]) {
          say(`load ${kind} ${protocol}`)
          results.push(await loadProbe({ kind, protocol, backends, dir, opts, loadgen }))
        }
      }
    } finally {
      await backends.stop()
    }
    raw.load = results
    out.push('## Under load, and after', '')
    out.push(`One process per row, through these phases in turn, ${opts.seconds} s each: ` +
      opts.phases.map(p => p.what).join('; ') + '. RSS (and, for lila, V8\'s heap in use) at the start, the highest ' +
      `sampled every 0.5 s, at the end of the load, ${opts.after} s after it, then after a forced GC.`, '')
    out.push(...loadTable(results, opts), '')
    out.push('CPU time of the balancer per request in each phase (noisy on a shared machine: compare rows of one run), ' +
      'and the part of it the Node ones spent in GC pauses:', '')
    out.push(...cpuTable(results), '')
  }

  if (only.has('startup')) out.push('## Start-up', '', `- ${startupProbe(opts.lilaPath)}`, '')

  if (values.json) fs.writeFileSync(values.json, JSON.stringify(raw, null, 1))
  const text = out.join('\n')
  process.stdout.write(text)
  const full = only.size === 3 && !opts.nodeFlags.length && opts.phases.length === PHASES.length
  const file = values.out || (full ? path.join(__dirname, 'RESULTS-memory.md') : null)
  if (file) {
    fs.writeFileSync(file, text)
    say(`written to ${path.relative(process.cwd(), file)}`)
  }
}

module.exports = { probe }

if (require.main === module) {
  if (process.argv.includes('--holder')) holder()
  else main()
}
