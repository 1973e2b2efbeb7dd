#!/usr/bin/env node
'use strict'

// lila on all cores: CPU time per request with one process and with --workers N.
//
//   node bench/workers.js [--lila PATH] [--workers 1,2] [--protocols tcp,http]
//                         [--peer haproxy|none] [--seconds 3] [--warmup 1] [--repeat 3]
//                         [--backend nginx|go|node] [--out FILE]
//
// W1's shape (keep-alive, 5-byte bodies, 50 connections, round-robin), but nothing is
// pinned: the balancer, wrk (2 threads) and both backends share every core, as they
// would on a machine where lila is given all of them. For each protocol, lila with
// --workers N for each N asked (1 is one process, as without --workers: no primary);
// HAProxy with nbthread 1 and nbthread N as the peer. The figure: the balancer's
// process tree's CPU time (primary and workers) over the requests completed, and how
// the workers shared it. --repeat rounds run every configuration in turn, so that each
// sees the same drift of a shared machine; each keeps its least CPU per request, and
// the spread over the rounds is printed too.
// Writes bench/RESULTS-workers.md unless --out says otherwise.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { parseArgs } = require('util')
const procs = require('./procs')
const { startBackends, get, backendMissing } = require('./backends')
const { runLoad } = require('./loadgen')
const { treeCpuByProcess, cpuJiffies, busyPercent } = require('./cpu')
const { allContenders } = require('./contenders')

const CONNECTIONS = 50
const WRK_THREADS = 2 // one per core of the development VM: the generator is not the cap

function options () {
  const { values } = parseArgs({
    options: {
      lila: { type: 'string', default: path.join(__dirname, '..', 'lila') },
      workers: { type: 'string', default: '1,2' },
      protocols: { type: 'string', default: 'tcp,http' },
      peer: { type: 'string', default: 'haproxy' },
      seconds: { type: 'string', default: '3' },
      warmup: { type: 'string', default: '1' },
      repeat: { type: 'string', default: '3' },
      backend: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false }
    }
  })
  if (values.help) {
    process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(3, 8).map(l => l.slice(3)).join('\n') + '\n')
    process.exit(0)
  }
  const list = text => text.split(',').map(s => s.trim()).filter(Boolean)
  const workers = list(values.workers).map(Number)
  if (workers.some(n => !Number.isInteger(n) || n < 1 || n > 64)) usage(`--workers ${values.workers}: expected counts 1 to 64, like 1,2`)
  const protocols = list(values.protocols)
  if (protocols.some(p => p !== 'tcp' && p !== 'http')) usage(`--protocols ${values.protocols}: expected tcp, http or both`)
  if (!['haproxy', 'none'].includes(values.peer)) usage(`--peer ${values.peer}: expected haproxy or none`)
  return {
    lilaPath: path.resolve(values.lila),
    workers,
    protocols,
    peer: values.peer === 'haproxy' && procs.which('haproxy') ? 'haproxy' : null,
    seconds: Number(values.seconds) || 3,
    warmup: Number(values.warmup) || 0,
    repeat: Math.max(1, Math.min(10, Number(values.repeat) || 1)),
    backend: values.backend || (procs.which('nginx') ? 'nginx' : 'node'),
    out: values.out || path.join(__dirname, 'RESULTS-workers.md')
  }
}

function usage (message) {
  process.stderr.write(`bench/workers.js: ${message}\n`)
  process.exit(2)
}

// The configurations measured, in order: per protocol, lila's then the peer's.
function configurations (opts) {
  const contenders = allContenders({ lilaPath: opts.lilaPath })
  const byName = name => contenders.find(c => c.name === name)
  const out = []
  for (const protocol of opts.protocols) {
    for (const n of opts.workers) {
      out.push({ protocol, contender: byName(`lila-${protocol}`), processes: n, label: n === 1 ? 'lila (one process)' : `lila --workers ${n}` })
    }
    if (opts.peer) {
      const threads = [...new Set([1, ...opts.workers.filter(n => n > 1)])]
      for (const t of threads) out.push({ protocol, contender: byName(`haproxy-${protocol}`), threads: t, label: `haproxy nbthread ${t}` })
    }
  }
  return out
}

