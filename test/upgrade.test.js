'use strict'

// lila upgrade (and SIGUSR2): a new lila takes over the listening sockets of the running
// one, through the spawned executable and real clients. Loads run while the upgrades
// happen back to back; every wait is on a line, a PID file or an exit, never a sleep.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const net = require('net')
const path = require('path')
const http = require('http')
const crypto = require('crypto')
const { spawnSync } = require('child_process')
const { httpBackend, tcpBackend, request, statusJson, runLila, within, ROOT } = require('./fixtures/helpers')
const { upgradableLila, gone, alive } = require('./fixtures/upgrade')
const { certDir, makeCertificate } = require('./fixtures/certs')

t.setTimeout(300000)

t.test('a TCP connection, a WebSocket and a download started before an upgrade go on after it, byte for byte', async t => {
  // TCP: an echo.
  const echo = await tcpBackend(t, 'echo', socket => socket.pipe(socket))
  // HTTP: a WebSocket echo (text frames), and a 16 MiB download.
  const body = crypto.randomBytes(16 * 1024 * 1024)
  const web = await httpBackend(t, 'web', (req, res) => {
    res.writeHead(200, { 'Content-Length': body.length })
    res.end(body)
  })
  web.server.on('upgrade', (req, socket) => {
    const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`)
    let buffered = Buffer.alloc(0)
    socket.on('data', chunk => {
      buffered = Buffer.concat([buffered, chunk])
      for (let frame = readFrame(buffered); frame !== null; frame = readFrame(buffered)) {
        buffered = buffered.subarray(frame.size)
        if (frame.opcode === 8) return socket.end(Buffer.from([0x88, 0]))
        socket.write(textFrame(`echo ${frame.text}`, false))
      }
    })
    socket.on('error', () => {})
  })
  const tcp = await upgradableLila(t, ['rr', echo.address, '--host', '127.0.0.1', '--port', '0'])
  const lila = await upgradableLila(t, ['rr', web.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0'])

  const conn = await lineClient(tcp.port)
  t.equal(await conn.say('before'), 'before', 'TCP: echoed before the upgrade')
  const ws = await webSocket(lila.port)
  t.equal(await ws.say('before'), 'echo before', 'WebSocket: echoed before the upgrade')
  const download = startDownload(lila.port)
  await download.started // the first bytes came; the client reads no more for now

  const [tcpUpgrade, httpUpgrade] = await Promise.all([tcp.upgrade(), lila.upgrade()])
  t.equal(tcpUpgrade.code, 0, tcpUpgrade.stderr)
  t.equal(httpUpgrade.code, 0, httpUpgrade.stderr)
  await tcp.line(/handed over: stopped accepting/)
  await lila.line(/handed over: stopped accepting/)
  t.ok(alive(tcpUpgrade.from) && alive(httpUpgrade.from), 'the old lilas still carry them')

  for (let i = 0; i < 3; i++) {
    t.equal(await conn.say(`after ${i}`), `after ${i}`, 'TCP: still echoed by the old lila')
    t.equal(await ws.say(`after ${i}`), `echo after ${i}`, 'WebSocket: still echoed')
  }
  download.resume()
  const downloaded = await download.done
  t.equal(downloaded.length, body.length, 'the download completes')
  t.ok(downloaded.equals(body), 'byte for byte')
  // New clients go to the new lilas meanwhile.
  const fresh = await lineClient(tcp.port)
  t.equal(await fresh.say('new'), 'new', 'a new TCP connection is served (by the new lila)')
  fresh.socket.end()
  t.equal((await request(lila.port)).status, 200, 'a new request too')
  conn.socket.end()
  await ws.close()
  // Once their clients closed, the old lilas have nothing left and exit.
  await gone(tcpUpgrade.from)
  await gone(httpUpgrade.from)
})

t.test('a new executable with a syntax error leaves the old lila serving, and the error is said', async t => {
  const a = await httpBackend(t, 'a')
  const lila = await upgradableLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0'])
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-broken-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const broken = path.join(dir, 'lila')
  const lines = fs.readFileSync(path.join(ROOT, 'lila'), 'utf8').split('\n')
  lines.splice(20, 0, 'const = nothing here')
  fs.writeFileSync(broken, lines.join('\n'), { mode: 0o755 })

  const pid = lila.pid()
  const upgraded = await lila.upgrade(['--exec', broken])
  t.equal(upgraded.code, 1, 'lila upgrade exits 1')
  t.match(upgraded.stderr, /^lila: upgrade failed: \S+lila does not run: SyntaxError: [^\n]+\(\S+lila:21\); pid \d+ goes on serving\n$/, 'in one line, with the error and where')
  const said = await lila.line(/upgrade failed: .*SyntaxError/)
  t.equal(`${said.input}\n`, upgraded.stderr, 'the running lila says the same words')
  t.equal(lila.pid(), pid, 'the PID file is unchanged')
  const res = await request(lila.port)
  t.equal(res.status, 200, 'the old lila still serves')
  t.equal(String(res.body), 'a\n')
  const again = await lila.upgrade()
  t.equal(again.code, 0, 'a good executable then takes over')
})

t.test('a syntax error in the bundle, which node --check does not see, is found before anything starts', async t => {
  const a = await httpBackend(t, 'a')
  const lila = await upgradableLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0'])
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-broken-bundle-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const broken = path.join(dir, 'lila')
  // lib/ sits in a comment that the loader compiles (scripts/bundle-loader.js): break a
  // module that a start would load only later.
  const lines = fs.readFileSync(path.join(ROOT, 'lila'), 'utf8').split('\n')
  const at = lines.indexOf('"lib/api.js": function (module, exports, require) {') + 1
  t.ok(at > 0, 'the bundle holds lib/api.js')
  lines.splice(at, 0, 'const = nothing here')
  fs.writeFileSync(broken, lines.join('\n'), { mode: 0o755 })
  t.equal(spawnSync(process.execPath, ['--check', broken]).status, 0, 'node --check passes it')

  const upgraded = await lila.upgrade(['--exec', broken])
  t.equal(upgraded.code, 1, 'lila upgrade exits 1')
  t.match(upgraded.stderr, new RegExp(`^lila: upgrade failed: \\S+lila does not run: SyntaxError: [^\\n]+\\(\\S+lila:${at + 1}\\); pid \\d+ goes on serving\n$`),
    'in one line, with the error and its line in the file')
  t.equal((await request(lila.port)).status, 200, 'the old lila still serves')
})

t.test('a new lila that refuses its config, or exits right after it listened, leaves the old one serving', async t => {
  const a = await httpBackend(t, 'a')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-config-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({ listeners: [{ host: '127.0.0.1', port: 0, protocol: 'http', backends: [a.address] }] }))
  const lila = await upgradableLila(t, ['--config', file])
  fs.writeFileSync(file, '{ "listeners": [ { "port": "eighty" } ] }')
  const refused = await lila.upgrade()
  t.equal(refused.code, 1)
  t.match(refused.stderr, /^lila: upgrade failed: the new lila \(\S+, pid \d+\) could not start: \S+lila\.json: listeners\[0\][^\n]+; pid \d+ goes on serving\n$/, 'the config error, in one line')
  t.equal((await request(lila.port)).status, 200, 'still serving')

  // A new "lila" that says it listens and dies in its first moments.
  const crashing = path.join(dir, 'crashing.js')
  fs.writeFileSync(crashing, "process.send({ lila: 'listening', version: '9.9.9' }); setTimeout(() => process.exit(3), 20)\n")
  const crashed = await lila.upgrade(['--exec', crashing])
  t.equal(crashed.code, 1)
  t.match(crashed.stderr, /could not|exited with code 3 right after it listened; pid \d+ goes on serving/)
  t.equal((await request(lila.port)).status, 200, 'still serving')
})

t.test('the status port, a Unix socket listener and the run-time state move; counters start again', async t => {
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-unix-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const socketPath = path.join(dir, 'lila.sock')
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({
    'status-port': 0,
    'status-host': '127.0.0.1',
    check: 'none',
    listeners: [
      { name: 'web', host: '127.0.0.1', port: 0, protocol: 'http', backends: [a.address, b.address] },
      { name: 'local', host: `unix:${socketPath}`, protocol: 'http', backends: [a.address] }
    ]
  }))
  const lila = await upgradableLila(t, ['--config', file])
  lila.statusPort = Number((await lila.line(/status on http:\/\/127\.0\.0\.1:(\d+)\/status$/))[1])
  const post = path => request(lila.statusPort, { method: 'POST', path })
  t.equal((await post(`/backends/${a.address}/drain?listener=web`)).status, 200)
  t.equal((await post(`/backends/${b.address}/weight?listener=web&value=7`)).status, 200)
  t.equal((await request(lila.port)).status, 200)
  const upgraded = await lila.upgrade()
  t.equal(upgraded.code, 0, upgraded.stderr)
  const snapshot = await statusJson(lila) // the same status port, now the new lila's
  const web = snapshot.listeners.find(l => l.name === 'web')
  const backend = address => web.backends.find(x => x.address === address)
  t.match(backend(a.address).status, /^drain/, 'a backend drained through the API stays drained')
  t.equal(backend(b.address).weight, 7, 'a weight set through the API stays')
  t.equal(web.accepted, 0, 'counters start again')
  const local = await unixRequest(socketPath)
  t.equal(local.status, 200, 'the Unix socket listener serves, from the new lila')
  await lila.line(/handed over/)
  await gone(upgraded.from)
  t.ok(fs.existsSync(socketPath), 'the old lila left the socket file to the new one')
  t.equal((await unixRequest(socketPath)).status, 200)
  process.kill(lila.pid(), 'SIGTERM')
  await gone(upgraded.to)
  t.notOk(fs.existsSync(socketPath), 'the last lila removes it when it stops')
  t.notOk(fs.existsSync(lila.pidFile), 'and its PID file')
})

t.test('lila upgrade: a PID file or process that is not there', async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-none-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const noFile = await runLila(['upgrade', '--pid-file', path.join(dir, 'none.pid')])
  t.equal(noFile.code, 1)
  t.match(noFile.stderr, /^lila: cannot read --pid-file \S+none\.pid: no such file or directory\n$/)
  const stale = path.join(dir, 'stale.pid')
  fs.writeFileSync(stale, '999999999\n')
  const noProcess = await runLila(['upgrade', '--pid-file', stale])
  t.equal(noProcess.code, 1)
  t.match(noProcess.stderr, /^lila: no process 999999999 \(from --pid-file \S+\): is lila running\?\n$/)
  t.notOk(fs.existsSync(`${stale}.upgrade`), 'no request left behind')
})

t.test('a TLS listener\'s --redirect-http moves with it', async t => {
  const a = await httpBackend(t, 'a')
  const { cert, key } = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const lila = await upgradableLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--tls-cert', cert, '--tls-key', key, '--redirect-http', '0'])
  const redirectPort = Number((await lila.line(/redirect-http on 127\.0\.0\.1:(\d+):/))[1])
  const before = await request(redirectPort, { headers: { host: 'localhost' } })
  t.equal(before.status, 308)
  const upgraded = await lila.upgrade()
  t.equal(upgraded.code, 0, upgraded.stderr)
  await lila.line(/handed over: stopped accepting/)
  await gone(upgraded.from)
  const after = await request(redirectPort, { headers: { host: 'localhost' } })
  t.equal(after.status, 308, 'the same port answers, from the new lila')
  t.equal(after.headers.location, `https://localhost:${lila.port}/`)
})

// ---- clients ----

// A TCP connection that says a line and reads one back.
function lineClient (port) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' })
    socket.setEncoding('utf8')
    let text = ''
    const waiters = []
    socket.on('data', chunk => {
      text += chunk
      let newline
      while ((newline = text.indexOf('\n')) !== -1 && waiters.length > 0) {
        waiters.shift()(text.slice(0, newline))
        text = text.slice(newline + 1)
      }
    })
    socket.on('error', reject)
    socket.once('connect', () => resolve({
      socket,
      say: line => within(10000, `an echo of ${line}`, new Promise(resolve => {
        waiters.push(resolve)
        socket.write(`${line}\n`)
      }))
    }))
  })
}

