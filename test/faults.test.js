'use strict'

// Process faults: a worker killed under load, a storm of reloads under load, running
// out of file descriptors. lila loses no more than it must and carries on.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const http = require('http')
const path = require('path')
const { spawn } = require('child_process')
const { httpBackend, request, spawnLila, tcpBackend, greetThenEcho, openGreeted, until, LILA } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function writeAtomically (file, text) {
  fs.writeFileSync(`${file}.tmp`, text)
  fs.renameSync(`${file}.tmp`, file)
}

// A GET that gives up after 5 s: a request that hangs is a failure to count, not a
// test that hangs.
function get (port) {
  return new Promise(resolve => {
    const req = http.get({ host: '127.0.0.1', port, agent: false }, res => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode }))
      res.on('error', err => resolve({ error: err.code || err.message }))
    })
    req.setTimeout(5000, () => req.destroy(Object.assign(new Error('hung'), { code: 'HUNG' })))
    req.on('error', err => resolve({ error: err.code || err.message }))
  })
}

async function loop (until, work) {
  const results = []
  for (let i = 0; i < 1e6 && !until(); i++) results.push(await work())
  return results
}

t.test('kill -9 of a worker under load: only its in-flight requests fail; it is replaced', async t => {
  const backend = await httpBackend(t, 'b', (req, res) => setTimeout(() => res.end('ok'), 5))
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--check', 'none', '--workers', '2'])
  const [, pid1] = (await lila.waitForLine(/^lila: workers: 1 \(pid (\d+)\), 2 \(pid (\d+)\)$/)).map(Number)
  let stop = false
  const CLIENTS = 8
  // A new connection per request: a kill can only take the requests in flight on it.
  const loops = Array.from({ length: CLIENTS }, () => loop(() => stop, () => get(lila.port)))
  await until(() => backend.requests >= 50, 'traffic', { timeout: 10000 })
  process.kill(pid1, 'SIGKILL')
  await lila.waitForLine(/worker 1 .* starting another/)
  await lila.waitForLine(/worker 1 is back \(pid \d+\)/)
  const before = backend.requests
  await until(() => backend.requests >= before + 50, 'traffic after the restart', { timeout: 10000 })
  stop = true
  const results = (await Promise.all(loops)).flat()
  const failed = results.filter(r => r.status !== 200)
  t.ok(failed.length <= CLIENTS, `${failed.length} of ${results.length} requests failed (${[...new Set(failed.map(f => f.error || f.status))]}): at most the ${CLIENTS} in flight`)
  t.notOk(failed.some(f => f.error === 'HUNG'), 'none hung')
  t.ok(results.length - failed.length > 100, 'the rest were served')
  t.equal((await lila.stop()).code, 0)
})