async function measure ({ config, backends, dir, opts }) {
  const { contender, protocol, label } = config
  const missing = contender.missing()
  if (missing) return { protocol, label, error: missing }
  let lb
  try {
    const { processes, threads } = config
    lb = await contender.start({ backends: backends.addresses, mode: 'rr', dir, cpu: null, processes, threads })
  } catch (err) {
    return { protocol, label, error: `did not start: ${err.message.split('\n')[0]}` }
  }
  try {
    await get(lb.port, '/')
    const params = { tool: 'wrk', port: lb.port, urlPath: '/', connections: CONNECTIONS, cpu: null, dir, threads: WRK_THREADS }
    if (opts.warmup > 0) await runLoad({ ...params, seconds: opts.warmup })
    const before = treeCpuByProcess(lb.pid)
    const jiffies = cpuJiffies()
    const t0 = process.hrtime.bigint()
    const r = await runLoad({ ...params, seconds: opts.seconds })
    const wall = Number(process.hrtime.bigint() - t0) / 1000
    const after = treeCpuByProcess(lb.pid)
    const jiffiesAfter = cpuJiffies()
    const perProcess = [...after].map(([pid, us]) => ({ pid, us: us - (before.get(pid) || 0) }))
    const total = perProcess.reduce((a, p) => a + p.us, 0)
    const cores = jiffiesAfter.map((_, cpu) => busyPercent(jiffies, jiffiesAfter, cpu)).filter(v => v !== null)
    const m = {
      protocol,
      label,
      rps: r.rps,
      p99Ms: r.p99Ms,
      errors: r.non2xx + r.socketErrors,
      lbCores: total / wall, // in cores: 1.0 is one core busy all the time
      usPerReq: total / Math.max(1, r.requests),
      // lila --workers: each worker's share of the tree's CPU, and the primary's (lb.pid)
      split: perProcess.length > 1 ? perProcess.filter(p => p.pid !== lb.pid).map(p => p.us / total) : null,
      primaryShare: perProcess.length > 1 ? (perProcess.find(p => p.pid === lb.pid)?.us || 0) / total : null,
      machineBusy: cores.reduce((a, b) => a + b, 0) / Math.max(1, cores.length)
    }
    return m
  } catch (err) {
    return { protocol, label, error: err.message.split('\n')[0] }
  } finally {
    await lb.stop()
  }
}

function table (results) {
  const out = ['| protocol | balancer | req/s | p99 ms | errors | LB CPU (cores) | **LB CPU µs/req** | rounds: least–most | ' +
    '÷ one process | CPU split: workers (primary) | machine busy |', '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|']
  for (const r of results) {
    if (r.error) {
      out.push(`| ${r.protocol} | ${r.label} | not measured: ${r.error} | | | | | | | | |`)
      continue
    }
    const base = results.find(b => b.protocol === r.protocol && !b.error &&
      (r.label.startsWith('lila') ? b.label === 'lila (one process)' : b.label === 'haproxy nbthread 1'))
    const ratio = base && base !== r ? `${(r.usPerReq / base.usPerReq).toFixed(2)}×` : ''
    const split = r.split ? `${r.split.map(s => `${Math.round(100 * s)}%`).join(' / ')} (${Math.round(100 * r.primaryShare)}%)` : '—'
    out.push(`| ${r.protocol} | ${r.label} | ${Math.round(r.rps)} | ${r.p99Ms.toFixed(2)} | ${r.errors} | ${r.lbCores.toFixed(2)} | ` +
      `**${r.usPerReq.toFixed(1)}** | ${r.spread[0].toFixed(1)}–${r.spread[1].toFixed(1)} | ${ratio} | ${split} | ${Math.round(r.machineBusy)}% |`)
  }
  return out
}

