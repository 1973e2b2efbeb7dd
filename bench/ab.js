'use strict'

// A/B of two lila executables on W1's shape (keep-alive, 5-byte body, 50 connections,
// rr), both at once: one Node backend each, wrk on both in the same interval, and each
// lila's CPU time per request read from /proc. On a shared machine the two suffer the
// same neighbours, so their ratio holds where two runs one after the other do not.
// Linux only (needs wrk and /proc). W3's shape: --body 1048576 --connections 8; either
// through lila's tcp mode: --protocol tcp; to h2c backends (Node's http2 servers, which
// end a stream a turn after its DATA): --backend-protocol h2; HTTP/2 clients (H1's
// shape, h2load -c10 -m10) in place of wrk: --client h2load, with --connections and
// --streams (P2h2's shape: --connections 8 --streams 1 --post 262144). --old-args and --new-args
// add options to one side only (the same executable twice: an option's cost, e.g.
// --fleet). --post BYTES: each request a POST with a body of that size (P1's, P2's shape).
// --close: a new client connection per request (wrk -H 'Connection: close'; W2's shape).
//
//   node bench/ab.js OLD_LILA NEW_LILA [rounds=6] [seconds=6]
//        [--protocol http|tcp] [--backend-protocol h1|h2] [--client wrk|h2load]
//        [--body BYTES] [--connections N] [--streams N] [--post BYTES] [--close]
//        [--old-args='OPTIONS'] [--new-args='OPTIONS']
//   -> per round: µs of CPU per request for each; the median NEW/OLD

const { spawn, execFileSync } = require('child_process')
const http = require('http')
const http2 = require('http2')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { parseArgs } = require('util')
const { startListening } = require('./procs')

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    protocol: { type: 'string', default: 'http' },
    'backend-protocol': { type: 'string', default: 'h1' },
    client: { type: 'string', default: 'wrk' },
    body: { type: 'string', default: '5' },
    connections: { type: 'string' }, // wrk's 50, h2load's 10 (W1's and H1's shapes)
    streams: { type: 'string', default: '10' },
    post: { type: 'string', default: '0' },
    close: { type: 'boolean', default: false },
    'old-args': { type: 'string', default: '' },
    'new-args': { type: 'string', default: '' }
  }
})
const [A, B, rounds = '6', seconds = '6'] = positionals
if (!A || !B) {
  console.error('usage: node bench/ab.js OLD_LILA NEW_LILA [rounds] [seconds] [--protocol http|tcp] [--backend-protocol h1|h2] ' +
    '[--client wrk|h2load] [--body BYTES] [--connections N] [--streams N] [--post BYTES] [--close] [--old-args=OPTIONS] [--new-args=OPTIONS]')
  process.exit(2)
}
const BODY = Buffer.alloc(Number(flags.body), 'a')
const H2 = flags['backend-protocol'] === 'h2'
const TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString())

const POST = Number(flags.post)

// The request body for --post: a file for h2load, a script for wrk; written once, in a
// folder of this run's own, before any client starts. (Rewritten per load, one shared
// file: a wrk starting while the other side's load truncated it read an empty script
// and sent GETs, a round's "35-45 µs per 256 KiB POST" with 3-5x the requests.)
let postArgs = null
function postArgv (h2) {
  if (postArgs === null) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-ab-'))
    const body = path.join(dir, 'post.bin')
    const script = path.join(dir, 'post.lua')
    fs.writeFileSync(body, Buffer.alloc(POST, 'p'))
    fs.writeFileSync(script, `wrk.method = "POST"\nwrk.body = string.rep("p", ${POST})\n`)
    postArgs = { dir, h2load: ['-d', body], wrk: ['-s', script] }
  }
  return h2 ? postArgs.h2load : postArgs.wrk
}

// utime + stime of a process, in seconds.
function cpuSeconds (pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) / TICKS
}

