'use strict'

// Hot reload: lb.reload(config) in-process (backends joining, draining and changing in
// place; listeners added, removed and replaced; a reload refused with nothing changed),
// then SIGHUP on the real executable with a config file.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const path = require('path')
const { createBalancer } = require('../lib/index')
const { parseConfigFile } = require('../lib/config/file')
const { tcpBackend, greetThenEcho, openGreeted, exchange, deadPort, captureLog, spawnLila, within, until, LILA, listenOn } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')

// A config from listener objects as they would be written in the file.
function config (listeners, top = {}) {
  return parseConfigFile(JSON.stringify({ check: 'none', host: '127.0.0.1', ...top, listeners }), 'test.json')
}

async function start (t, cfg) {
  const capture = captureLog('info')
  const lb = createBalancer(cfg, { log: capture.log })
  t.teardown(() => lb.close(0))
  const addresses = await lb.listen()
  return { lb, ports: addresses.map(a => Number(a.split(':').pop())), ...capture }
}

const portOf = (lb, name) => lb.stats().listeners.find(l => l.name === name).address.port

// Names of the backends that greet N new connections, in order.
async function served (port, n) {
  const names = []
  for (let i = 0; i < n; i++) names.push((await exchange(port)).data.trim())
  return names
}

t.test('backends join, drain and change weight; an open connection is never touched', async t => {
  const [a, b, c] = await Promise.all(['a', 'b', 'c'].map(name => tcpBackend(t, name, greetThenEcho)))
  const listener = backends => ({ name: 'front', port: 0, mode: 'rr', backends })
  const { lb, ports: [port] } = await start(t, config([listener([a.address])]))

  const long = await openGreeted(port)
  t.equal(long.name, 'a')

  let lines = await lb.reload(config([listener([a.address, b.address])]))
  t.same(lines, [`front: backend ${b.address} added`])
  const names = (await served(port, 4)).sort()
  t.same(names, ['a', 'a', 'b', 'b'], 'the new backend takes its turns at once (round-robin)')

  lines = await lb.reload(config([listener([b.address, `${c.address},weight=3`])]))
  t.same(lines, [`front: backend ${c.address} added`, `front: backend ${a.address} removed, 1 connection left to drain`])
  const snapshot = lb.stats().listeners[0].backends
  t.same(snapshot.map(s => [s.address, s.draining, s.live]), [
    [b.address, false, 0], [c.address, false, 0], [a.address, true, 1]
  ])
  t.same((await served(port, 8)).sort(), ['b', 'b', 'c', 'c', 'c', 'c', 'c', 'c'], 'weights 1:3; nothing new for the removed one')

  // The connection made before both reloads still echoes, through the drained backend.
  long.socket.write('still here')
  const echoed = await within(5000, 'the echo', new Promise(resolve => long.socket.once('data', resolve)))
  t.equal(echoed.toString(), 'still here')

  lines = await lb.reload(config([listener([b.address, `${c.address},weight=1,max-conn=5`])]))
  t.same(lines, [`front: backend ${c.address}: weight 3 -> 1, max-conn none -> 5`])
  t.same(lb.stats().listeners[0].backends.find(s => s.address === c.address).total, 6, 'changed in place: same counters')

  const drained = lb.stats().listeners[0].backends.find(s => s.address === a.address)
  t.equal(drained.live, 1)
  long.socket.end()
  await until(() => !lb.stats().listeners[0].backends.some(s => s.address === a.address), 'the drained backend to go')
})

t.test('options change in place: mode, timeouts, checks, names in the log', async t => {
  const a = await tcpBackend(t, 'a')
  const { lb, ports: [port] } = await start(t, config([{ port: 0, mode: 'rr', backends: [a.address] }]))
  const before = lb.stats().listeners[0]
  const lines = await lb.reload(config([{ port: 0, mode: 'lc', 'connect-timeout': '1s', retries: 0, backends: [a.address] }], { 'shutdown-timeout': '5s' }))
  t.same(lines, ['shutdown-timeout 30s -> 5s', 'tcp:0: mode round-robin -> least-connections, connect-timeout 3s -> 1s, retries 2 -> 0'])
  const after = lb.stats().listeners[0]
  t.equal(after.mode, 'least-connections')
  t.same(after.address, before.address, 'the same listener, still bound')
  t.equal((await exchange(port)).data, 'a\n')
  t.same(await lb.reload(config([{ port: 0, mode: 'lc', 'connect-timeout': '1s', retries: 0, backends: [a.address] }], { 'shutdown-timeout': '5s' })), [], 'the same file again: nothing changes')
})

