'use strict'

// `lila demo`, as a newcomer runs it: three backends, lila in front, a line to paste.

const t = require('tap')
const http = require('http')
const { spawnLila } = require('./fixtures/helpers')

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