function startLila (exe, backend, extra) {
  const args = ['rr', backend, '--protocol', flags.protocol, '--host', '127.0.0.1', '--port', '0', '--check', 'none',
    ...extra.split(' ').filter(Boolean)]
  if (H2) args.push('--backend-protocol', 'h2')
  return startListening(exe, args)
}

// The requests one client run through `port` completed: wrk's, or h2load's succeeded.
function load (port, duration) {
  const url = `http://127.0.0.1:${port}/`
  const h2 = flags.client === 'h2load'
  const connections = flags.connections ?? (h2 ? '10' : '50')
  const argv = h2
    ? ['h2load', `-c${connections}`, `-m${flags.streams}`, '-D', String(duration)]
    : ['wrk', '-t1', `-c${connections}`, `-d${duration}s`]
  if (POST > 0) argv.push(...postArgv(h2))
  if (flags.close && !h2) argv.push('-H', 'Connection: close')
  argv.push(url)
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1))
    let out = ''
    child.stdout.on('data', chunk => { out += chunk })
    child.stderr.on('data', chunk => { out += chunk })
    // 'close', not 'exit': the process may exit before its output is all read.
    child.on('close', () => {
      const count = h2 ? /(\d+) succeeded/.exec(out) : /(\d+) requests in/.exec(out)
      if (count === null) return reject(new Error(`${argv[0]} said no count: ${out}`))
      // A round with errors is no measure: an error answer costs a fraction of a request.
      const errors = /(Non-2xx or 3xx responses: \d+|Socket errors: .*|\d+ failed, \d+ errored)/.exec(out)
      if (errors !== null && !/^0 failed, 0 errored/.test(errors[1])) console.log(`${argv[0]} on port ${port}: ${errors[1]}`)
      resolve(Number(count[1]))
    })
  })
}

async function main () {
  const servers = []
  for (let i = 0; i < 2; i++) {
    const server = (H2 ? http2.createServer : http.createServer)((req, res) => {
      req.resume() // a POST's body read and dropped
      req.on('end', () => res.end(BODY))
    }).listen(0, '127.0.0.1')
    await new Promise(resolve => server.once('listening', resolve))
    servers.push(server)
  }
  const extras = [flags['old-args'], flags['new-args']]
  const [a, b] = await Promise.all([A, B].map((exe, i) => startLila(exe, `127.0.0.1:${servers[i].address().port}`, extras[i])))
  await Promise.all([load(a.port, 2), load(b.port, 2)]) // warm-up
  const ratios = []
  for (let round = 1; round <= Number(rounds); round++) {
    const [ca, cb] = [cpuSeconds(a.child.pid), cpuSeconds(b.child.pid)]
    const [na, nb] = await Promise.all([load(a.port, seconds), load(b.port, seconds)])
    const ua = (cpuSeconds(a.child.pid) - ca) / na * 1e6
    const ub = (cpuSeconds(b.child.pid) - cb) / nb * 1e6
    ratios.push(ub / ua)
    console.log(`round ${round}: old ${ua.toFixed(1)} µs/req (${na} requests), new ${ub.toFixed(1)} µs/req ` +
      `(${nb} requests), new/old ${(ub / ua).toFixed(3)}`)
  }
  // The median of an even count is the mean of the middle two (the upper one alone
  // leaned every even-round A/B towards "new is slower").
  ratios.sort((x, y) => x - y)
  const mid = ratios.length / 2
  const median = ratios.length % 2 === 1 ? ratios[Math.floor(mid)] : (ratios[mid - 1] + ratios[mid]) / 2
  console.log(`median new/old: ${median.toFixed(3)} (range ${ratios[0].toFixed(3)}-${ratios[ratios.length - 1].toFixed(3)})`)
  a.child.kill()
  b.child.kill()
  for (const server of servers) server.close()
  if (postArgs !== null) fs.rmSync(postArgs.dir, { recursive: true, force: true })
}

main().catch(err => {
  console.error(err.message)
  process.exit(1)
})
