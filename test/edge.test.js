'use strict'

// Rules at the edge through the real executable, as far as they need no HTTP exchange:
// --allow and --deny on tcp listeners (and, meanwhile, http ones, per connection), the
// PROXY header's address judged with --accept-proxy, IPv6; a config file with comments
// (and a broken one); reloads; the admin listener behind an htpasswd file. The HTTP
// rules are in edge-http.test.js.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const path = require('path')
const { tcpBackend, spawnLila, runLila, request, statusJson, curl, within, until } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')
const { htpasswdLine } = require('./fixtures/htpasswd')

// Connect to 127.0.0.1:port from `localAddress`, send `data` (a PROXY header, say),
// and collect what comes back until the connection closes. Never rejects.
function from (localAddress, port, { host = '127.0.0.1', data = null } = {}) {
  return within(10000, `a connection from ${localAddress}`, new Promise(resolve => {
    const socket = net.connect({ port, host, localAddress })
    const chunks = []
    socket.on('data', chunk => chunks.push(chunk))
    socket.on('error', () => {})
    socket.on('close', () => resolve(Buffer.concat(chunks).toString()))
    socket.on('connect', () => { if (data !== null) socket.write(data) })
  }))
}

function tempDir (t) {
  const dir = tmpDir(t, 'lila-edge-')
  return dir
}

const htpasswd = tool('htpasswd')

t.test('tcp --deny: a client from 127.0.0.2 is closed at once, one from 127.0.0.1 served; counted, shown, said', async t => {
  const backend = await tcpBackend(t, 'a')
  const lila = await spawnLila(t, [backend.address, '--host', '127.0.0.1', '--port', '0', '--deny', '127.0.0.2', '--status-port', '0', '--check', 'none'])
  t.equal(await from('127.0.0.1', lila.port), 'a\n', '127.0.0.1 served')
  t.equal(await from('127.0.0.2', lila.port), '', '127.0.0.2 closed with nothing')
  t.equal(await from('127.0.0.2', lila.port), '')
  t.equal(backend.connections, 1, 'a refused client never reaches a backend')
  await lila.waitForLine(/^lila: refused 127\.0\.0\.2: on --deny$/)
  const snapshot = await statusJson(lila)
  t.same(snapshot.listeners[0].refused, { deny: 2 })
  const metrics = (await request(lila.statusPort, { path: '/metrics' })).body.toString()
  t.match(metrics, /^lila_listener_refused_total\{listener="127\.0\.0\.1:\d+",reason="deny"\} 2$/m)
  const page = (await request(lila.statusPort, { path: '/status' })).body.toString()
  t.match(page, 'refused at the edge 2 (deny: 2)')
  t.equal(lila.lines.filter(line => /refused 127\.0\.0\.2/.test(line)).length, 1, 'one line for two refusals within a second')
})

t.test('tcp --allow: only the networks listed; --deny wins over it', async t => {
  const backend = await tcpBackend(t, 'a')
  const lila = await spawnLila(t, [backend.address, '--host', '127.0.0.1', '--port', '0', '--allow', '127.0.0.0/30', '--deny', '127.0.0.3', '--check', 'none'])
  t.equal(await from('127.0.0.1', lila.port), 'a\n')
  t.equal(await from('127.0.0.2', lila.port), 'a\n')
  t.equal(await from('127.0.0.3', lila.port), '', 'allowed, but denied')
  t.equal(await from('127.0.0.5', lila.port), '', 'not on --allow')
  await lila.waitForLine(/^lila: refused 127\.0\.0\.5: not on --allow$/)
})

t.test('tcp --accept-proxy: the address the PROXY header gives is the one judged', async t => {
  const backend = await tcpBackend(t, 'a')
  const lila = await spawnLila(t, [backend.address, '--host', '127.0.0.1', '--port', '0', '--accept-proxy', '--allow', '10.0.0.0/8', '--deny', '10.9.0.0/16', '--check', 'none'])
  const header = (source, family = 'TCP4', destination = '127.0.0.1') => `PROXY ${family} ${source} ${destination} 5555 ${lila.port}\r\n`
  t.equal(await from('127.0.0.1', lila.port, { data: header('10.1.2.3') }), 'a\n', 'a client of 10/8 by its header, served')
  t.equal(await from('127.0.0.1', lila.port, { data: header('127.0.0.1') }), '', '127.0.0.1 by its header: not on --allow')
  t.equal(await from('127.0.0.1', lila.port, { data: header('10.9.1.1') }), '', 'on --deny by its header')
  t.equal(await from('127.0.0.1', lila.port, { data: header('::ffff:10.1.2.3', 'TCP6', '::1') }), 'a\n', 'an IPv4-mapped address, by the IPv4 network')
  t.equal(backend.connections, 2)
})

