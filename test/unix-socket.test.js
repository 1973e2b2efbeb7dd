'use strict'

// Unix sockets, end to end with the real `lila`: backends written unix:/path in both
// modes, checked over the socket, shown by that address everywhere; and lila itself
// listening on a Unix socket (--host unix:/path), reached with curl --unix-socket, its
// socket file removed on stop and a stale one removed at start. Everything lives in a
// temporary folder.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const path = require('path')
const http = require('http')
const { spawnSync } = require('child_process')
const {
  spawnLila, runLila, exchange, curl, request, settled, within, until
} = require('./fixtures/helpers')
const { render } = require('../lib/admin/dashboard')
const { createView } = require('../lib/admin/dashboard-keys')
const { tmpDir } = require('./fixtures/tmp')

function tempDir (t) {
  const dir = tmpDir(t, 'lila-unix-')
  return dir
}

function listenOnPath (t, server, file) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ path: file }, () => {
      server.off('error', reject)
      t.teardown(() => closeQuietly(server))
      resolve()
    })
  })
}

function closeQuietly (server) {
  return new Promise(resolve => {
    if (server.closeAllConnections) server.closeAllConnections()
    if (!server.listening) return resolve()
    server.close(() => resolve())
  })
}

// A greet-then-echo TCP backend on a Unix socket.
async function unixTcpBackend (t, file, name) {
  const server = net.createServer(socket => {
    socket.on('error', () => {})
    socket.write(`${name}\n`)
    socket.pipe(socket)
  })
  await listenOnPath(t, server, file)
  return server
}

// An HTTP backend on a Unix socket that answers its name and remembers each request's
// head; /health answers 200 while `healthy`.
async function unixHttpBackend (t, file, name) {
  const backend = { name, healthy: true, requests: [], checks: [] }
  backend.server = http.createServer((req, res) => {
    if (req.url === '/health') {
      backend.checks.push(req.headers)
      res.statusCode = backend.healthy ? 200 : 503
      return res.end()
    }
    backend.requests.push({ url: req.url, headers: req.headers })
    res.end(`${name} ${req.url}\n`)
  })
  await listenOnPath(t, backend.server, file)
  return backend
}

// A raw HTTP/1.0 request without a Host header; resolves with the whole answer.
function rawRequest (port, text) {
  return exchange(port, text).then(({ data }) => data)
}

t.test('tcp mode: a backend on a Unix socket, checked by connecting to it, down when it goes and up when it comes back', async t => {
  const dir = tempDir(t)
  const file = path.join(dir, 'app.sock')
  let server = await unixTcpBackend(t, file, 'unix-a')
  const lila = await spawnLila(t, [
    'rr', `unix:${file}`, '--host', '127.0.0.1', '--port', '0', '--check-interval', '100ms', '--fall', '1', '--rise', '1'
  ])
  t.match(lila.listening, /\(tcp, round-robin, 1 backend\)$/)
  const row = lila.lines.find(l => l.includes(`unix:${file}`))
  t.match(row, new RegExp(`unix:${file}\\s+up\\s+tcp connect ok`), 'the start-up table shows it by its unix: address, checked')

  const socket = net.connect({ port: lila.port, host: '127.0.0.1' })
  const echoed = new Promise(resolve => {
    let text = ''
    socket.on('data', chunk => {
      text += chunk
      if (text === 'unix-a\nping') resolve(text)
    })
  })
  socket.write('ping')
  t.equal(await within(5000, 'the greeting and the echo', echoed), 'unix-a\nping', 'bytes flow both ways through the socket')
  socket.destroy()

  await closeQuietly(server) // Node removes the socket file
  // Gone: its file removed (a probe after the close), or a probe in flight as it closed.
  await lila.waitForLine(new RegExp(`^lila: backend unix:${escape(file)} down: tcp (no such file or directory|connection reset)$`))
  server = await unixTcpBackend(t, file, 'unix-b')
  await lila.waitForLine(new RegExp(`^lila: backend unix:${escape(file)} up: tcp connect ok$`))
  const { data } = await exchange(lila.port)
  t.equal(data, 'unix-b\n', 'served again once the check passed')
  t.equal((await lila.stop()).code, 0)
})

