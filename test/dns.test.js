'use strict'

// Discovery through DNS, end to end: the real `lila` asks our own DNS server (a fixture
// on 127.0.0.1) about a name whose answer changes, with backends on 127.0.0.2-4 (the
// whole of 127/8 is loopback on Linux) sharing one port.

const t = require('tap')
const net = require('net')
const { dnsServer } = require('./fixtures/dns-server')
const { exchange, openGreeted, spawnLila, closeServer, within } = require('./fixtures/helpers')

const HOSTS = ['127.0.0.2', '127.0.0.3', '127.0.0.4']

// One greet-then-echo backend on each of `hosts`, all on the same port.
async function sameportBackends (t, hosts) {
  for (let attempt = 0; attempt < 10; attempt++) {
    const servers = []
    try {
      let port = 0
      for (const host of hosts) {
        const server = net.createServer(socket => {
          socket.on('error', () => {})
          socket.write(`${host}\n`)
          socket.pipe(socket)
        })
        servers.push(server)
        await new Promise((resolve, reject) => {
          server.once('error', reject)
          server.listen({ host, port }, resolve)
        })
        port = server.address().port
      }
      t.teardown(() => Promise.all(servers.map(closeServer)))
      return port
    } catch (err) {
      await Promise.all(servers.map(closeServer))
      if (err.code !== 'EADDRINUSE') throw err
    }
  }
  throw new Error('no port free on all of ' + hosts.join(', '))
}

async function canBind (host) {
  const server = net.createServer()
  return new Promise(resolve => {
    server.once('error', () => resolve(false))
    server.listen({ host, port: 0 }, () => server.close(() => resolve(true)))
  })
}

async function servedBy (port, n) {
  const seen = []
  for (let i = 0; i < n; i++) seen.push((await exchange(port)).data.trim())
  return [...new Set(seen)].sort()
}

t.test('a name answered with 2, then 3, then 1 address: traffic follows, a removed one drains', async t => {
  for (const host of HOSTS) if (!await canBind(host)) return t.skip(`cannot listen on ${host} here`)
  const port = await sameportBackends(t, HOSTS)
  const dns = await dnsServer(t, { 'app.lila.test': { A: HOSTS.slice(0, 2) } })
  const lila = await spawnLila(t, [
    'rr', `app.lila.test:${port}`, '--host', '127.0.0.1', '--port', '0',
    '--dns-server', dns.address, '--resolve-interval', '100ms', '--check-interval', '100ms'
  ])
  t.match(lila.listening, /\(tcp, round-robin, 2 backends\)$/)
  t.ok(lila.lines.some(l => new RegExp(`127\\.0\\.0\\.3:${port} \\(app\\.lila\\.test\\)\\s+up\\s+tcp connect ok`).test(l)), 'the table lists what the name resolved to')
  t.same(await servedBy(lila.port, 6), HOSTS.slice(0, 2))

  dns.set('app.lila.test', { A: HOSTS })
  await lila.waitForLine(new RegExp(`^lila: app\\.lila\\.test:${port} resolves to 127\\.0\\.0\\.2, 127\\.0\\.0\\.3, 127\\.0\\.0\\.4 \\(added 127\\.0\\.0\\.4\\)$`))
  // A backend that joins is checked first, then takes traffic.
  await lila.waitForLine(new RegExp(`^lila: backend 127\\.0\\.0\\.4:${port} up: tcp connect ok$`))
  t.same(await servedBy(lila.port, 9), HOSTS)

  // A long connection on 127.0.0.3, kept open across its removal.
  let kept = null
  for (let i = 0; i < 6 && kept === null; i++) {
    const open = await openGreeted(lila.port)
    if (open.name === '127.0.0.3') kept = open
    else open.socket.destroy()
  }
  t.ok(kept, 'a connection to 127.0.0.3')

  dns.set('app.lila.test', { A: ['127.0.0.2'] })
  await lila.waitForLine(/resolves to 127\.0\.0\.2 \(removed 127\.0\.0\.3, 127\.0\.0\.4, 1 connection left to drain\)$/)
  t.same(await servedBy(lila.port, 6), ['127.0.0.2'], 'only the remaining address gets new traffic')
  const echoed = new Promise(resolve => kept.socket.once('data', chunk => resolve(String(chunk))))
  kept.socket.write('still here')
  t.equal(await within(5000, 'the echo', echoed), 'still here', 'the open connection to a removed address is undisturbed')
  kept.socket.end()
  await lila.waitForLine(new RegExp(`^lila: backend 127\\.0\\.0\\.3:${port} drained$`))

  dns.delete('app.lila.test') // NXDOMAIN from now on
  await lila.waitForLine(new RegExp(`^lila: cannot resolve app\\.lila\\.test:${port}: name not found; keeping 127\\.0\\.0\\.2$`))
  t.same(await servedBy(lila.port, 3), ['127.0.0.2'], 'a failed resolution keeps the last good set')
  t.ok(dns.queries.some(q => q.type === 'AAAA'), 'AAAA is asked too')
  t.notOk(dns.queries.some(q => !/^app\.lila\.test$/.test(q.name)), 'only the name is asked about')
})

t.test('IP literals are never resolved; a name next to them is', async t => {
  const port = await sameportBackends(t, ['127.0.0.1'])
  const dns = await dnsServer(t, { 'one.lila.test': { A: ['127.0.0.1'] } })
  const lila = await spawnLila(t, [
    'rr', `127.0.0.1:${port}`, `one.lila.test:${port}`, '--host', '127.0.0.1', '--port', '0',
    '--dns-server', dns.address, '--check', 'none', '--resolve-interval', '0ms'
  ])
  t.match(lila.listening, /\(tcp, round-robin, 1 backend\)$/, 'the same address twice is one backend')
  t.same([...new Set(dns.queries.map(q => q.name))], ['one.lila.test'])
  t.same(await servedBy(lila.port, 2), ['127.0.0.1'])
})

t.test('Discovery: a watch ended by unwatch never reports, even when its key is watched again', async t => {
  const { Discovery } = require('../lib/upstream/discovery')
  const answers = [] // the resolutions under way, each answered by hand
  const discovery = new Discovery({ interval: 0, resolve: () => new Promise(resolve => answers.push(resolve)) })
  t.teardown(() => discovery.close())
  const seen = []
  const first = discovery.watch('a.lila.test', (err, addresses) => seen.push(['first', err, addresses]), 'key')
  discovery.unwatch('key')
  const second = discovery.watch('a.lila.test', (err, addresses) => seen.push(['second', err, addresses]), 'key')
  t.equal(answers.length, 2)
  for (const answer of answers) answer(['10.0.0.1'])
  await within(5000, 'both resolutions', Promise.all([first, second]))
  t.same(seen, [['second', null, ['10.0.0.1']]], 'only the current watch hears the answer')
})
