'use strict'

// systemd socket activation (LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES), with
// systemd-socket-activate, which hands sockets over as systemd does without being PID 1:
// it binds, waits for the first connection, then runs lila with the sockets as
// descriptors 3 and up. lila listens on them, refuses a mismatch naming both, and a
// restart under it (the socket held across, as systemd holds it) refuses no client.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { LILA, httpBackend, request, spawnLila, restartablePort, restartablePorts, runLila, within, until } = require('./fixtures/helpers')
const { gone, alive, startWrk, UPGRADED } = require('./fixtures/upgrade')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')

const { path: ACTIVATE, skip: NO_ACTIVATE } = tool('systemd-socket-activate')
const NO_WRK = tool('wrk').skip

// `systemd-socket-activate -l 127.0.0.1:PORT ... lila ARGS`: lila starts at the first
// connection, which `request` makes (and which waits in the kernel's queue meanwhile).
function activated (ports, names = null) {
  return [...ports.flatMap(port => ['-l', `127.0.0.1:${port}`]), ...(names ? [`--fdname=${names.join(':')}`] : []), LILA]
}

// Spawned as spawnLila does, resolved once systemd-socket-activate listens on every socket.
async function spawnActivated (t, args, prefix, count) {
  const lila = await spawnLila(t, args, { lila: ACTIVATE, prefix, waitForListening: false })
  await lila.waitForLine(/^Listening on \S+ as \d+\.$/, { count })
  return lila
}

t.test('lila serves on the socket systemd gives it, and says where', { skip: NO_ACTIVATE }, async t => {
  const a = await httpBackend(t, 'a')
  const port = await restartablePort()
  const lila = await spawnActivated(t, ['rr', a.address, '--protocol', 'http'], activated([port]), 1)
  const res = await request(port) // the first connection starts lila, and waits for it
  t.equal(res.status, 200, 'the first client, queued while lila started, is served')
  t.equal(String(res.body), 'a\n')
  await lila.waitForLine(new RegExp(`listening on 127\\.0\\.0\\.1:${port} \\(http, round-robin, 1 backend\\)`))
  t.equal((await request(port)).status, 200)
  t.equal((await lila.stop()).code, 0)
})

t.test('a socket that does not match the listeners stops lila at start, naming both', { skip: NO_ACTIVATE }, async t => {
  const a = await httpBackend(t, 'a')
  const [port, other] = await restartablePorts(2)
  const start = async (prefix, args) => {
    const lila = await spawnActivated(t, args, prefix, prefix.filter(arg => arg === '-l').length)
    await request(port) // starts it; lila refuses, so the client gets no answer
    return { ...(await within(15000, 'lila to exit', lila.exited)), stderr: lila.stderr.split('\n').filter(l => l.startsWith('lila:')).join('\n') }
  }
  const wrongPort = await start(activated([port]), ['rr', a.address, '--port', String(other)])
  t.equal(wrongPort.code, 1)
  t.equal(wrongPort.stderr, `lila: listener tcp:${other}: the socket systemd gave as fd 3 listens on 127.0.0.1:${port}, not on port ${other} (--port)`)
  const wrongHost = await start(activated([port]), ['rr', a.address, '--host', '127.0.0.2'])
  t.equal(wrongHost.code, 1)
  t.equal(wrongHost.stderr, `lila: listener tcp:4444: the socket systemd gave as fd 3 listens on 127.0.0.1:${port}, not on 127.0.0.2 (--host)`)
  const twoSockets = await start(activated([port, other]), ['rr', a.address])
  t.equal(twoSockets.code, 1)
  t.equal(twoSockets.stderr, 'lila: systemd gave 2 sockets (LISTEN_FDS=2) for 1 listener: the socket systemd gave as fd 4 is for none of them; expected a listener for each socket')
})

t.test('sockets named after listeners go to them (FileDescriptorName=), the status listener\'s too', { skip: NO_ACTIVATE }, async t => {
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const [first, second, third] = await restartablePorts(3)
  const dir = tmpDir(t, 'lila-activate-')
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({
    'status-port': third,
    listeners: [
      { name: 'web', protocol: 'http', backends: [a.address] },
      { name: 'api', protocol: 'http', port: first, backends: [b.address] }
    ]
  }))
  // Named in another order than the listeners'.
  const prefix = activated([first, second, third], ['api', 'web', 'status'])
  const lila = await spawnActivated(t, ['--config', file], prefix, 3)
  t.equal(String((await request(second)).body), 'a\n', 'web: the socket named web')
  t.equal(String((await request(first)).body), 'b\n', 'api: the socket named api (its --port matches)')
  t.equal((await request(third, { path: '/status.json' })).status, 200, 'the status listener: the socket named status')
  await lila.waitForLine(new RegExp(`web: listening on 127\\.0\\.0\\.1:${second} `))
  t.equal((await lila.stop()).code, 0)
})

