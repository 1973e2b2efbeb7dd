'use strict'

// lila's footprint against Node's own: start-up (hyperfine: `lila --version` and the
// time from start to listening, against `node -e 0` and a bare Node HTTP server), idle
// RSS (lila http in front of one backend against a bare Node HTTP server, each having
// served one request), and memory per idle keep-alive client (CLIENTS clients that each
// made one request and stay connected: RSS and, after a forced GC, V8's heap, before
// and after, per client; each RSS read once it settled, as memory.js reads it, cpu.js
// settledRssKiB). Linux (/proc), needs hyperfine.
//
//   node bench/startup.js [LILA=./lila] [--clients 5000] [--runs 30]

const { execFileSync } = require('child_process')
const http = require('http')
const net = require('net')
const fs = require('fs')
const path = require('path')
const { parseArgs } = require('util')
const procs = require('./procs')
const { settledRssKiB } = require('./cpu')

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: { clients: { type: 'string', default: '5000' }, runs: { type: 'string', default: '30' } }
})
const LILA = path.resolve(positionals[0] || path.join(__dirname, '..', 'lila'))
const EXIT = path.join(__dirname, 'exit-on-listen.js')
const PROBE = path.join(__dirname, 'memory-probe.js')
// A bare Node HTTP server: the floor a Node program starts from. It keeps idle clients
// as lila does (Node's default closes them after 5 s: the memory it then shows per
// client is what closed connections left behind).
const BARE = "const s = require('http').createServer((q, r) => r.end('hello')); s.keepAliveTimeout = 0; s.listen(0, '127.0.0.1', " +
  "() => process.stderr.write('listening on 127.0.0.1:' + s.address().port + '\\n'))"

// hyperfine's mean wall time and user + system time of each command, in ms; `env`
// added to the commands' environment.
function hyperfine (commands, env = {}) {
  const out = path.join(require('os').tmpdir(), `lila-startup-${process.pid}.json`)
  execFileSync('hyperfine', ['-N', '--warmup', '3', '--runs', flags.runs, '--export-json', out, ...commands],
    { stdio: 'ignore', env: { ...process.env, ...env } })
  const { results } = JSON.parse(fs.readFileSync(out, 'utf8'))
  fs.unlinkSync(out)
  return results.map(r => ({ command: r.command, mean: r.mean * 1000, cpu: (r.user + r.system) * 1000 }))
}

function rssKiB (pid) {
  return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1])
}

// A process started with up to 20,000 descriptors and memory-probe.js, once it says it
// listens.
let probes = 0
async function startListening (argv) {
  const probeFile = path.join(require('os').tmpdir(), `lila-startup-probe-${process.pid}-${++probes}.json`)
  const [node, ...rest] = argv
  const proc = await procs.startListening('sh', ['-c', 'ulimit -n 20000 2>/dev/null; exec "$@"', 'sh',
    node, '--expose-gc', '--require', PROBE, ...rest], { env: { ...process.env, LILA_MEMORY_PROBE: probeFile } })
  return { ...proc, probeFile }
}

// V8's heap in use (KiB) after a forced GC, from memory-probe.js in the process.
async function liveHeapKiB (proc) {
  const seq = Date.now()
  fs.writeFileSync(proc.probeFile, JSON.stringify({ seq, gc: true, maps: false, snapshot: null }))
  proc.child.kill('SIGWINCH')
  for (const deadline = Date.now() + 10000; Date.now() < deadline; await sleep(20)) {
    try {
      const answer = JSON.parse(fs.readFileSync(`${proc.probeFile}.out`, 'utf8'))
      if (answer.seq === seq) return answer.heapUsed / 1024
    } catch {}
  }
  throw new Error('the memory probe did not answer')
}

function get (port, agent) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent }, res => {
      res.resume()
      res.on('end', resolve)
    }).on('error', reject)
  })
}

const WARM_CONNECTIONS = 200
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// `count` clients, each sending one keep-alive request and reading its answer, then idle.
async function idleClients (port, count) {
  const sockets = []
  const request = Buffer.from('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
  for (let i = 0; i < count; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, count - i) }, () => new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(request))
      socket.once('data', () => resolve())
      socket.on('error', err => reject(new Error(`idle client ${sockets.length} of ${count} to port ${port}: ${err.message}`)))
      sockets.push(socket)
    })))
  }
  return sockets
}

