'use strict'

// `lila demo`, as a newcomer runs it: three backends, lila in front, a line to paste.

const t = require('tap')
const http = require('http')
const net = require('net')
const { spawn } = require('child_process')
const { spawnLila, runLila, listenOn } = require('./fixtures/helpers')

// Run `command` in bash as a user pasting it would: { code, stdout, stderr }.
function bash (command) {
  return new Promise(resolve => {
    const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', chunk => { stdout += chunk })
    child.stderr.on('data', chunk => { stderr += chunk })
    child.on('close', code => resolve({ code, stdout, stderr }))
  })
}

function get (url) {
  return new Promise((resolve, reject) => {
    http.get(url, res => {
      let body = ''
      res.on('data', chunk => { body += chunk })
      res.on('end', () => resolve(body))
    }).on('error', reject)
  })
}

t.test('lila demo balances over three local backends and says what to run', async t => {
  const lila = await spawnLila(t, ['demo', '--port', '0'])
  t.match(lila.listening, /^lila: listening on 127\.0\.0\.1:\d+ \(http, round-robin, 3 backends\)$/)
  await lila.waitForLine(/^lila: demo backends: 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+$/)
  const [, url] = await lila.waitForLine(/^lila: try: for i in 1 2 3 4 5 6; do curl -s (http:\/\/127\.0\.0\.1:\d+\/); done/)
  const bodies = []
  for (let i = 0; i < 6; i++) bodies.push(await get(url))
  const names = bodies.map(b => /^Hello from backend (\d) /.exec(b)[1])
  t.same(names, ['1', '2', '3', '1', '2', '3'], 'the requests take turns')
  t.match(bodies[3], /request 2 here/)
  t.equal((await lila.stop('SIGINT')).code, 0, 'Ctrl-C stops it cleanly')
})

t.test('lila demo with another mode', async t => {
  const lila = await spawnLila(t, ['demo', 'lc', '--port', '0'])
  t.match(lila.listening, /\(http, least-connections, 3 backends\)$/)
  t.equal((await lila.stop()).code, 0)
})

t.test('lila demo in tcp mode', async t => {
  const lila = await spawnLila(t, ['demo', '--protocol', 'tcp', '--port', '0'])
  t.match(lila.listening, /\(tcp, round-robin, 3 backends\)$/)
  const [, url] = await lila.waitForLine(/^lila: try: .*curl -s (http:\/\/127\.0\.0\.1:\d+\/)/)
  t.match(await get(url), /^Hello from backend 1 /)
  t.equal((await lila.stop()).code, 0)
})

t.test('the try: line pastes into bash as it is, and says how to stop on a line of its own', async t => {
  const lila = await spawnLila(t, ['demo', '--port', '0'])
  const [, command] = await lila.waitForLine(/^lila: try: (.*)$/)
  const pasted = await bash(command)
  t.equal(pasted.stderr, '', 'bash has nothing to say (no syntax error)')
  t.equal(pasted.code, 0)
  const names = pasted.stdout.split('\n').filter(Boolean).map(line => (/^Hello from backend (\d) /.exec(line) || [])[1])
  t.same(names, ['1', '2', '3', '1', '2', '3'], 'six requests, taking turns')
  await lila.waitForLine(/^lila: Ctrl-C stops the demo$/)
  t.equal((await lila.stop('SIGINT')).code, 0)
})

t.test('lila demo on a port already taken says how to take a free one', async t => {
  const server = net.createServer()
  await listenOn(t, server)
  const { port } = server.address()
  const result = await runLila(['demo', '--port', String(port)])
  t.equal(result.code, 1)
  t.equal(result.stderr, `lila: cannot listen on 127.0.0.1:${port}: address already in use; lila demo --port 0 takes a free port\n`)

  // Only the demo's own port gets the hint: lila itself, or another port taken, does not.
  const plain = await runLila([':9', '--host', '127.0.0.1', '--port', String(port)])
  t.equal(plain.stderr, `lila: cannot listen on 127.0.0.1:${port}: address already in use\n`)
  const status = await runLila(['demo', '--port', '0', '--status-port', String(port)])
  t.equal(status.stderr, `lila: cannot listen on 127.0.0.1:${port} (--status-port): address already in use\n`)
})