t.test('--redirect-http on a socket systemd gives: named redirect, or after the listeners', { skip: NO_ACTIVATE }, async t => {
  const a = await httpBackend(t, 'a')
  const [https, plain] = await restartablePorts(2)
  const state = tmpDir(t, 'lila-activate-')
  const args = ['rr', a.address, '--protocol', 'http', '--tls', 'local', '--state-dir', state, '--port', String(https), '--redirect-http', String(plain)]
  for (const names of [null, ['redirect', 'unknown']]) {
    const ports = names === null ? [https, plain] : [plain, https]
    const lila = await spawnActivated(t, args, activated(ports, names), 2)
    const res = await request(plain, { path: '/a?b=c', headers: { host: 'example.test' } }) // starts lila
    t.equal(res.status, 308, `${names === null ? 'in order' : 'named redirect'}: the plain socket redirects`)
    t.equal(res.headers.location, `https://example.test:${https}/a?b=c`)
    await lila.waitForLine(new RegExp(`redirect-http on 127\\.0\\.0\\.1:${plain}: `))
    t.equal((await lila.stop()).code, 0)
  }
})

t.test('under systemd-socket-activate, restarts and upgrades refuse no client while wrk runs', { skip: NO_ACTIVATE || NO_WRK }, async t => {
  const a = await httpBackend(t, 'a')
  const port = await restartablePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-restart-'))
  const stop = path.join(dir, 'stop')
  const pidFile = path.join(dir, 'lila.pid')
  // A supervisor that starts lila again whenever it exits, on the socket it holds (fd 3),
  // as systemd restarts a service whose socket it holds: LISTEN_PID names each lila.
  const supervisor = path.join(dir, 'restart.sh')
  fs.writeFileSync(supervisor, 'while [ ! -e "$STOP" ]; do sh -c \'export LISTEN_PID=$$; exec "$@"\' lila "$@"; done\n')
  const args = ['rr', a.address, '--protocol', 'http', '--pid-file', pidFile]
  const prefix = ['-l', `127.0.0.1:${port}`, '-E', `STOP=${stop}`, 'sh', supervisor, LILA]
  const lila = await spawnActivated(t, args, prefix, 1)
  const pids = new Set()
  t.teardown(async () => {
    fs.writeFileSync(stop, '')
    for (const pid of pids) try { process.kill(pid, 'SIGKILL') } catch {}
    fs.rmSync(dir, { recursive: true, force: true })
  })
  t.equal((await request(port)).status, 200, 'served on the socket')
  const wrkKeepAlive = startWrk(`http://127.0.0.1:${port}/`)
  const wrkPerRequest = startWrk(`http://127.0.0.1:${port}/`, ['-H', 'Connection: close'])
  t.teardown(() => { wrkKeepAlive.kill(); wrkPerRequest.kill() })
  const listening = new RegExp(`listening on 127\\.0\\.0\\.1:${port} `)
  const readPid = () => Number(fs.readFileSync(pidFile, 'utf8'))
  for (let i = 0; i < 3; i++) {
    await lila.waitForLine(listening, { count: i + 1, timeout: 30000 })
    await until(() => fs.existsSync(pidFile), 'the PID file', { timeout: 10000 })
    const pid = readPid()
    pids.add(pid)
    const before = a.requests
    await within(20000, 'requests through this lila', (async () => {
      while (a.requests < before + 50) await new Promise(resolve => setImmediate(resolve))
    })())
    process.kill(pid, 'SIGTERM') // systemctl restart: stop, then start; the socket stays open
    await gone(pid)
  }
  await lila.waitForLine(listening, { count: 4, timeout: 30000 })
  // And an upgrade: the socket systemd gave goes on to the new lila (and the supervisor
  // stops once the old one exits).
  fs.writeFileSync(stop, '')
  const upgraded = await runLila(['upgrade', '--pid-file', pidFile], { timeout: 60000 })
  t.equal(upgraded.code, 0, upgraded.stderr)
  const [, from, to] = await lila.waitForLine(UPGRADED, { timeout: 30000 })
  pids.add(Number(from)).add(Number(to))
  const [keepAlive, perRequest] = await Promise.all([wrkKeepAlive.stop(), wrkPerRequest.stop()])
  for (const [name, wrk] of [['keep-alive', keepAlive], ['Connection: close', perRequest]]) {
    t.ok(wrk.requests > 0, `wrk ${name}: ${wrk.requests} requests`)
    t.same(wrk.errors, { connect: 0, read: 0, write: 0, timeout: 0 }, `wrk ${name}: no socket error, none refused\n${wrk.text}`)
    t.equal(wrk.non2xx, 0)
  }
  t.ok(alive(Number(to)), 'the upgraded lila serves')
  t.equal((await request(port)).status, 200)
})
