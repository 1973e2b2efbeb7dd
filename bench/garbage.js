'use strict'

// Garbage per request: V8's sampling heap profiler (collected objects kept) in a lila
// under wrk, W1's shape (keep-alive, 5-byte answers from a Node backend, 50
// connections), divided by the requests wrk completed while it sampled. The heaviest
// allocation sites follow. Linux, needs wrk.
//
//   node bench/garbage.js [LILA=./lila] [seconds=8] [--client wrk|h2load] [--body BYTES]
//        [--post BYTES] [--backend-protocol h1|h2] [--close] [--top N] [--floor]
// --close: a new client connection per request (W2's shape): bytes per connection.
// --floor: the Node floor (peers/node-proxy.js --kind http, its client sockets reading
// into its own buffers as lila's do) in lila's place: what Node itself leaves per request.

const { spawn } = require('child_process')
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
    client: { type: 'string', default: 'wrk' },
    body: { type: 'string', default: '5' },
    post: { type: 'string', default: '0' },
    'backend-protocol': { type: 'string', default: 'h1' },
    close: { type: 'boolean', default: false },
    floor: { type: 'boolean', default: false },
    top: { type: 'string', default: '15' }
  }
})
const [LILA = path.join(__dirname, '..', 'lila'), seconds = '8'] = positionals
const BODY = Buffer.alloc(Number(flags.body), 'a')
const H2 = flags['backend-protocol'] === 'h2'
const out = path.join(os.tmpdir(), `lila-garbage-${process.pid}.json`)

function backend () {
  const server = (H2 ? http2.createServer : http.createServer)((req, res) => {
    req.resume()
    req.on('end', () => res.end(BODY))
  })
  return new Promise(resolve => server.listen(0, '127.0.0.1', () => resolve(server)))
}

function startLila (port) {
  const env = { ...process.env, LILA_GARBAGE_PROBE: out }
  if (flags.floor) {
    const floor = ['--require', path.join(__dirname, 'garbage-probe.js'), path.join(__dirname, 'peers', 'node-proxy.js'),
      '--kind', H2 ? 'h2' : 'http', '--port', '0', `127.0.0.1:${port}`]
    return startListening(process.execPath, floor, { env: { ...env, NODE_FLOOR_READS: 'own' } })
  }
  const args = ['--require', path.join(__dirname, 'garbage-probe.js'), LILA, 'rr', `127.0.0.1:${port}`,
    '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none']
  if (H2) args.push('--backend-protocol', 'h2')
  return startListening(process.execPath, args, { env })
}

// The requests one load run completed.
function load (port, duration) {
  const url = `http://127.0.0.1:${port}/`
  const post = Number(flags.post)
  let argv
  if (flags.client === 'h2load') {
    argv = ['h2load', '-c10', '-m10', '-D', String(duration), url]
    if (post > 0) argv.push('-d', bodyFile(post))
  } else {
    argv = ['wrk', '-t1', '-c50', `-d${duration}s`, url]
    if (flags.close) argv.push('-H', 'Connection: close')
    if (post > 0) argv.push('-s', wrkScript(post))
  }
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1))
    let text = ''
    child.stdout.on('data', chunk => { text += chunk })
    child.stderr.on('data', chunk => { text += chunk })
    child.on('close', () => {
      const count = flags.client === 'h2load' ? /(\d+) succeeded/.exec(text) : /(\d+) requests in/.exec(text)
      if (count === null) reject(new Error(`no count: ${text}`))
      else resolve(Number(count[1]))
    })
  })
}

// The request body, written once in a folder of this run's own: a file shared in /tmp
// and rewritten per load can be read truncated by another run's client (see ab.js).
let postDir = null
function postFileOf (name, content) {
  postDir ||= fs.mkdtempSync(path.join(os.tmpdir(), 'lila-garbage-'))
  const file = path.join(postDir, name)
  if (!fs.existsSync(file)) fs.writeFileSync(file, content)
  return file
}

const bodyFile = bytes => postFileOf('post.bin', Buffer.alloc(bytes, 'p'))

const wrkScript = bytes => postFileOf('post.lua', `wrk.method = "POST"\nwrk.body = string.rep("p", ${bytes})\n` +
  'wrk.headers["Content-Type"] = "application/octet-stream"\n')

const until = (test, ms) => new Promise((resolve, reject) => {
  const end = Date.now() + ms
  const tick = () => test() ? resolve() : Date.now() > end ? reject(new Error('timed out')) : setTimeout(tick, 50)
  tick()
})

async function main () {
  const server = await backend()
  const lila = await startLila(server.address().port)
  await load(lila.port, 2) // warm-up
  try { fs.unlinkSync(out) } catch {}
  lila.child.kill('SIGWINCH')
  await new Promise(resolve => setTimeout(resolve, 200))
  const requests = await load(lila.port, Number(seconds))
  lila.child.kill('SIGWINCH')
  await until(() => fs.existsSync(out) && fs.statSync(out).size > 0, 10000)
  const { total, top, error } = JSON.parse(fs.readFileSync(out, 'utf8'))
  if (error) throw new Error(error)
  console.log(`${requests} requests, ${(total / requests).toFixed(0)} bytes allocated per request`)
  for (const [where, bytes] of top.slice(0, Number(flags.top))) {
    console.log(`${(bytes / requests).toFixed(0).padStart(6)} B/req  ${(100 * bytes / total).toFixed(1).padStart(5)}%  ${where}`)
  }
  lila.child.kill()
  server.close()
  if (postDir !== null) fs.rmSync(postDir, { recursive: true, force: true })
  fs.unlinkSync(out)
}

main().catch(err => {
  console.error(err.message)
  process.exit(1)
})
