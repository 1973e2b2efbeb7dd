'use strict'

// The chaos bench: what clients lose through lila, beside HAProxy, while backends are
// killed, the balancer reloads or is replaced, on a busy machine. Each cell is a fresh
// pair of Node backends (chaos-backend.js), a fresh balancer in front of them, one
// client tool for SECONDS, and one kind of fault from the first second on:
//
//   kill      backend A killed with SIGKILL and started again on its port, every 2 s
//   reload    lila: SIGHUP every 2 s; HAProxy: USR2 to its master (a reload)
//   upgrade   lila: `lila upgrade --pid-file`, one after another; HAProxy: USR2 (its
//             master starts the new executable on the listeners: its upgrade too)
//
// The workloads (rows): HTTP/2 and HTTP/1.1 clients to HTTP/2 and to HTTP/1.1 backends
// (h2load -c10 -m10 h2c; wrk -c10 keep-alive), gRPC unary calls (ghz -c20, 4
// connections; again with lila's --retry-on reset, the calls said to be safe to run
// twice) and tcp mode with a connection per request (wrk, Connection: close; again
// with lila's --retry-on reset).
// Each cell says `failed / cut of total`: failed as the client counted it (h2load's
// failed and errored streams and non-2xx answers, wrk's socket errors and non-2xx,
// ghz's calls not OK); cut as the balancer logged it (lila's `response cut` lines,
// HAProxy's termination states SD and PD: an answer cut after it began, which HAProxy
// passes to an HTTP/2 client as complete when its length was not said). The busy
// machine is `stress-ng --cpu 2` for the whole run (--no-stress: none), beside whatever
// else runs; the 1-minute load average at each cell's end is printed.
//
// (Every cell's lila runs from a config file, which SIGHUP reloads: started without
// one, lila has nothing to reload and SIGHUP ends it.)
//
//   node bench/chaos.js [--seconds 6] [--runs 1] [--only h2-h2,grpc,grpc-reset] [--faults kill]
//                       [--lila ./lila] [--no-haproxy] [--no-stress] [--out FILE]
//
// Writes bench/RESULTS-chaos.md (or --out) and prints the same.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn, spawnSync } = require('child_process')
const { parseArgs } = require('util')
const procs = require('./procs')
const { ghzPath } = require('./loadgen')

const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '6' },
    runs: { type: 'string', default: '1' },
    only: { type: 'string', default: '' },
    faults: { type: 'string', default: 'kill,reload,upgrade' },
    lila: { type: 'string', default: path.join(__dirname, '..', 'lila') },
    'no-haproxy': { type: 'boolean', default: false },
    'no-stress': { type: 'boolean', default: false },
    out: { type: 'string', default: path.join(__dirname, 'RESULTS-chaos.md') }
  }
})
const SECONDS = Number(opts.seconds)
const RUNS = Number(opts.runs)
const LILA = path.resolve(opts.lila)
const EVERY_MS = 2000
const HEALTH_PROTO = path.join(__dirname, '..', 'test', 'fixtures', 'proto', 'health.proto')

const WORKLOADS = [
  { id: 'h2-h2', title: 'HTTP/2 clients, HTTP/2 backends', client: 'h2load', backend: 'h2', protocol: 'http' },
  { id: 'h1-h2', title: 'HTTP/1.1 clients, HTTP/2 backends', client: 'wrk', backend: 'h2', protocol: 'http' },
  { id: 'h2-h1', title: 'HTTP/2 clients, HTTP/1.1 backends', client: 'h2load', backend: 'h1', protocol: 'http' },
  { id: 'h1-h1', title: 'HTTP/1.1 clients, HTTP/1.1 backends', client: 'wrk', backend: 'h1', protocol: 'http' },
  { id: 'grpc', title: 'gRPC unary calls (ghz)', client: 'ghz', backend: 'grpc', protocol: 'grpc' },
  // lila told that the calls may run twice (HAProxy's config is the same in both rows).
  {
    id: 'grpc-reset',
    title: 'gRPC unary calls (ghz), lila `--retry-on 502,503,reset`',
    client: 'ghz',
    backend: 'grpc',
    protocol: 'grpc',
    lila: { 'retry-on': '502,503,reset' }
  },
  { id: 'tcp', title: 'tcp mode, a connection per request', client: 'wrk-close', backend: 'h1', protocol: 'tcp' },
  // lila told that a client's bytes may go twice: resent after a reset before any answer.
  {
    id: 'tcp-reset',
    title: 'tcp mode, a connection per request, lila `--retry-on reset`',
    client: 'wrk-close',
    backend: 'h1',
    protocol: 'tcp',
    lila: { 'retry-on': 'reset' }
  }
]
const FAULTS = ['kill', 'reload', 'upgrade']

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const loadAverage = () => Number(fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0])
const readPid = file => { try { return Number(fs.readFileSync(file, 'utf8')) } catch { return 0 } }
const signal = (pid, name) => { try { process.kill(pid, name) } catch {} }
// What this bench started outside procs.start (balancers, stress-ng): killed at exit.
const groups = new Set()
process.on('exit', () => { for (const pid of groups) signal(-pid, 'SIGKILL') })