// A WebSocket client: the handshake, then masked text frames out and frames in.
function webSocket (port) {
  return new Promise((resolve, reject) => {
    const key = crypto.randomBytes(16).toString('base64')
    const socket = net.connect({ port, host: '127.0.0.1' })
    socket.on('error', reject)
    socket.write(`GET /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`)
    let buffered = Buffer.alloc(0)
    let open = false
    const waiters = []
    let closed = null
    socket.on('data', chunk => {
      buffered = Buffer.concat([buffered, chunk])
      if (!open) {
        const end = buffered.indexOf('\r\n\r\n')
        if (end === -1) return
        const head = buffered.subarray(0, end).toString()
        if (!/^HTTP\/1\.1 101 /.test(head)) return reject(new Error(`no 101: ${head}`))
        buffered = buffered.subarray(end + 4)
        open = true
        resolve({
          say: text => within(10000, `a WebSocket echo of ${text}`, new Promise(resolve => {
            waiters.push(resolve)
            socket.write(textFrame(text, true))
          })),
          close: () => within(10000, 'the WebSocket to close', new Promise(resolve => {
            closed = resolve
            socket.write(Buffer.from([0x88, 0x80, 0, 0, 0, 0]))
          }))
        })
      }
      for (let frame = readFrame(buffered); frame !== null; frame = readFrame(buffered)) {
        buffered = buffered.subarray(frame.size)
        if (frame.opcode === 8 && closed !== null) {
          socket.end()
          closed()
        } else if (waiters.length > 0) {
          waiters.shift()(frame.text)
        }
      }
    })
  })
}