t.test('http mode: requests and http checks over the socket, the client\'s Host kept (localhost when it has none), the unix: address in status, metrics, the page, the dashboard, the access log and the control API', async t => {
  const dir = tempDir(t)
  const [a, b] = [path.join(dir, 'a.sock'), path.join(dir, 'b.sock')]
  const backends = await Promise.all([unixHttpBackend(t, a, 'a'), unixHttpBackend(t, b, 'b')])
  const lila = await spawnLila(t, [
    'rr', `unix:${a}`, `unix:${b},weight=2`, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--check', 'http:/health', '--check-interval', '250ms', '--fall', '1', '--rise', '1',
    '--status-port', '0', '--access-log', 'json'
  ])
  for (const file of [a, b]) {
    t.ok(lila.lines.some(l => new RegExp(`unix:${escape(file)}\\s+up\\s+http /health 200`).test(l)), `${file} checked over http`)
  }
  t.same(backends[0].checks[0].host, 'localhost', 'the check\'s Host is localhost: a socket has no host name')

  const seen = []
  for (let i = 0; i < 6; i++) {
    const res = await request(lila.port, { path: `/r${i}`, headers: { host: 'app.example' } })
    t.equal(res.status, 200)
    seen.push(String(res.body).split(' ')[0])
  }
  t.same(seen.sort(), ['a', 'a', 'b', 'b', 'b', 'b'], 'weights apply')
  t.equal(backends[0].requests[0].headers.host, 'app.example', 'the client\'s Host goes on')
  t.equal(backends[0].requests[0].headers['x-forwarded-for'], '127.0.0.1')

  const answer = await rawRequest(lila.port, 'GET /old HTTP/1.0\r\n\r\n')
  t.match(answer, /^HTTP\/1\.1 200 /)
  const old = [...backends[0].requests, ...backends[1].requests].find(r => r.url === '/old')
  t.equal(old.headers.host, 'localhost', 'a request without a Host gets localhost, not the socket path')

  const snapshot = await settled(lila)
  const shown = snapshot.listeners[0].backends.map(x => [x.address, x.weight, x.state])
  t.same(shown, [[`unix:${a}`, 1, 'up'], [`unix:${b}`, 2, 'up']], '/status.json shows each by its unix: address')
  const metrics = String((await request(lila.statusPort, { path: '/metrics' })).body)
  t.match(metrics, `lila_backend_up{listener="127.0.0.1:${lila.port}",backend="unix:${a}"} 1`)
  const page = String((await request(lila.statusPort, { path: '/status' })).body)
  t.match(page, `unix:${a}`, 'the status page lists it')
  const screen = render(snapshot, createView(), { width: 120, height: 20, colour: false }).join('\n')
  t.match(screen, `unix:${b}`, 'the dashboard lists it')

  const lines = lila.stdout.split('\n').filter(Boolean).map(line => JSON.parse(line))
  t.ok(lines.length >= 7 && lines.every(l => l.backend === `unix:${a}` || l.backend === `unix:${b}`), 'the access log names the socket')

  // The control API takes the address with its slashes escaped.
  const drained = await request(lila.statusPort, { method: 'POST', path: `/backends/${encodeURIComponent(`unix:${a}`)}/drain` })
  t.equal(drained.status, 200, String(drained.body))
  t.match(String(drained.body), `unix:${a} drained`)
  for (let i = 0; i < 3; i++) t.match(String((await request(lila.port)).body), /^b /, 'a drained socket backend takes no new request')

  // A failing check takes it down, over the socket.
  backends[1].healthy = false
  await lila.waitForLine(new RegExp(`^lila: backend unix:${escape(b)} down: http /health 503$`))
  t.equal((await lila.stop()).code, 0)
})