// ---- backends ------------------------------------------------------------------------

async function startBackend (kind, port) {
  return procs.start(['node', path.join(__dirname, 'chaos-backend.js'), kind, String(port)], { ready: /ready/, timeoutMs: 20000 })
}

// ---- balancers -----------------------------------------------------------------------

// lila in front of `backends` for workload `w`, from a config file (SIGHUP reloads
// one; each reload changes backend A's weight, 1 <-> 2): { port, fault(kind), settle(),
// cuts(), stop() }.
async function startLila (w, backends, dir) {
  const port = await procs.freePort()
  const pidFile = path.join(dir, 'lila.pid')
  const configFile = path.join(dir, 'lila.json')
  const config = weight => JSON.stringify({
    'log-level': 'warn',
    'pid-file': pidFile,
    listeners: [{
      host: '127.0.0.1',
      port,
      protocol: w.protocol,
      mode: 'round-robin',
      'check-interval': '500ms',
      ...(w.protocol === 'http' && w.backend === 'h2' ? { 'backend-protocol': 'h2' } : {}),
      ...w.lila,
      backends: [`${backends[0]},weight=${weight}`, backends[1]]
    }]
  })
  let weight = 1
  fs.writeFileSync(configFile, config(weight))
  const child = spawn(LILA, ['--config', configFile], { stdio: ['ignore', 'ignore', 'pipe'], detached: true })
  groups.add(child.pid)
  let err = ''
  child.stderr.on('data', chunk => { err += chunk })
  await until(() => /listening on/.test(err) && readPid(pidFile) > 0, () => `lila to listen: ${err}`)
  let upgrading = null
  return {
    port,
    async fault (kind) {
      if (kind === 'reload') {
        weight = 3 - weight
        fs.writeFileSync(configFile, config(weight))
        signal(readPid(pidFile), 'SIGHUP')
        return true
      }
      // An upgrade takes seconds (a Node start, the backends' check, a second of both):
      // the next one starts when the last is over.
      if (upgrading !== null) return false
      upgrading = procs.run([LILA, 'upgrade', '--pid-file', pidFile], 60000).catch(() => {}).finally(() => { upgrading = null })
      return true
    },
    async settle () { if (upgrading !== null) await upgrading },
    cuts: () => (err.match(/response cut/g) || []).length,
    log: () => err,
    stop () {
      if (process.env.CHAOS_LOG) fs.appendFileSync(process.env.CHAOS_LOG, err)
      signal(readPid(pidFile), 'SIGKILL') // the last upgrade's lila, in a session of its own
      signal(-child.pid, 'SIGKILL')
      groups.delete(child.pid)
    }
  }
}