function textFrame (text, masked) {
  const payload = Buffer.from(text)
  const mask = masked ? crypto.randomBytes(4) : null
  const head = Buffer.from([0x81, (masked ? 0x80 : 0) | payload.length])
  if (mask === null) return Buffer.concat([head, payload])
  return Buffer.concat([head, mask, payload.map((byte, i) => byte ^ mask[i % 4])])
}

// A frame of up to 125 bytes at the front of `buf`, or null while it is not whole.
function readFrame (buf) {
  if (buf.length < 2) return null
  const masked = (buf[1] & 0x80) !== 0
  const length = buf[1] & 0x7f
  const size = 2 + (masked ? 4 : 0) + length
  if (buf.length < size) return null
  let payload = buf.subarray(size - length, size)
  if (masked) {
    const mask = buf.subarray(2, 6)
    payload = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]))
  }
  return { opcode: buf[0] & 0x0f, text: payload.toString(), size }
}

// A GET whose reading stops after the first bytes until resume(): a download under way.
function startDownload (port) {
  let started
  const chunks = []
  let res = null
  const done = new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/big', agent: false }, response => {
      res = response
      response.once('data', chunk => {
        chunks.push(chunk)
        response.pause()
        response.on('data', more => chunks.push(more))
        started()
      })
      response.on('end', () => resolve(Buffer.concat(chunks)))
      response.on('error', reject)
    })
    req.on('error', reject)
  })
  return {
    started: within(10000, 'the download to start', new Promise(resolve => { started = resolve })),
    resume: () => res.resume(),
    done: within(30000, 'the download to complete', done)
  }
}

function unixRequest (socketPath) {
  return new Promise(resolve => {
    const req = http.get({ socketPath, path: '/', agent: false }, res => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode }))
    })
    req.on('error', error => resolve({ error }))
  })
}