t.test('health checks turned off bring a backend they had taken out back', async t => {
  const dead = net.createServer()
  await new Promise(resolve => dead.listen({ host: '127.0.0.1', port: 0 }, resolve))
  const deadAddress = `127.0.0.1:${dead.address().port}`
  await new Promise(resolve => dead.close(resolve))
  const { lb, lines } = await start(t, config([{ port: 0, check: 'tcp', backends: [deadAddress] }], { check: 'tcp' }))
  t.equal(lb.stats().listeners[0].backends[0].state, 'down')
  await lb.reload(config([{ port: 0, check: 'none', backends: [deadAddress] }]))
  t.equal(lb.stats().listeners[0].backends[0].state, 'up')
  t.match(lines.join('\n'), new RegExp(`backend ${deadAddress} up: health checks turned off`))
})

t.test('listeners: added, removed (drained), replaced when the protocol changes', async t => {
  const a = await tcpBackend(t, 'a', greetThenEcho)
  const one = { name: 'one', port: 0, backends: [a.address] }
  const two = { name: 'two', port: 0, backends: [a.address] }
  const { lb } = await start(t, config([one]))
  const onePort = portOf(lb, 'one')
  const open = await openGreeted(onePort)

  let lines = await lb.reload(config([one, two]))
  t.match(lines, [/^listener two added: listening on 127\.0\.0\.1:\d+ \(tcp, random, 1 backend\)$/])
  const twoPort = portOf(lb, 'two')
  t.equal((await exchange(twoPort)).data.split('\n')[0], 'a', 'the new listener serves')

  lines = await lb.reload(config([two]))
  t.same(lines, ['listener one removed, 1 connection left to drain'])
  t.same(lb.stats().listeners.map(l => l.name), ['two'])
  const refused = await exchange(onePort)
  t.equal(refused.error && refused.error.code, 'ECONNREFUSED', 'the removed listener no longer accepts')
  open.socket.write('drain me')
  t.equal((await within(5000, 'the echo', new Promise(resolve => open.socket.once('data', resolve)))).toString(), 'drain me', 'its open connection goes on')
  open.socket.end()

  lines = await lb.reload(config([{ ...two, protocol: 'http' }]))
  t.match(lines, [/^listener two replaced: listening on 127\.0\.0\.1:\d+ \(http, random, 1 backend\)$/], 'a new protocol: a new listener of the same name')
  t.equal(lb.stats().listeners[0].protocol, 'http')
})