async function main () {
  const opts = options()
  if (!procs.which('wrk')) usage('needs wrk (apt-get install wrk)')
  const backendProblem = backendMissing(opts.backend)
  if (backendProblem) usage(backendProblem)
  procs.installCleanup()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-workers-'))
  fs.chmodSync(dir, 0o755)
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  const loadBefore = os.loadavg()[0]
  const started = Date.now()
  const backends = await startBackends({ kind: opts.backend, delays: [0, 0], dir, cpu: null })
  const results = []
  try {
    // Rounds: every configuration once per round. Each keeps its interval with the
    // least CPU per request (on a shared machine other jobs only add to it: they take
    // cores, and the balancer runs less batched).
    const configs = configurations(opts)
    const rounds = configs.map(() => [])
    for (let round = 1; round <= opts.repeat; round++) {
      for (const [i, config] of configs.entries()) {
        const r = await measure({ config, backends, dir, opts })
        rounds[i].push(r)
        process.stderr.write(`round ${round}: ` + (r.error
          ? `${r.protocol} ${r.label}: ${r.error}\n`
          : `${r.protocol} ${r.label}: ${Math.round(r.rps)} req/s, ${r.usPerReq.toFixed(1)} µs/req, ${r.lbCores.toFixed(2)} cores\n`))
        await procs.sleep(200)
      }
    }
    for (const runs of rounds) {
      const ok = runs.filter(r => !r.error)
      if (ok.length === 0) { results.push(runs[0]); continue }
      const best = ok.reduce((a, b) => b.usPerReq < a.usPerReq ? b : a)
      results.push({ ...best, spread: [Math.min(...ok.map(r => r.usPerReq)), Math.max(...ok.map(r => r.usPerReq))] })
    }
  } finally {
    await backends.stop()
  }
  const git = procs.runSync(['git', '-C', path.dirname(opts.lilaPath), 'rev-parse', '--short', 'HEAD'])
  const text = ['# lila on all cores: --workers', '',
    `- Date: ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}`,
    `- Machine: ${os.cpus()[0].model.trim()}, ${os.cpus().length} cores, Linux ${os.release()}; Node ${process.version}`,
    `- lila: ${path.relative(process.cwd(), opts.lilaPath) || opts.lilaPath}${git.code === 0 ? ` (commit ${git.out.trim()})` : ''}`,
    `- Run: W1's shape (keep-alive, 5-byte bodies, ${CONNECTIONS} connections, round-robin), wrk with ${WRK_THREADS} threads, ` +
      `${opts.backend} backends; ${opts.warmup} s warm-up + ${opts.seconds} s measured, best of ${opts.repeat} rounds; ` +
      `nothing pinned: balancer, load generator and backends share all ${os.cpus().length} cores; took ${Math.round((Date.now() - started) / 1000)} s`,
    `- Machine load: ${loadBefore.toFixed(2)} before, ${os.loadavg()[0].toFixed(2)} after (1-minute load average)`,
    '',
    '**LB CPU µs/req**: CPU time of the balancer\'s whole process tree (lila\'s primary and workers) over the requests ' +
      'completed. **LB CPU (cores)**: that CPU time over wall time. **CPU split**: each worker\'s share of it, and the ' +
      'primary\'s (which serves no traffic). **machine busy**: all cores, everything running.', '',
    ...table(results), ''].join('\n')
  process.stdout.write(text + '\n')
  fs.writeFileSync(opts.out, text + '\n')
  process.stderr.write(`written to ${path.relative(process.cwd(), opts.out)}\n`)
}

main().catch(err => {
  process.stderr.write(`bench/workers.js: ${err && err.stack}\n`)
  procs.killAll()
  process.exit(1)
})
