'use strict'

// Upgrades and reloads under load, lila against HAProxy, on the same load: wrk over
// keep-alive, wrk with a connection per request (Connection: close) and h2load (h2c, in
// rounds of a second), all at once, while the balancer is replaced N times in a row,
// one replacement at least a second after the last began. What each client counted:
// socket errors (connect: refused; read: a connection cut), non-2xx answers, failed
// HTTP/2 requests.
//
//   node bench/upgrades.js [--upgrades 10] [--only lila,haproxy-x]
//
// Contenders:
//   lila            lila upgrade --pid-file (a new lila on the same sockets)
//   lila-restart    SIGTERM, then lila started again on the same port: what an upgrade
//                   was before `lila upgrade`
//   haproxy-x       haproxy -D -sf OLD -x SOCKET (the listeners passed over the stats
//                   socket, expose-fd listeners), HAProxy's seamless reload
//   haproxy-sf      haproxy -D -sf OLD (the new process binds again: SO_REUSEPORT)
// Writes bench/RESULTS-upgrades.md.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { parseArgs } = require('util')
const { spawn, spawnSync } = require('child_process')
const procs = require('./procs')
const { startWrk, startH2load, startH2Connections } = require('../test/fixtures/upgrade')

const ROOT = path.join(__dirname, '..')
const LILA = path.join(ROOT, 'lila')

const { values: opts } = parseArgs({
  options: {
    upgrades: { type: 'string', default: '10' },
    only: { type: 'string', default: 'lila,lila-restart,haproxy-x,haproxy-sf' }
  }
})
const UPGRADES = Number(opts.upgrades)
const SPACING_MS = 1000

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const alive = pid => { try { process.kill(pid, 0); return true } catch { return false } }

// Poll `check` every 10 ms for up to `ms`.
async function until (check, what, ms = 30000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const value = await check()
    if (value) return value
    await sleep(10)
  }
  throw new Error(`timed out waiting for ${what}`)
}

const readPid = file => { try { return Number(fs.readFileSync(file, 'utf8')) } catch { return 0 } }

function lila (dir, backends, { restart = false } = {}) {
  const pidFile = path.join(dir, 'lila.pid')
  let port = 0
  const started = []
  const run = async () => {
    const child = spawn(LILA, ['rr', ...backends, '--protocol', 'http', '--host', '127.0.0.1', '--port', String(port),
      '--check', 'none', '--pid-file', pidFile, '--log-level', 'warn'], { stdio: ['ignore', 'ignore', 'pipe'], detached: true })
    let err = ''
    child.stderr.on('data', chunk => { err += chunk })
    started.push(child.pid)
    const line = await until(() => /listening on 127\.0\.0\.1:(\d+)/.exec(err), `lila to listen:\n${err}`)
    port = Number(line[1])
    child.stderr.resume()
  }
  return {
    name: restart ? 'lila-restart' : 'lila',
    how: restart ? 'SIGTERM, then started again on the port' : 'lila upgrade --pid-file (a new lila on the same sockets)',
    start: async () => { await run(); return port },
    async replace () {
      const old = readPid(pidFile)
      if (restart) {
        process.kill(old, 'SIGTERM')
        await until(() => !alive(old), 'the old lila to exit', 120000)
        return run()
      }
      await procs.run([LILA, 'upgrade', '--pid-file', pidFile], 60000)
      await until(() => readPid(pidFile) !== old, 'the PID file to name the new lila')
    },
    stop () {
      for (const pid of [readPid(pidFile), ...started]) try { process.kill(pid, 'SIGKILL') } catch {}
    }
  }
}

function haproxy (dir, backends, { transfer }) {
  const conf = path.join(dir, 'haproxy.cfg')
  const pidFile = path.join(dir, 'haproxy.pid')
  const socket = path.join(dir, 'haproxy.sock')
  const bin = procs.which('haproxy')
  let port = 0
  const pids = new Set()
  const launch = (extra = []) => {
    const result = spawnSync(bin, ['-f', conf, '-D', '-p', pidFile, ...extra], { encoding: 'utf8' })
    if (result.status !== 0) throw new Error(`haproxy: ${result.stderr}`)
    pids.add(readPid(pidFile))
  }
  return {
    name: transfer ? 'haproxy-x' : 'haproxy-sf',
    how: transfer ? 'haproxy -D -sf OLD -x SOCKET (expose-fd listeners)' : 'haproxy -D -sf OLD (binds again, SO_REUSEPORT)',
    missing: bin === null ? 'haproxy is not installed' : null,
    async start () {
      port = await procs.freePort()
      fs.writeFileSync(conf, `global
  maxconn 4096
  stats socket ${socket} mode 600 level admin expose-fd listeners
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
  http-reuse always
frontend fe
  bind 127.0.0.1:${port}
  default_backend be
backend be
  balance roundrobin
${backends.map((b, i) => `  server s${i} ${b}`).join('\n')}
`)
      launch()
      return port
    },
    async replace () {
      const old = readPid(pidFile)
      launch([...(transfer ? ['-x', socket] : []), '-sf', String(old)])
      await until(() => readPid(pidFile) !== old, 'the new haproxy')
    },
    stop () { for (const pid of pids) try { process.kill(pid, 'SIGKILL') } catch {} }
  }
}