t.test('a listener replaced on the same port: the old one stops accepting first', async t => {
  const a = await tcpBackend(t, 'a', greetThenEcho)
  const port = await deadPort() // free now; taken by lila below
  const { lb } = await start(t, config([{ name: 'web', port, backends: [a.address] }]))
  const open = await openGreeted(port)
  const lines = await lb.reload(config([{ name: 'web', port, protocol: 'http', backends: [a.address] }]))
  t.same(lines, [`listener web replaced: listening on 127.0.0.1:${port} (http, random, 1 backend); 1 connection left to drain on the old one`])
  open.socket.write('old')
  t.equal((await within(5000, 'the echo', new Promise(resolve => open.socket.once('data', resolve)))).toString(), 'old', 'the old connection goes on')
  open.socket.end()
  const reply = await exchange(port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  t.match(reply.data, /^HTTP\/1\.1 /, 'new connections speak http')
})

t.test('a reload that cannot be applied changes nothing', async t => {
  const a = await tcpBackend(t, 'a')
  const taken = net.createServer()
  await listenOn(t, taken)
  const { lb, ports: [port] } = await start(t, config([{ name: 'one', port: 0, backends: [a.address] }]))

  await t.rejects(lb.reload(config([{ name: 'one', port: 0, backends: [a.address] }, { name: 'two', port: taken.address().port, backends: [a.address] }])),
    { name: 'RuntimeError', message: `cannot listen on 127.0.0.1:${taken.address().port}: address already in use` })
  await t.rejects(lb.reload(config([{ name: 'one', port: 0, 'tls-cert': '/nonexistent.pem', 'tls-key': '/nonexistent.key', backends: [a.address] }])),
    { name: 'UsageError', message: 'cannot read "/nonexistent.pem" (test.json: listeners[0].tls-cert): no such file' })
  t.same(lb.stats().listeners.map(l => [l.name, l.tls]), [['one', false]])
  t.equal((await exchange(port)).data, 'a\n', 'still serving as before')
})

t.test('SIGHUP: a backend joins while a connection from before goes on; a broken file is refused', async t => {
  const [a, b] = await Promise.all(['a', 'b'].map(name => tcpBackend(t, name, greetThenEcho)))
  const dir = tmpDir(t, 'lila-reload-')
  const file = path.join(dir, 'lila.json')
  const write = backends => fs.writeFileSync(file, JSON.stringify({ check: 'none', listeners: [{ host: '127.0.0.1', port: 0, mode: 'rr', backends }] }))
  write([a.address])
  const lila = await spawnLila(t, ['--config', file])
  const long = await openGreeted(lila.port)
  t.equal(long.name, 'a')

  write([a.address, b.address])
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(1 change\)/)
  t.match(lila.stderr, `lila: reload: tcp:0: backend ${b.address} added\n`)
  const names = []
  for (let i = 0; i < 4; i++) {
    const { data } = await exchange(lila.port, 'x')
    names.push(data.split('\n')[0])
  }
  t.same(names.sort(), ['a', 'a', 'b', 'b'], 'the new backend gets traffic')

  fs.writeFileSync(file, '{ "listeners": [ { "port": 0, "backends": ["b:x"] } ] }')
  lila.child.kill('SIGHUP')
  const refused = await lila.waitForLine(/reload refused: (.*)$/)
  t.equal(refused[1], `${file}: listeners[0].backends[0]: invalid backend "b:x": expected a port number from 1 to 65535 after the ":"; keeping the running config`)
  t.equal((await exchange(lila.port, 'x')).data.split('\n')[0].length, 1, 'still serving')

  long.socket.write('undisturbed')
  const echoed = await within(5000, 'the echo', new Promise(resolve => long.socket.once('data', resolve)))
  t.equal(echoed.toString(), 'undisturbed', 'the connection from before both reloads still works')
  long.socket.end()
  t.equal((await lila.stop()).code, 0)
})

// A script that starts lila and reloads it as soon as it says where it listens: the
// handler must be in place by the time that line can be read (a few tries, as the
// race it guards against is a window of microseconds). Run through `env -u
// NODE_OPTIONS`: tap preloads a module into every node child it spawns, and that module
// handles signals itself, early, which would hide the race.
t.test('SIGHUP at once on the status or the listening line reloads, never kills', async t => {
  const dir = tmpDir(t, 'lila-reload-')
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify({ check: 'none', 'status-port': 0, listeners: [{ host: '127.0.0.1', port: 0, backends: [`127.0.0.1:${await deadPort()}`] }] }))
  for (let i = 0; i < 10; i++) {
    // The status line comes first, while the listeners are still being bound.
    const line = i % 2 === 0 ? /listening on/ : /status on/
    const lila = await spawnLila(t, ['-u', 'NODE_OPTIONS', LILA, '--config', file], { lila: '/usr/bin/env', waitForListening: false })
    let stderr = ''
    const onData = chunk => {
      stderr += chunk
      if (!line.test(stderr)) return
      lila.child.stderr.off('data', onData)
      lila.child.kill('SIGHUP') // in the same turn as the line arrives
    }
    lila.child.stderr.on('data', onData)
    await lila.waitForLine(/^lila: reloaded \(0 changes\)$/)
    t.equal((await lila.stop()).code, 0, `try ${i + 1}: alive, reloaded, then stopped`)
  }
})

t.test('a reload that shortens --idle-timeout reaches connections already open', async t => {
  const a = await tcpBackend(t, 'a', greetThenEcho)
  const listener = idle => ({ name: 'front', port: 0, backends: [a.address], 'idle-timeout': idle })
  const { lb, ports: [port] } = await start(t, config([listener('60s')]))
  const open = await openGreeted(port)
  const closed = new Promise(resolve => open.socket.once('close', resolve))
  await lb.reload(config([listener('200ms')]))
  // The reload itself cuts nothing: the connection still echoes, then goes idle.
  open.socket.write('still')
  const echoed = await within(5000, 'the echo', new Promise(resolve => open.socket.once('data', resolve)))
  t.equal(echoed.toString(), 'still', 'open across the reload')
  const idleFrom = Date.now()
  await within(5000, 'the idle connection to be closed under the new timeout', closed)
  t.ok(Date.now() - idleFrom >= 150, 'closed for idleness, not before the new timeout')
})