t.test('tcp over IPv6: ::1 allowed, then denied', async t => {
  const backend = await tcpBackend(t, 'a')
  const allowed = await spawnLila(t, [backend.address, '--host', '::1', '--port', '0', '--allow', '::1', '--check', 'none'])
  t.equal(await from('::1', allowed.port, { host: '::1' }), 'a\n')
  const denied = await spawnLila(t, [backend.address, '--host', '::1', '--port', '0', '--deny', '::1/128', '--check', 'none'])
  t.equal(await from('::1', denied.port, { host: '::1' }), '')
  await denied.waitForLine(/^lila: refused ::1: on --deny$/)
})

t.test('a config file with comments and trailing commas loads; SIGHUP applies a new deny list', async t => {
  const backend = await tcpBackend(t, 'a')
  const dir = tempDir(t)
  const file = path.join(dir, 'lila.jsonc')
  const write = deny => fs.writeFileSync(file, `{
  // Every listener checks nothing: the backend is a test's.
  "check": "none",
  /* One listener,
     on loopback. */
  "listeners": [
    {
      "host": "127.0.0.1",
      "port": 0,
      "deny": ${JSON.stringify(deny)}, // who may not come in
      "backends": ["${backend.address}",],
    },
  ],
}
`)
  write(['127.0.0.2'])
  const lila = await spawnLila(t, ['--config', file])
  t.equal(await from('127.0.0.1', lila.port), 'a\n')
  t.equal(await from('127.0.0.2', lila.port), '')
  write(['127.0.0.1/32', '127.0.0.3'])
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(1 change\)/)
  t.match(lila.stderr, 'lila: reload: tcp:0: deny 127.0.0.2/32 -> 127.0.0.1/32, 127.0.0.3/32\n')
  t.equal(await from('127.0.0.2', lila.port), 'a\n', 'now served')
  t.equal(await from('127.0.0.1', lila.port), '', 'now refused')
  fs.writeFileSync(file, '{\n  "listeners": [ /* a comment never closed\n  ]\n}\n')
  lila.child.kill('SIGHUP')
  const refused = await lila.waitForLine(/reload refused: (.*)$/)
  t.equal(refused[1], `${file}: invalid JSON at line 2, column 18: unterminated comment: expected */ to close the /* here; keeping the running config`)
  t.equal(await from('127.0.0.2', lila.port), 'a\n', 'still the last good rules')
})

t.test('a config file with a broken comment names its line, exit 2', async t => {
  const dir = tempDir(t)
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, '{\n  "listeners": [{ "backends": [":9"] }],\n  / "workers": 2\n}\n')
  const result = await runLila(['--config', file])
  t.equal(result.code, 2)
  t.equal(result.stderr, `lila: ${file}: invalid JSON at line 3, column 3: unexpected "/": expected // or /* to start a comment\nTry 'lila --help'.\n`)
})