// HAProxy 2.6 as the issue ran it: master-worker (USR2 reloads it, the listeners handed
// over by the master), retries on every retryable error, redispatch, checks every
// 500 ms; h2 to HTTP/2 backends; it logs only what did not end normally.
async function startHaproxy (w, backends, dir) {
  const port = await procs.freePort()
  const conf = path.join(dir, 'haproxy.cfg')
  const http = w.protocol !== 'tcp'
  const proto = w.backend === 'h1' ? '' : ' proto h2'
  fs.writeFileSync(conf, `global
  maxconn 4096
  log stdout format raw local0
  stats socket ${path.join(dir, 'haproxy.sock')} mode 600 level admin expose-fd listeners
defaults
  mode ${http ? 'http' : 'tcp'}
  log global
  option ${http ? 'httplog' : 'tcplog'}
  option dontlog-normal
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  retries 3
${http ? '  retry-on all-retryable-errors\n' : ''}  option redispatch
frontend fe
  bind 127.0.0.1:${port}
  default_backend be
backend be
  balance roundrobin
${backends.map((b, i) => `  server s${i} ${b}${proto} check inter 500ms`).join('\n')}
`)
  const child = spawn(procs.which('haproxy'), ['-W', '-db', '-f', conf], { stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  groups.add(child.pid)
  let out = ''
  child.stdout.on('data', chunk => { out += chunk })
  child.stderr.on('data', chunk => { out += chunk })
  await until(() => /Loading success/.test(out), () => `haproxy to start: ${out}`)
  return {
    port,
    async fault () {
      signal(child.pid, 'SIGUSR2')
      return true
    },
    async settle () {},
    // Termination states: an answer the server (S) or HAProxy (P) cut during its data.
    cuts: () => (out.match(/ [SP]D[-\w]{2} /g) || []).length,
    log: () => out,
    stop () {
      signal(-child.pid, 'SIGKILL')
      groups.delete(child.pid)
    }
  }
}

// ---- clients -------------------------------------------------------------------------

// Run the client of `w` against `port` for SECONDS: { total, failed }.
async function runClient (w, port, dir) {
  const url = `http://127.0.0.1:${port}/`
  const timeout = (SECONDS + 60) * 1000
  if (w.client === 'h2load') {
    const out = await procs.run(['h2load', '-c10', '-m10', '-D', String(SECONDS), url], timeout)
    const r = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out)
    const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out)
    if (r === null || codes === null) throw new Error(`h2load: ${procs.tail(out)}`)
    // h2load counts a non-2xx answer as succeeded: it is a failure here.
    return { total: Number(r[3]), failed: Number(r[5]) + Number(r[6]) + Number(codes[3]) + Number(codes[4]) }
  }
  if (w.client === 'wrk' || w.client === 'wrk-close') {
    const argv = ['wrk', '-t1', '-c10', '-d', `${SECONDS}s`, url]
    if (w.client === 'wrk-close') argv.push('-H', 'Connection: close')
    const out = await procs.run(argv, timeout)
    const total = /(\d+) requests in/.exec(out)
    if (total === null) throw new Error(`wrk: ${procs.tail(out)}`)
    const sockets = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
    const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out)
    const errors = sockets === null ? 0 : sockets.slice(1).reduce((a, b) => a + Number(b), 0)
    return { total: Number(total[1]) + errors, failed: errors + (non2xx === null ? 0 : Number(non2xx[1])) }
  }
  const report = path.join(dir, 'ghz.json')
  // ghz's exit code says nothing of the calls: the report does.
  await procs.run([ghzPath(), '--insecure', '--proto', HEALTH_PROTO, '--call', 'grpc.health.v1.Health/Check', '-d', '{}',
    '-c', '20', '--connections', '4', '-z', `${SECONDS}s`, '--duration-stop', 'wait', '-t', '5s', '-O', 'json', '-o', report, `127.0.0.1:${port}`], timeout).catch(() => {})
  const r = JSON.parse(fs.readFileSync(report, 'utf8'))
  const codes = r.statusCodeDistribution || {}
  const all = Object.values(codes).reduce((a, b) => a + b, 0)
  const how = Object.entries(codes).filter(([code]) => code !== 'OK').map(([code, n]) => `${code} ${n}`)
  if (process.env.CHAOS_DEBUG) process.stderr.write(`ghz: ${JSON.stringify(r.errorDistribution)}\n`)
  return { total: all, failed: all - (codes.OK || 0), how: how.join(', ') }
}

// ---- one cell ------------------------------------------------------------------------

async function cell (w, fault, lb) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-chaos-'))
  const ports = [await procs.freePort(), await procs.freePort()]
  const backends = [await startBackend(w.backend, ports[0]), await startBackend(w.backend, ports[1])]
  const addresses = ports.map(p => `127.0.0.1:${p}`)
  const balancer = await (lb === 'lila' ? startLila : startHaproxy)(w, addresses, dir)
  let faults = 0
  const state = { running: true }
  const chaos = (async () => {
    await sleep(1000)
    while (state.running) {
      const began = Date.now()
      if (fault === 'kill') {
        backends[0].child.kill('SIGKILL')
        faults++
        backends[0] = await startBackend(w.backend, ports[0])
      } else if (await balancer.fault(fault)) {
        faults++
      }
      await sleep(Math.max(0, EVERY_MS - (Date.now() - began)))
    }
  })()
  try {
    const result = await runClient(w, balancer.port, dir)
    state.running = false
    await chaos
    await balancer.settle()
    return { ...result, cut: balancer.cuts(), faults, load: loadAverage() }
  } finally {
    state.running = false
    balancer.stop()
    for (const b of backends) b.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function until (check, what, ms = 30000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (check()) return
    await sleep(20)
  }
  throw new Error(`timed out waiting for ${what()}`)
}

// ---- the run -------------------------------------------------------------------------

