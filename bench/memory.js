#!/usr/bin/env node
'use strict'

// Memory and start-up probes for lila.
//
//   node bench/memory.js [--lila PATH] [--count 10000]
//
// Memory: `count` idle connections proxied through lila tcp (and, once lila has it,
// `count` idle keep-alive clients through lila http, each after one request). Reported
// as KiB of lila's RSS (VmRSS) per connection above its RSS once warmed up and idle.
// The clients and the backend live in two helper processes ("holders", this file with
// --holder), so that only lila needs two sockets per connection and this process's
// fd limit and memory are not involved. lila and the holders are started through
// `sh -c 'ulimit -n 65536; exec ...'`, since a process cannot raise another's limit.
//
// Start-up: median wall time of `lila --version` against `node -e 0`.

const net = require('net')
const path = require('path')
const { spawnSync } = require('child_process')
const procs = require('./procs')
const { treeRssKiB } = require('./cpu')

const FD_LIMIT = 65536
const OPEN_CONCURRENCY = 200 // connections being set up at once (under lila's backlog of 511)
const WARM_CONNECTIONS = 200 // opened and closed first, so code warm-up is not counted
const SETTLE_MS = 2000
const STARTUP_RUNS = 21

async function probe ({ lilaPath, count = 10000 }) {
  const lines = []
  // lila tcp holds a client and a backend socket per connection; a hundred more for
  // everything else.
  const need = 2 * count + 100
  const hard = hardFdLimit()
  const limit = Math.min(FD_LIMIT, hard)
  let n = count
  if (limit < need) {
    n = Math.floor((limit - 100) / 2)
    lines.push(`fd limit: ${count} connections need \`ulimit -n\` ≥ ${need} for lila; the hard limit here is ${hard} ` +
      'and cannot be raised from inside (raise it with `ulimit -Hn` as root, /etc/security/limits.conf or ' +
      `the container's nofile limit), so ${n} connections were used`)
  }
  if (n < 1000) {
    lines.push('memory: not measured: too few file descriptors for a meaningful figure')
  } else {
    lines.push(await memoryProbe({ lilaPath, count: n, protocol: 'tcp' }))
    lines.push(await memoryProbe({ lilaPath, count: n, protocol: 'http' }))
  }
  lines.push(startupProbe(lilaPath))
  return lines
}

function hardFdLimit () {
  const text = procs.runSync(['sh', '-c', 'ulimit -Hn']).out.trim()
  return text === 'unlimited' ? Infinity : Number(text) || 1024
}

async function memoryProbe ({ lilaPath, count, protocol }) {
  const label = `lila ${protocol}`
  let backend = null
  let clients = null
  let lila = null
  try {
    backend = await startHolder()
    clients = await startHolder()
    const http = protocol === 'http'
    const { port: backendPort } = await backend.ask({ cmd: 'backend', http })
    const liveOnBackend = async () => (await backend.ask({ cmd: 'stats' })).live
    const argv = [...procs.lilaArgv(lilaPath), 'round-robin', `127.0.0.1:${backendPort}`, '--host', '127.0.0.1', '--port', '0']
    if (protocol !== 'tcp') argv.push('--protocol', protocol)
    try {
      lila = await procs.start(argv, { cpu: 0, ulimitN: FD_LIMIT, ready: /listening on 127\.0\.0\.1:(\d+)/ })
    } catch (err) {
      return `${label}: not measured: did not start: ${err.message.split('\n')[0]}`
    }
    const port = Number(lila.ready[1])

    // Warm up, then let it go idle and take the baseline.
    await clients.ask({ cmd: 'open', port, count: WARM_CONNECTIONS, http }, 60000)
    if (!http) await until(async () => await liveOnBackend() >= WARM_CONNECTIONS, 10000).catch(() => {})
    await clients.ask({ cmd: 'closeAll' })
    if (!http) await until(async () => await liveOnBackend() === 0, 10000)
    await procs.sleep(SETTLE_MS)
    const idleKiB = treeRssKiB(lila.pid)

    const t0 = Date.now()
    const opened = await clients.ask({ cmd: 'open', port, count, http }, 120000)
    if (opened.failed > 0) return `${label}: ${opened.failed} of ${count} connections failed (${opened.firstError}); not measured`
    // tcp: a client is only proxied once lila has connected it to the backend.
    // tcp: a client counts once lila has connected it through to the backend.
    if (!http) {
      await until(async () => await liveOnBackend() >= count, 30000).catch(async err => {
        throw new Error(`${err.message} (${await liveOnBackend()} of ${count}; lila says: ${procs.tail(lila.output())})`)
      })
    }
    await procs.sleep(SETTLE_MS)
    const loadedKiB = treeRssKiB(lila.pid)
    const perConn = (loadedKiB - idleKiB) / count
    const what = http
      ? `${count} idle keep-alive clients (one request each)`
      : `${count} idle proxied connections (${2 * count} sockets in lila)`
    return `${label}: ${what}: RSS ${mib(idleKiB)} idle → ${mib(loadedKiB)}, **${perConn.toFixed(1)} KiB per connection** ` +
      `(set up in ${((Date.now() - t0) / 1000).toFixed(1)} s)`
  } catch (err) {
    return `${label}: not measured: ${err.message.split('\n')[0]}`
  } finally {
    if (lila) await lila.stop()
    if (clients) await clients.stop()
    if (backend) await backend.stop()
  }
}

function mib (kib) {
  return `${(kib / 1024).toFixed(1)} MiB`
}

async function until (check, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await procs.sleep(100)
  }
  throw new Error(`connections did not reach the expected count on the backend within ${timeoutMs} ms`)
}

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

// ---- Holders: the clients, or the backend, in a process of their own ------------------

async function startHolder () {
  const handle = await procs.start(['node', __filename, '--holder'], {
    cpu: 1, ulimitN: FD_LIMIT, ipc: true, ready: /holder ready/
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
  let live = 0 // backend connections open now
  const HELLO = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello'

  const handlers = {
    // A backend that holds tcp connections open, or answers each request (http).
    backend ({ http }) {
      return new Promise(resolve => {
        const server = net.createServer(socket => {
          live++
          socket.on('error', () => {})
          socket.on('close', () => live--)
          if (http) {
            let buf = ''
            socket.setEncoding('latin1')
            socket.on('data', d => {
              buf += d
              for (let i; (i = buf.indexOf('\r\n\r\n')) !== -1;) {
                buf = buf.slice(i + 4)
                socket.write(HELLO)
              }
            })
          }
        })
        server.listen(0, '127.0.0.1', () => resolve({ port: server.address().port }))
      })
    },
    // Open `count` connections to lila, OPEN_CONCURRENCY at a time; for http send one
    // request on each and wait for its response. The connections then stay idle.
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
          socket.on('close', () => finish(new Error('closed by lila')))
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
    stats: () => ({ live, clients: clients.length }),
    closeAll () {
      for (const s of clients.splice(0)) s.destroy()
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

module.exports = { probe }

if (require.main === module) {
  if (process.argv.includes('--holder')) {
    holder()
  } else {
    const { parseArgs } = require('util')
    const { values } = parseArgs({
      options: {
        lila: { type: 'string', default: path.join(__dirname, '..', 'lila') },
        count: { type: 'string', default: '10000' }
      }
    })
    procs.installCleanup()
    probe({ lilaPath: path.resolve(values.lila), count: Number(values.count) }).then(lines => {
      for (const line of lines) process.stdout.write(`- ${line}\n`)
    })
  }
}