async function main () {
  const lines = []
  const say = line => { lines.push(line); console.log(line) }

  // The floor of a start without a code cache: Node compiling lila's code (the bundle,
  // out of the comment that holds it in ./lila: scripts/bundle-loader.js) and running none
  // of it.
  const text = fs.readFileSync(LILA, 'latin1')
  const bundleLine = Number(/const BUNDLE_LINE = (\d+)/.exec(text)[1])
  const bundle = text.split('\n').slice(bundleLine - 1, -2).join('\n') // up to the loader's closing */ }
  const compileOnly = path.join(require('os').tmpdir(), `lila-compile-only-${process.pid}.js`)
  fs.writeFileSync(compileOnly, `'use strict'\nif (process.argv.length < 0) {\n${bundle}\n}\n`)
  const backend = http.createServer((req, res) => res.end('hello')).listen(0, '127.0.0.1')
  await new Promise(resolve => backend.once('listening', resolve))
  const target = `127.0.0.1:${backend.address().port}`
  const bareCommand = `node --require ${EXIT} -e "require('http').createServer().listen(0, '127.0.0.1')"`
  const lilaCommand = `node --require ${EXIT} ${LILA} rr ${target} --protocol http --host 127.0.0.1 --port 0 --check none`
  // lila's code cache in a folder of this run's, which hyperfine's warm-up runs write;
  // then without it (LILA_CODE_CACHE=off), as a first start is.
  const cacheDir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'lila-startup-cache-'))
  const [node0, compile, version, bareStart, lilaStart] = hyperfine(
    ['node -e 0', `node ${compileOnly}`, `${LILA} --version`, bareCommand, lilaCommand], { LILA_CODE_CACHE: cacheDir })
  const [node1, bareOff, lilaOff] = hyperfine(['node -e 0', bareCommand, lilaCommand], { LILA_CODE_CACHE: 'off' })
  fs.rmSync(cacheDir, { recursive: true, force: true })
  fs.unlinkSync(compileOnly)
  const signed = ms => `${ms < 0 ? '' : '+'}${ms.toFixed(1)} ms`
  const over = (r, base = node0) => `${signed(r.mean - base.mean)}, CPU ${signed(r.cpu - base.cpu)}`
  say(`lila --version: ${version.mean.toFixed(1)} ms (CPU ${version.cpu.toFixed(1)} ms) against node -e 0: ` +
    `${node0.mean.toFixed(1)} ms (CPU ${node0.cpu.toFixed(1)} ms): ${over(version)}; compiling lila's code ` +
    `and running none of it: ${over(compile)}`)
  say(`start to listening, with lila's code cache: lila ${lilaStart.mean.toFixed(1)} ms (CPU ` +
    `${lilaStart.cpu.toFixed(1)} ms) against node -e 0 in the same run: ${over(lilaStart)}; a bare Node HTTP ` +
    `server (the floor) ${over(bareStart)}; lila over the floor ${over(lilaStart, bareStart)}`)
  say(`start to listening, without the code cache: lila ${over(lilaOff, node1)} over node -e 0; a bare Node HTTP ` +
    `server ${over(bareOff, node1)}`)

  const bare = await startListening(['node', '-e', BARE])
  // --max-conn as memory.js gives it: by default lila serves half its descriptor limit
  // (two per client, as tcp needs), 9,968 at `ulimit -n 20000`, then closes its listening
  // socket for a second; the clients past it met ECONNREFUSED. An idle http client holds
  // one descriptor in lila, its backend connection being pooled.
  const lilaArgv = ['node', LILA, 'rr', target, '--protocol', 'http', '--host', '127.0.0.1',
    '--port', '0', '--check', 'none', '--max-conn', String(Number(flags.clients) + WARM_CONNECTIONS)]
  // lila as it runs every time but the first after an install: its code cache written
  // by a lila before it (a serving lila writes it 2 s after it started, once; the data
  // V8 hands over for it is garbage an idle lila keeps until a collection).
  const rssCache = fs.mkdtempSync(path.join(require('os').tmpdir(), 'lila-startup-cache-'))
  process.env.LILA_CODE_CACHE = rssCache
  const first = await startListening(lilaArgv)
  const cached = () => fs.readdirSync(rssCache).some(name => name.endsWith('.cache') &&
    fs.readFileSync(path.join(rssCache, name))[0] === 0x72) // written by a serving lila (bundle-loader.js)
  for (const deadline = Date.now() + 10000; !cached() && Date.now() < deadline;) await sleep(100)
  first.child.kill()
  const lila = await startListening(lilaArgv)
  await get(bare.port)
  await get(lila.port)
  await sleep(3000)
  const [bareRss, lilaRss] = [rssKiB(bare.child.pid), rssKiB(lila.child.pid)]
  say(`idle RSS, each having served one request: lila ${(lilaRss / 1024).toFixed(1)} MiB, a bare Node HTTP server ` +
    `${(bareRss / 1024).toFixed(1)} MiB: lila +${((lilaRss - bareRss) / 1024).toFixed(1)} MiB`)

  const count = Number(flags.clients)
  for (const [name, proc] of [['lila', lila], ['bare Node HTTP server', bare]]) {
    // Warm up first, as memory.js does (200 connections opened and closed): the first
    // connections compile the connection path and grow the young generation, a fixed
    // cost that would otherwise be divided among the clients.
    for (const socket of await idleClients(proc.port, WARM_CONNECTIONS)) socket.destroy()
    // RSS once it settled, before and with the clients: lila's idle collector
    // (cli/heap.js) gives the clients' garbage back 8 to 11 s after traffic stops, later
    // on a busy machine; a reading at a fixed 12 s sometimes came before it (6 KiB a
    // client instead of 2.5 to 4).
    const before = (await settledRssKiB(proc.child.pid)).kib
    const heapBefore = await liveHeapKiB(proc) // after a GC, as heapAfter
    const beforeGc = rssKiB(proc.child.pid)
    const sockets = await idleClients(proc.port, count)
    const { kib: after, seconds } = await settledRssKiB(proc.child.pid)
    const heapAfter = await liveHeapKiB(proc)
    const afterGc = rssKiB(proc.child.pid)
    const open = sockets.filter(socket => !socket.destroyed && socket.readyState === 'open').length
    say(`${count} idle keep-alive clients (one request each): ${name} ${((after - before) / count).toFixed(2)} KiB of ` +
      `RSS each (settled after ${Math.round(seconds)} s), ${((afterGc - beforeGc) / count).toFixed(2)} KiB after a forced GC; live heap ` +
      `${((heapAfter - heapBefore) / count).toFixed(2)} KiB each` + (open < count ? `; only ${open} still connected` : ''))
    for (const socket of sockets) socket.destroy()
    await sleep(500)
  }
  for (const proc of [bare, lila]) {
    proc.child.kill()
    for (const file of [proc.probeFile, `${proc.probeFile}.out`]) fs.rmSync(file, { force: true })
  }
  fs.rmSync(rssCache, { recursive: true, force: true })
  backend.close()
}

main().catch(err => {
  console.error(err.message)
  process.exit(1)
})