function missing (w) {
  if (w.client === 'h2load' && !procs.which('h2load')) return 'h2load is not installed'
  if (w.client.startsWith('wrk') && !procs.which('wrk')) return 'wrk is not installed'
  if (w.client === 'ghz' && !ghzPath()) return 'ghz is not installed'
  return null
}

const thousands = n => n.toLocaleString('en-US')

function cellText (runs) {
  if (runs.length === 0) return 'n/a'
  const failed = runs.map(r => r.failed)
  const total = runs.reduce((a, r) => a + r.total, 0)
  const cut = runs.reduce((a, r) => a + r.cut, 0)
  const loads = runs.map(r => r.load)
  const load = `load ${Math.min(...loads).toFixed(1)}${runs.length > 1 ? `–${Math.max(...loads).toFixed(1)}` : ''}`
  const faults = runs.reduce((a, r) => a + r.faults, 0)
  const each = runs.length > 1 ? ` (${failed.join(',')})` : ''
  return `**${failed.reduce((a, b) => a + b, 0)}**${each} / ${cut} of ${thousands(total)}; ${faults} faults, ${load}`
}

async function main () {
  procs.installCleanup()
  const workloads = WORKLOADS.filter(w => opts.only === '' || opts.only.split(',').includes(w.id))
  const faults = opts.faults.split(',').filter(f => FAULTS.includes(f))
  const lbs = opts['no-haproxy'] || !procs.which('haproxy') ? ['lila'] : ['lila', 'haproxy']
  let stress = null
  if (!opts['no-stress'] && procs.which('stress-ng')) {
    stress = spawn('stress-ng', ['--cpu', '2'], { stdio: 'ignore', detached: true })
    groups.add(stress.pid)
    await sleep(2000)
  }
  const results = {}
  const skipped = []
  try {
    for (const w of workloads) {
      const why = missing(w)
      if (why !== null) {
        skipped.push(`${w.title}: ${why}`)
        continue
      }
      for (const fault of faults) {
        for (const lb of lbs) {
          const key = `${w.id} ${fault} ${lb}`
          results[key] = []
          for (let i = 0; i < RUNS; i++) {
            const r = await cell(w, fault, lb)
            results[key].push(r)
            process.stderr.write(`${key} #${i + 1}: ${r.failed} failed${r.how ? ` (${r.how})` : ''}, ${r.cut} cut of ${r.total}, ` +
              `${r.faults} faults, load ${r.load}\n`)
          }
        }
      }
    }
  } finally {
    if (stress !== null) try { process.kill(-stress.pid, 'SIGKILL') } catch {}
  }
  const haproxy = lbs.includes('haproxy') ? spawnSync(procs.which('haproxy'), ['-v'], { encoding: 'utf8' }).stdout.split('\n')[0] : 'no HAProxy'
  const lines = [
    '# Chaos bench results', '',
    `\`node bench/chaos.js --seconds ${SECONDS} --runs ${RUNS}${opts.only ? ` --only ${opts.only}` : ''} --faults ${faults.join(',')}\`, ` +
      `${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores, Node ${process.version}, ${haproxy}` +
      `${stress === null ? ', no stress-ng' : ', beside `stress-ng --cpu 2`'}.`, '',
    'A cell: **failed** (each run\'s, when several) / cut of requests, the faults made, the 1-minute load average at the ' +
      'cells\' ends. Failed is what the client counted; cut is what the balancer logged as an answer cut after it began ' +
      '(lila `response cut`; HAProxy `SD`/`PD`, which it passes to an HTTP/2 client as complete). See ' +
      '[docs/reliability.md](../docs/reliability.md#the-chaos-bench).', '',
    `| workload | ${faults.flatMap(f => lbs.map(lb => `${f}: ${lb}`)).join(' | ')} |`,
    `|---|${faults.flatMap(() => lbs.map(() => '---')).join('|')}|`
  ]
  for (const w of workloads) {
    if (!faults.some(f => results[`${w.id} ${f} lila`])) continue
    lines.push(`| ${w.title} | ${faults.flatMap(f => lbs.map(lb => cellText(results[`${w.id} ${f} ${lb}`] || []))).join(' | ')} |`)
  }
  if (skipped.length > 0) lines.push('', `Skipped: ${skipped.join('; ')}.`)
  const text = lines.join('\n') + '\n'
  fs.writeFileSync(opts.out, text)
  process.stdout.write(text)
}

main().catch(err => {
  process.stderr.write(`chaos: ${err.stack || err.message}\n`)
  procs.killAll()
  process.exit(1)
})
