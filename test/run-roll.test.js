'use strict'

// lila run through the spawned executable, continued (run.test.js has the rest): an
// instance slow to listen gets no request before it does, and a WebSocket and a long
// download opened before a rolling restart finish byte for byte; POST /app/restart,
// /metrics and the status page; --watch; --max-rss; lila upgrade under wrk.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const net = require('net')
const path = require('path')
const { request, statusJson, within } = require('./fixtures/helpers')
const { startWrk, upgradableLila, gone } = require('./fixtures/upgrade')
const { tool } = require('./fixtures/tools')
const { APP, runApp, instances, settled, groupMembers, requestLoop } = require('./fixtures/run')

const NO_WRK = tool('wrk').skip
t.setTimeout(180000)

// A WebSocket-style upgrade through lila to the app, which echoes: resolves the socket
// once the 101 came.
function upgraded (port) {
  return within(10000, 'the 101', new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write('GET /ws HTTP/1.1\r\nHost: app\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n')
    })
    let head = ''
    const onData = chunk => {
      head += chunk
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      if (!head.startsWith('HTTP/1.1 101')) return reject(new Error(head))
      resolve(socket)
    }
    socket.on('data', onData)
    socket.on('error', reject)
  }))
}

function echo (socket, text) {
  return within(10000, `the echo of ${text}`, new Promise(resolve => {
    let got = ''
    const onData = chunk => {
      got += chunk
      if (got.length < text.length) return
      socket.off('data', onData)
      resolve(got)
    }
    socket.on('data', onData)
    socket.write(text)
  }))
}

t.test('an instance slow to listen gets no request before it does; a WebSocket and a download survive a roll', async t => {
  const lila = await runApp(t, ['-i', '1'], { env: { APP_START_DELAY: '2000' } })
  t.equal((await request(lila.port)).status, 200, 'the first request is served: lila listened once app.1 was ready')
  const [first] = await instances(lila)
  const bytes = 3 * 1048576
  const download = request(lila.port, { path: `/download?bytes=${bytes}&ms=4000` })
  const socket = await upgraded(lila.port)
  t.equal(await echo(socket, 'before'), 'before')
  const loop = requestLoop(lila.port)
  const restart = request(lila.statusPort, { method: 'POST', path: '/app/restart' })
  await lila.waitForLine(/app\.1 ready on port \d+ \(pid \d+, generation 2\)/)
  t.equal(await echo(socket, 'during the roll'), 'during the roll', 'the WebSocket still echoes')
  socket.end()
  const loaded = await download
  t.equal(loaded.status, 200)
  t.equal(loaded.body.length, bytes, 'the download whole')
  const size = Math.ceil(bytes / 20)
  let wrong = 0
  for (let i = 0; i < loaded.body.length; i++) if (loaded.body[i] !== 97 + Math.floor(i / size) % 26) wrong++
  t.equal(wrong, 0, 'byte for byte')
  const answer = await restart
  t.equal(answer.status, 200)
  t.match(String(answer.body), /app: rolling restart done \(POST \/app\/restart\): 1 replaced/)
  const { ok, failed } = await loop.stop()
  t.ok(ok > 0, `${ok} requests during the roll`)
  t.same(failed, [], 'none failed')
  const snapshot = await statusJson(lila)
  const listener = snapshot.listeners[0]
  t.same(listener.retries, {}, 'no request was tried on the new instance before it listened (none retried)')
  t.equal(lila.lines.filter(line => / down: /.test(line)).length, 0, 'no backend was seen down')
  const [second] = listener.app.list
  t.not(second.pid, first.pid, 'app.1 replaced')
  t.same(listener.app.restarts, { control: 1 })
  const metrics = String((await request(lila.statusPort, { path: '/metrics' })).body)
  t.match(metrics, `lila_app_instances{listener="${listener.name}",state="ready"} 1\n`)
  t.match(metrics, `lila_app_restarts_total{listener="${listener.name}",reason="control"} 1\n`)
  const page = String((await request(lila.statusPort, { path: '/status' })).body)
  t.match(page, new RegExp(`<td>app\\.1</td><td>${second.pid}</td><td>${second.port}</td><td>2</td>`))
})

