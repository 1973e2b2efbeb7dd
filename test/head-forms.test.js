'use strict'

// Heads parsed into forms that are used again (lib/proxy/http1/connection-pool.js
// readHead: a backend connection's response heads, one after another in one object;
// http1/session.js: a client connection's request heads, the last one's form for the
// next once its exchange is done), and client connections that read into lila's buffers once kept alive
// (http1/client-reads.js): answers of every shape over a few keep-alive connections on
// both sides, each checked against the request it answers, and the access log's
// statuses against what the clients got. A head read while another's reader still
// used the same form would show here as a status, a field or a count that belongs to
// another request.

const t = require('tap')
const http = require('http')
const net = require('net')
const { spawnLila, httpBackend, settled, until } = require('./fixtures/helpers')

const REQUESTS = 120
const STATUSES = [200, 201, 404, 503, 204, 200]

// What request n is answered: its status, its extra fields (0 to 4 of them, so that a
// form's fields array grows and shrinks), an Early Hints head before it every fifth,
// a body but for 204.
const shapeOf = n => ({ status: STATUSES[n % STATUSES.length], extra: n % 5, hints: n % 5 === 3 })

async function backend (t) {
  return httpBackend(t, 'a', (req, res) => {
    const n = Number(new URL(req.url, 'http://x').searchParams.get('n'))
    const { status, extra, hints } = shapeOf(n)
    // What the client sent, as the backend got it: its own request's fields.
    const asked = Object.keys(req.headers).filter(name => name.startsWith('x-ask-'))
    res.setHeader('X-Seen', `${req.headers['x-req']}/${asked.length}/${asked.map(name => req.headers[name]).join(',')}`)
    if (hints) res.writeEarlyHints({ link: `</style-${n}.css>; rel=preload` })
    res.statusCode = status
    res.setHeader('X-N', String(n))
    for (let i = 0; i < extra; i++) res.setHeader(`X-Extra-${i}`, `${n}-${i}`)
    // Some answers' bodies wait a turn after their head, so that one connection's head
    // is read while another's answer is still on its way.
    const answer = () => res.end(status === 204 ? undefined : `body ${n}\n`)
    if (n % 3 !== 0) return answer()
    if (status !== 204) res.setHeader('Content-Length', String(`body ${n}\n`.length))
    res.flushHeaders()
    setTimeout(answer, 5)
  })
}

// A request's own fields: 0 to 3 of them, so that a request head's form grows and shrinks.
function asking (n) {
  const headers = { 'X-Req': String(n) }
  for (let i = 0; i < n % 4; i++) headers[`X-Ask-${i}`] = `${n}.${i}`
  return headers
}
const seenFor = n => `${n}/${n % 4}/${Array.from({ length: n % 4 }, (_, i) => `${n}.${i}`).join(',')}`

function get (port, agent, n) {
  return new Promise((resolve, reject) => {
    const hints = []
    const req = http.get({ host: '127.0.0.1', port, path: `/?n=${n}`, agent, headers: asking(n) }, res => {
      const chunks = []
      res.on('data', chunk => chunks.push(chunk))
      res.on('end', () => resolve({ n, status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString(), hints }))
    })
    req.on('information', info => hints.push(info.headers.link))
    req.on('error', reject)
  })
}

t.test(`${REQUESTS} answers of different shapes over keep-alive connections: each its own request's`, async t => {
  const b = await backend(t)
  const lila = await spawnLila(t, ['rr', b.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--status-port', '0', '--check', 'none', '--access-log', 'json'])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })
  t.teardown(() => agent.destroy())
  const answers = []
  let next = 0
  const client = async () => {
    while (next < REQUESTS) answers.push(await get(lila.port, agent, next++))
  }
  await Promise.all([client(), client(), client(), client()])
  t.equal(answers.length, REQUESTS)
  let wrong = 0
  for (const { n, status, headers, body, hints } of answers) {
    const shape = shapeOf(n)
    const extras = Object.keys(headers).filter(name => name.startsWith('x-extra-'))
    const ok = status === shape.status && headers['x-n'] === String(n) && extras.length === shape.extra &&
      headers['x-seen'] === seenFor(n) &&
      extras.every(name => headers[name] === `${n}-${name.slice(8)}`) &&
      body === (status === 204 ? '' : `body ${n}\n`) &&
      hints.length === (shape.hints ? 1 : 0) && (!shape.hints || hints[0] === `</style-${n}.css>; rel=preload`)
    if (!ok) {
      wrong++
      t.fail(`request ${n}: ${JSON.stringify({ status, headers, body, hints })}`)
    }
  }
  t.equal(wrong, 0, 'every answer is its own request\'s (status, fields, body, Early Hints), to what it asked')
  t.ok(b.requests === REQUESTS, 'the backend saw each request once')
  agent.destroy() // the clients' connections close: nothing stays counted
  await settled(lila)
  await until(() => lila.stdout.split('\n').filter(Boolean).length >= REQUESTS, 'an access log line per request')
  const logged = lila.stdout.split('\n').filter(Boolean).map(line => JSON.parse(line))
  const byTarget = new Map(logged.map(entry => [entry.target, entry.status]))
  t.equal(byTarget.size, REQUESTS, 'one line per request')
  t.ok(answers.every(({ n, status }) => byTarget.get(`/?n=${n}`) === status), 'each logged with the status its client got')
  t.equal((await lila.stop()).code, 0)
})

t.test('pipelined requests of different shapes on one connection: each forwarded as its client sent it', async t => {
  const b = await backend(t)
  const lila = await spawnLila(t, ['rr', b.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--status-port', '0', '--check', 'none'])
  const COUNT = 12
  let heads = ''
  for (let n = 0; n < COUNT; n++) {
    const fields = Object.entries(asking(n)).map(([name, value]) => `${name}: ${value}\r\n`).join('')
    heads += `GET /?n=${n} HTTP/1.1\r\nHost: pipelined.test\r\n${fields}${n === COUNT - 1 ? 'Connection: close\r\n' : ''}\r\n`
  }
  const socket = net.connect(lila.port, '127.0.0.1')
  socket.end(heads) // every request in one write: read one after another from one buffer
  const chunks = []
  for await (const chunk of socket) chunks.push(chunk)
  const text = Buffer.concat(chunks).toString('latin1')
  const seen = [...text.matchAll(/^X-Seen: (.*)\r$/gmi)].map(m => m[1])
  const numbers = [...text.matchAll(/^X-N: (\d+)\r$/gmi)].map(m => Number(m[1]))
  t.same(numbers, Array.from({ length: COUNT }, (_, n) => n), 'answered in order, each its own')
  t.same(seen, Array.from({ length: COUNT }, (_, n) => seenFor(n)), 'the backend got each request\'s own fields')
  t.equal((await lila.stop()).code, 0)
})