t.test('lila on a Unix socket: curl --unix-socket reaches it, the client is "unix:", the file goes on stop, a stale one is replaced, a live one is not', async t => {
  const dir = tempDir(t)
  const backendFile = path.join(dir, 'app.sock')
  const listenFile = path.join(dir, 'lila.sock')
  const backend = await unixHttpBackend(t, backendFile, 'a')
  const args = ['--protocol', 'http', `unix:${backendFile}`, '--host', `unix:${listenFile}`, '--check', 'none', '--access-log']
  const lila = await spawnLila(t, args, { waitForListening: false })
  await lila.waitForLine(new RegExp(`^lila: listening on unix:${escape(listenFile)} \\(http, random, 1 backend\\)$`))
  t.ok(fs.lstatSync(listenFile).isSocket(), 'the socket file is there')

  const res = await curl(['--unix-socket', listenFile, 'http://app.example/hello'])
  t.equal(res.code, 0, res.stderr)
  t.equal(res.stdout, 'a /hello\n')
  t.equal(backend.requests[0].headers.host, 'app.example')
  t.equal(backend.requests[0].headers['x-forwarded-for'], 'unix:', 'a Unix socket client has no address: "unix:"')
  await until(() => lila.stdout.includes('\n'), 'the access log line')
  t.match(lila.stdout, new RegExp(`^\\S+ unix: -> unix:${escape(backendFile)} "GET /hello HTTP/1.1" 200 `), 'the access log line')

  // A second lila on the same socket: refused, the first one's file untouched.
  const second = await runLila(args)
  t.equal(second.code, 1)
  t.equal(second.stderr, `lila: cannot listen on unix:${listenFile}: address already in use (something listens on it)\n`)
  t.equal((await curl(['--unix-socket', listenFile, 'http://x/still'])).stdout, 'a /still\n', 'the first one still serves')

  t.equal((await lila.stop()).code, 0)
  t.notOk(fs.existsSync(listenFile), 'a graceful stop removes the socket file')

  // Killed, lila leaves its file behind; the next one removes it and listens.
  const killed = await spawnLila(t, args, { waitForListening: false })
  await killed.waitForLine(/listening on unix:/)
  await killed.stop('SIGKILL')
  t.ok(fs.lstatSync(listenFile).isSocket(), 'a killed lila leaves its socket file')
  const next = await spawnLila(t, args, { waitForListening: false })
  await next.waitForLine(/listening on unix:/)
  t.equal((await curl(['--unix-socket', listenFile, 'http://x/again'])).stdout, 'a /again\n', 'the stale file was replaced')
  t.equal((await next.stop()).code, 0)

  // A file that is not a socket is never removed.
  fs.writeFileSync(listenFile, 'keep me')
  const blocked = await runLila(args)
  t.equal(blocked.code, 1)
  t.equal(blocked.stderr, `lila: cannot listen on unix:${listenFile}: a file that is not a socket is in the way\n`)
  t.equal(fs.readFileSync(listenFile, 'utf8'), 'keep me')
})

t.test('TLS on a Unix socket listener: the client is still "unix:"', async t => {
  const { certDir, makeCertificate } = require('./fixtures/certs')
  const dir = tempDir(t)
  const { cert, key } = makeCertificate(certDir(t), 'localhost')
  const backendFile = path.join(dir, 'app.sock')
  const listenFile = path.join(dir, 'lila.sock')
  const backend = await unixHttpBackend(t, backendFile, 'a')
  const lila = await spawnLila(t, [
    '--protocol', 'http', `unix:${backendFile}`, '--host', `unix:${listenFile}`, '--check', 'none',
    '--tls-cert', cert, '--tls-key', key
  ], { waitForListening: false })
  await lila.waitForLine(/listening on unix:/)
  const res = await curl(['--unix-socket', listenFile, '--cacert', cert, 'https://localhost/tls'])
  t.equal(res.stdout, 'a /tls\n', res.stderr)
  t.equal(backend.requests[0].headers['x-forwarded-for'], 'unix:')
  t.equal(backend.requests[0].headers['x-forwarded-proto'], 'https')
  t.equal((await lila.stop()).code, 0)
})

t.test('tcp mode on a Unix socket, with --workers 2: served, and the file removed on stop', async t => {
  const dir = tempDir(t)
  const backendFile = path.join(dir, 'app.sock')
  const listenFile = path.join(dir, 'lila.sock')
  await unixTcpBackend(t, backendFile, 'w')
  staleSocket(listenFile)
  const lila = await spawnLila(t, [`unix:${backendFile}`, '--host', `unix:${listenFile}`, '--workers', '2', '--check', 'none'], { waitForListening: false })
  await lila.waitForLine(new RegExp(`^lila: listening on unix:${escape(listenFile)} \\(tcp, random, 1 backend, 2 workers\\)$`))
  for (let i = 0; i < 4; i++) {
    const greeting = await within(5000, 'a greeting', new Promise((resolve, reject) => {
      const socket = net.connect({ path: listenFile })
      socket.on('error', reject)
      socket.once('data', chunk => {
        socket.destroy()
        resolve(String(chunk))
      })
    }))
    t.equal(greeting, 'w\n')
  }
  t.equal((await lila.stop()).code, 0)
  t.notOk(fs.existsSync(listenFile), 'the socket file is gone')
})