t.test('--watch: a change rolls once; a change under node_modules does nothing', async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-watch-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.writeFileSync(path.join(dir, 'node_modules', 'dep.js'), '1')
  fs.writeFileSync(path.join(dir, 'a.js'), '1')
  const lila = await runApp(t, ['-i', '1', '--watch', dir])
  await settled(lila, 1)
  for (let i = 2; i <= 4; i++) fs.writeFileSync(path.join(dir, 'a.js'), String(i))
  await lila.waitForLine(/app: rolling restart done \(.*a\.js changed\): 1 replaced/)
  // b.js, then a change under node_modules within the debounce: the roll names the last
  // change it heard, so it would name dep.js had that one been heard.
  fs.writeFileSync(path.join(dir, 'b.js'), '1')
  fs.writeFileSync(path.join(dir, 'node_modules', 'dep.js'), '2')
  await lila.waitForLine(/app: rolling restart done \(.*b\.js changed\): 1 replaced/)
  const rolls = lila.lines.filter(line => /app: rolling restart \(/.test(line))
  t.equal(rolls.length, 2, `two rolls: ${rolls.join(' / ')}`)
  t.notMatch(rolls.join('\n'), /node_modules/)
  t.same((await statusJson(lila)).listeners[0].app.restarts, { watch: 2 })
})

t.test('--max-rss: the leaking instance is replaced through a roll, no request failed', async t => {
  const lila = await runApp(t, ['-i', '1', '--max-rss', '150m'], { env: { APP_LEAK_MB_PER_S: '40' } })
  const loop = requestLoop(lila.port)
  const [done] = await lila.waitForLine(/app: rolling restart done \(app\.1 uses \d+ MB, over --max-rss 150 MB\): 1 replaced/)
  const { ok, failed } = await loop.stop()
  t.ok(ok > 0, `${ok} requests meanwhile; ${done}`)
  t.same(failed, [], 'none failed')
  t.ok((await statusJson(lila)).listeners[0].app.restarts['max-rss'] >= 1)
})

t.test('lila upgrade under lila run, under wrk: no request refused or cut; the old instances go', { skip: NO_WRK }, async t => {
  const args = ['run', `node ${APP}`, '-i', '2', '--protocol', 'http', '--host', '127.0.0.1', '--port', '0']
  const lila = await upgradableLila(t, args)
  const readyPids = from => lila.lines.slice(from).map(line => /app\.\d ready on port \d+ \(pid (\d+)/.exec(line))
    .filter(Boolean).map(match => Number(match[1]))
  await lila.line(/app\.\d ready on port/, { count: 2 })
  const before = readyPids(0)
  const url = `http://127.0.0.1:${lila.port}/`
  const loads = [startWrk(url), startWrk(url, ['-H', 'Connection: close'])]
  t.teardown(() => loads.forEach(load => load.kill()))
  await within(10000, 'requests through lila', (async () => {
    for (let i = 0; i < 1000 && (await request(lila.port)).status !== 200; i++);
  })())
  const upgraded = await lila.upgrade()
  t.equal(upgraded.code, 0, upgraded.stderr)
  await gone(upgraded.from)
  const [keepAlive, perRequest] = await Promise.all(loads.map(load => load.stop()))
  for (const [name, wrk] of [['keep-alive', keepAlive], ['Connection: close', perRequest]]) {
    t.ok(wrk.requests > 0, `wrk ${name}: ${wrk.requests} requests`)
    t.same(wrk.errors, { connect: 0, read: 0, write: 0, timeout: 0 }, `wrk ${name}: no socket error\n${wrk.text}`)
    t.equal(wrk.non2xx, 0, `wrk ${name}: every answer 200`)
  }
  t.equal(before.length, 2)
  t.same(groupMembers(before), [], 'the old lila\'s instances are gone with it')
  // The new lila said it was upgraded once listening; its second instance may say ready after.
  await lila.line(/app\.\d ready on port/, { count: 4 })
  const after = readyPids(0).filter(pid => !before.includes(pid))
  t.equal(after.length, 2, 'the new lila runs two instances of its own')
  for (const pid of after) process.kill(pid, 0)
})