t.test('a storm of reloads (SIGHUP every 20 ms) under load drops nothing', async t => {
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const echo = await tcpBackend(t, 'echo', greetThenEcho)
  const dir = tmpDir(t, 'lila-storm-')
  const file = path.join(dir, 'lila.json')
  // Written aside and renamed in, as a careful operator does: a SIGHUP that lands
  // mid-write would otherwise read half a file (and rightly refuse it).
  const write = weight => writeAtomically(file, JSON.stringify({
    check: 'none',
    'status-port': 0,
    listeners: [
      { name: 'web', protocol: 'http', host: '127.0.0.1', port: 0, mode: 'round-robin', backends: [`${a.address},weight=${weight}`, b.address] },
      { name: 'raw', protocol: 'tcp', host: '127.0.0.1', port: 0, backends: [echo.address] }
    ]
  }))
  write(1)
  const lila = await spawnLila(t, ['--config', file])
  // spawnLila waited for the first listening line; each listener prints its own.
  const portOf = async name => Number((await lila.waitForLine(new RegExp(`^lila: ${name}: listening on 127\\.0\\.0\\.1:(\\d+)`)))[1])
  const webPort = await portOf('web')
  const rawPort = await portOf('raw')
  // A long-lived connection through the tcp listener, across every reload.
  const long = await openGreeted(rawPort)
  let stop = false
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })
  t.teardown(() => agent.destroy())
  const loops = Array.from({ length: 4 }, () => loop(() => stop, () => request(webPort, { agent })))
  let reloads = 0
  for (let i = 0; i < 100; i++) {
    write(1 + (i % 3))
    lila.child.kill('SIGHUP')
    reloads++
    await sleep(20) // the storm's pace: the subject, not a wait for something
  }
  // Signals that arrive while one is pending merge, so not every one is a reload; but
  // a lila that stopped reloading after the first would not get to ten.
  await lila.waitForLine(/^lila: reloaded/, { count: 10, timeout: 15000 })
  stop = true
  const results = (await Promise.all(loops)).flat()
  const failed = results.filter(r => r.status !== 200)
  t.same(failed.slice(0, 3), [], `no request failed during ${reloads} reloads (${results.length} served)`)
  const echoed = await new Promise(resolve => { long.socket.once('data', d => resolve(String(d))); long.socket.write('still here') })
  t.equal(echoed, 'still here', 'the long-lived connection went through every reload')
  long.socket.destroy()
  t.notOk(lila.lines.some(l => /reload refused/.test(l)), 'no reload was refused')
  const weightLine = new RegExp(`^lila: reload: web: backend ${a.address.replace(/\./g, '\\.')}: weight \\d+ -> (\\d+)$`)
  t.comment(`the storm changed a's weight ${lila.lines.filter(l => weightLine.test(l)).length} times in ${reloads} SIGHUPs`)
  // And what the file says last is what runs: said, and in the status.
  const said = lila.lines.filter(l => weightLine.test(l)).length
  write(7)
  lila.child.kill('SIGHUP')
  t.equal((await lila.waitForLine(weightLine, { count: said + 1 }))[1], '7', 'the last reload says the new weight')
  const statusPort = Number((await lila.waitForLine(/status on http:\/\/\S+:(\d+)\/status$/))[1])
  const web = JSON.parse((await request(statusPort, { path: '/status.json' })).body).listeners.find(l => l.name === 'web')
  t.equal(web.backends.find(x => x.address === a.address).weight, 7, 'and the status shows it running')
  t.equal((await lila.stop()).code, 0)
})

t.test('out of file descriptors: logged, survived, serving again once some free', async t => {
  const echo = await tcpBackend(t, 'echo', greetThenEcho)
  // A low descriptor limit for lila alone.
  const child = spawn('sh', ['-c', `ulimit -n 64 && exec "${LILA}" rr ${echo.address} --host 127.0.0.1 --port 0 --check none`], { stdio: ['ignore', 'ignore', 'pipe'] })
  t.teardown(() => child.kill('SIGKILL'))
  let stderr = ''
  child.stderr.on('data', c => { stderr += c })
  const listening = () => /listening on 127\.0\.0\.1:(\d+)/.exec(stderr)
  await until(() => listening() !== null, 'lila to listen', { timeout: 10000 })
  const port = Number(listening()[1])
  // Each connection costs lila two descriptors: 64 run out before 40 connections.
  const held = []
  for (let i = 0; i < 40; i++) {
    const socket = net.connect(port, '127.0.0.1')
    socket.on('error', () => {})
    held.push(socket)
  }
  const ranOut = /out of file descriptors \(limit 64\)/
  await until(() => ranOut.test(stderr), 'lila to say it ran out', { timeout: 10000 })
  t.match(stderr, ranOut, `logged: ${stderr.split('\n').find(l => ranOut.test(l))}`)
  t.equal(child.exitCode, null, 'lila is still running')
  for (const socket of held) socket.destroy()
  // Once descriptors free up, a new client is served.
  let greeted = null
  await until(async () => (greeted = await openGreeted(port).catch(() => null)) !== null,
    'a client served', { every: 100 }).catch(() => {}) // asserted below
  t.ok(greeted, 'a new client is served once descriptors are free')
  t.equal(greeted && greeted.name, 'echo')
  if (greeted) greeted.socket.destroy()
  t.notMatch(stderr, /backend \S+ down/, 'the backend was not blamed for lila\'s own shortage')
})