t.test('SIGHUP: a Unix socket listener kept stays bound, one moved to another path is replaced, one removed takes its file with it', async t => {
  const dir = tempDir(t)
  const backendFile = path.join(dir, 'app.sock')
  await unixHttpBackend(t, backendFile, 'a')
  const [one, two, three] = ['one.sock', 'two.sock', 'three.sock'].map(f => path.join(dir, f))
  const file = path.join(dir, 'lila.json')
  const write = listeners => fs.writeFileSync(file, JSON.stringify({
    protocol: 'http', check: 'none', listeners: listeners.map(([name, sock]) => ({ name, host: `unix:${sock}`, backends: [`unix:${backendFile}`] }))
  }))
  write([['web', one], ['api', two]])
  const lila = await spawnLila(t, ['--config', file], { waitForListening: false })
  await lila.waitForLine(new RegExp(`^lila: api: listening on unix:${escape(two)} `))
  const get = sock => curl(['--unix-socket', sock, 'http://x/']).then(r => r.stdout)
  t.equal(await get(one), 'a /\n')
  t.equal(await get(two), 'a /\n')

  write([['web', one], ['api', three]])
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/^lila: reloaded \(1 change\)$/)
  // curl's connection to the old path may not have closed yet: then it is left to drain.
  t.match(lila.stderr, new RegExp(`lila: reload: listener api replaced: listening on unix:${escape(three)} ` +
    '\\(http, random, 1 backend\\)(; 1 connection left to drain on the old one)?\n'))
  t.equal(await get(one), 'a /\n', 'the listener kept still serves')
  t.equal(await get(three), 'a /\n', 'the new path serves')
  await until(() => !fs.existsSync(two), 'the old socket file to go')

  write([['api', three]])
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/^lila: reloaded \(1 change\)$/, { count: 2 })
  await until(() => !fs.existsSync(one), 'the removed listener\'s socket file to go')
  t.equal(await get(three), 'a /\n')
  t.equal((await lila.stop()).code, 0)
  t.notOk(fs.existsSync(three))
})

t.test('the config file: Unix socket backends and listeners, and the SRV form', async t => {
  const { parseConfigFile } = require('../lib/config/file')
  const config = parseConfigFile(JSON.stringify({
    listeners: [
      { host: 'unix:/run/lila/web.sock', protocol: 'http', backends: ['unix:/run/app.sock,weight=3', '_http._tcp.lila.test,max-conn=5'] },
      { port: 8080, backends: ['unix:/run/app.sock,backup'] }
    ]
  }), 'lila.json')
  const [web, tcp] = config.listeners
  t.equal(web.host, 'unix:/run/lila/web.sock')
  t.equal(web.port, null, 'a Unix socket listener has no port')
  t.equal(web.name, 'http:unix:/run/lila/web.sock')
  t.same(web.backends[0], { host: null, port: null, path: '/run/app.sock', weight: 3, maxConn: null, slowStart: 0, backup: false })
  t.same(web.backends[1], { host: null, port: null, srv: '_http._tcp.lila.test', weight: 1, maxConn: 5, slowStart: 0, backup: false })
  t.equal(tcp.backends[0].backup, true)
  const fail = (doc, message) => t.throws(() => parseConfigFile(JSON.stringify(doc), 'lila.json'), { message })
  fail({ listeners: [{ host: 'unix:/a.sock', backends: [':80'] }, { host: 'unix:/a.sock', backends: [':81'] }] },
    'lila.json: listeners[1]: socket unix:/a.sock is taken by listener "tcp:unix:/a.sock": expected each listener on its own')
  fail({ host: 'unix:/a.sock', listeners: [{ port: 80, backends: [':80'] }] },
    'lila.json: listeners[0].port: does not apply to a Unix socket ("host": "unix:/a.sock")')
  fail({ listeners: [{ 'backend-tls': true, backends: ['unix:/run/app.sock'] }] },
    'lila.json: listeners[0].backend-tls: does not apply to Unix socket backend "unix:/run/app.sock": expected TCP backends only with it')
  fail({ listeners: [{ host: 'unix:run/lila.sock', backends: [':80'] }] },
    'lila.json: listeners[0].host: invalid address "unix:run/lila.sock": expected unix: and an absolute path, e.g. unix:/run/lila.sock')
})

// Leave a socket file nothing listens on, as a process that was killed does.
function staleSocket (file) {
  const script = `require('net').createServer().listen(${JSON.stringify(file)}, () => process.kill(process.pid, 'SIGKILL'))`
  spawnSync(process.execPath, ['-e', script], { timeout: 10000 })
  if (!fs.lstatSync(file).isSocket()) throw new Error(`no stale socket at ${file}`)
}

function escape (text) {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
}