async function measure (contender) {
  const port = await contender.start()
  const url = `http://127.0.0.1:${port}/`
  const loads = [startWrk(url), startWrk(url, ['-H', 'Connection: close']), startH2load(url), startH2Connections(url)]
  await sleep(SPACING_MS)
  const began = Date.now()
  const took = []
  let counted
  try {
    for (let i = 0; i < UPGRADES; i++) {
      const start = Date.now()
      await contender.replace()
      took.push(Date.now() - start)
      await sleep(Math.max(0, SPACING_MS - (Date.now() - start)))
    }
  } finally {
    counted = await Promise.all(loads.map(load => load.stop()))
    contender.stop()
  }
  const [keepAlive, perRequest, h2, h2Connections] = counted
  return { keepAlive, perRequest, h2, h2Connections, seconds: (Date.now() - began) / 1000, took }
}

const errors = ({ errors: e }) => e.connect + e.read + e.write + e.timeout
const wrkCell = w => {
  const kinds = Object.entries(w.errors).filter(([, n]) => n > 0).map(([kind, n]) => `${kind} ${n}`)
  return `${w.requests} / ${errors(w)}${kinds.length ? ` (${kinds.join(', ')})` : ''}${w.non2xx ? `, ${w.non2xx} non-2xx` : ''}`
}
const median = list => list.slice().sort((a, b) => a - b)[Math.floor(list.length / 2)]

async function main () {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-bench-upgrades-'))
  const backends = []
  for (const name of ['A', 'B']) {
    const handle = await procs.start(['node', path.join(__dirname, 'backend-server.js'), '--port', '0', '--name', name],
      { ready: /listening on (127\.0\.0\.1:\d+)/ })
    backends.push(handle.ready[1])
  }
  const all = [
    lila(dir, backends),
    lila(dir, backends, { restart: true }),
    haproxy(dir, backends, { transfer: true }),
    haproxy(dir, backends, { transfer: false })
  ].filter(c => opts.only.split(',').includes(c.name))
  const rows = []
  for (const contender of all) {
    if (contender.missing) {
      rows.push(`| ${contender.name} | ${contender.how} | not measured: ${contender.missing} | | | | |`)
      continue
    }
    process.stderr.write(`${contender.name}: ${UPGRADES} replacements under load...\n`)
    const r = await measure(contender)
    const h2Errors = Object.entries(r.h2Connections.errors).map(([code, n]) => `${code} ${n}`)
    const h2c = `${r.h2Connections.requests} / ${h2Errors.length ? h2Errors.join(', ') : 0}`
    rows.push(`| ${contender.name} | ${contender.how} | ${wrkCell(r.keepAlive)} | ${wrkCell(r.perRequest)} | ` +
      `${r.h2.succeeded} / ${r.h2.failed} | ${h2c} | ${median(r.took)} ms |`)
    process.stderr.write(`${rows[rows.length - 1]}\n`)
  }
  procs.killAll()
  const text = `# Upgrades under load

\`node bench/upgrades.js --upgrades ${UPGRADES}\`, ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores,
Node ${process.version}, ${spawnSync(procs.which('haproxy') || 'false', ['-v'], { encoding: 'utf8' }).stdout.split('\n')[0] || 'no HAProxy'}.
wrk (1 thread, 8 connections) over keep-alive and with \`Connection: close\`, and h2load
(h2c, 2 connections, 8 streams each, in rounds of a second), and 2 loops of Node
HTTP/2 clients opening a connection per request (h2load's timed mode does not count a
refused connection), all at once against the same two raw-socket backends, while the
balancer is replaced ${UPGRADES} times, one replacement at least ${SPACING_MS / 1000} s after the last
began. A cell is requests / errors: for wrk its socket errors (a refused connect shows
as a write error, a connection cut as a read error), for h2load the requests that
failed, for the HTTP/2 clients the errors by code. "replacement" is how long the
command took until the new process had taken over (the median).

| contender | replaced by | wrk keep-alive | wrk Connection: close | h2load | HTTP/2, a connection per request | replacement |
|---|---|---|---|---|---|---|
${rows.join('\n')}
`
  fs.writeFileSync(path.join(__dirname, 'RESULTS-upgrades.md'), text)
  process.stdout.write(text)
  fs.rmSync(dir, { recursive: true, force: true })
}

procs.installCleanup()
main()