// GET or POST on the admin listener with these credentials (null: none).
function admin (port, pathName, credentials, method = 'GET') {
  const headers = credentials === null ? {} : { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` }
  return request(port, { path: pathName, method, headers })
}

t.test('--status-basic-auth: htpasswd -B users in, others 401 with the realm; changes too; the file read again on SIGHUP', async t => {
  if (htpasswd.skip) return t.skip(htpasswd.skip)
  const alice = htpasswdLine('alice', 'wonderland')
  const backend = await tcpBackend(t, 'a')
  const dir = tempDir(t)
  const users = path.join(dir, 'admins')
  fs.writeFileSync(users, `# who may see and change lila\n${alice}\n`)
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({
    check: 'none', 'status-port': 0, 'status-basic-auth': 'admins', listeners: [{ host: '127.0.0.1', port: 0, backends: [backend.address] }]
  }))
  const lila = await spawnLila(t, ['--config', file])
  const port = Number((await lila.waitForLine(/status on http:\/\/127\.0\.0\.1:(\d+)\/status$/))[1])
  for (const page of ['/status', '/status.json', '/metrics']) {
    const none = await admin(port, page, null)
    t.equal(none.status, 401, `${page} without credentials`)
    t.equal(none.headers['www-authenticate'], 'Basic realm="lila status", charset="UTF-8"')
    t.equal((await admin(port, page, 'alice:wrong')).status, 401, `${page}, a wrong password`)
    t.equal((await admin(port, page, 'bob:wonderland')).status, 401, `${page}, a user not in the file`)
    t.equal((await admin(port, page, 'alice:wonderland')).status, 200, `${page}, alice`)
  }
  const drain = `/backends/${encodeURIComponent(backend.address)}/drain`
  t.equal((await admin(port, drain, null, 'POST')).status, 401, 'a change without credentials')
  const drained = await admin(port, drain, 'alice:wonderland', 'POST')
  t.equal(drained.status, 200, `alice drains: ${drained.body}`)
  const curled = await curl(['-u', 'alice:wonderland', `http://127.0.0.1:${port}/status.json`])
  t.match(JSON.parse(curled.stdout).listeners[0].backends[0], { status: /^drain/ }, 'curl -u')

  const bob = htpasswdLine('bob', 'builder', ['-m'])
  fs.appendFileSync(users, `${bob}\n`)
  t.equal((await admin(port, '/status.json', 'bob:builder')).status, 401, 'bob, before the reload')
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(/)
  t.equal((await admin(port, '/status.json', 'bob:builder')).status, 200, 'bob ($apr1$), after it')
  t.equal((await admin(port, '/status.json', 'alice:wonderland')).status, 200, 'alice still')
  fs.writeFileSync(users, 'bob:plain\n')
  lila.child.kill('SIGHUP')
  const refused = await lila.waitForLine(/reload refused: (.*)$/)
  t.match(refused[1], `${users}: line 1: user "bob" has no hash it reads`)
  t.equal((await admin(port, '/status.json', 'alice:wonderland')).status, 200, 'a file that cannot be used changes nothing')
})

t.test('--status-basic-auth with --workers: the primary\'s admin listener asks too', async t => {
  if (htpasswd.skip) return t.skip(htpasswd.skip)
  const alice = htpasswdLine('alice', 'wonderland')
  const backend = await tcpBackend(t, 'a')
  const dir = tempDir(t)
  const users = path.join(dir, 'admins')
  fs.writeFileSync(users, `${alice}\n`)
  const lila = await spawnLila(t, [backend.address, '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--workers', '2', '--status-port', '0', '--status-basic-auth', users, '--deny', '127.0.0.2'], { waitForListening: false })
  const port = Number((await lila.waitForLine(/status on http:\/\/127\.0\.0\.1:(\d+)\/status$/, { timeout: 20000 }))[1])
  t.equal((await admin(port, '/status.json', null)).status, 401)
  const listening = Number((await lila.waitForLine(/listening on 127\.0\.0\.1:(\d+) /))[1])
  t.equal(await from('127.0.0.2', listening), '')
  t.equal(await from('127.0.0.2', listening), '')
  // Each worker's refusals reach the primary with its next snapshot: asked until both are in.
  let snapshot
  await until(async () => {
    snapshot = JSON.parse((await admin(port, '/status.json', 'alice:wonderland')).body)
    return (snapshot.listeners[0].refused || {}).deny === 2
  }, 'both workers\' refusals', { every: 50 }).catch(() => {}) // the assertion below says what arrived
  t.same(snapshot.listeners[0].refused, { deny: 2 }, 'the workers\' refusals, summed')
})

t.test('--status-basic-auth: a file that cannot be used stops the start, in one line', async t => {
  const dir = tempDir(t)
  const users = path.join(dir, 'admins')
  fs.writeFileSync(users, 'alice:secret\n')
  const result = await runLila([':9', '--port', '0', '--status-port', '0', '--status-basic-auth', users])
  t.equal(result.code, 2)
  t.equal(result.stderr, `lila: ${users}: line 1: user "alice" has no hash it reads (crypt and plain text are refused): expected user:hash with a hash of htpasswd -B (bcrypt), -m ($apr1$), -2 or -5 ($5$, $6$) or -s ({SHA})\nTry 'lila --help'.\n`)
  const missing = await runLila([':9', '--port', '0', '--status-port', '0', '--status-basic-auth', path.join(dir, 'none')])
  t.equal(missing.stderr, `lila: cannot read --basic-auth file ${JSON.stringify(path.join(dir, 'none'))}: no such file\nTry 'lila --help'.\n`)
})
