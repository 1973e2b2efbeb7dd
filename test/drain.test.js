'use strict'

// A graceful close cuts nothing a client may be sending: an idle HTTP/1.1 keep-alive
// connection serves the request that comes within --drain-grace (with Connection:
// close), a response under way promises the next one and keeps it, HTTP/2 connections
// get GOAWAY twice and finish their streams. The same for SIGTERM and for a reload that
// removes a listener (an upgrade: upgrade.test.js). Through the spawned lila.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const path = require('path')
const http2 = require('http2')
const { httpBackend, spawnLila, within, until } = require('./fixtures/helpers')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { PREFACE, TYPE, FLAG, frame, headerBlock } = require('./fixtures/h2-frames')
const { tmpDir } = require('./fixtures/tmp')

// A keep-alive HTTP/1.1 connection read response by response.
function keepAlive (port) {
  const socket = net.connect({ port, host: '127.0.0.1' })
  socket.setEncoding('latin1')
  let text = ''
  let ended = false
  const waiters = []
  const check = () => {
    for (const waiter of waiters.slice()) if (waiter()) waiters.splice(waiters.indexOf(waiter), 1)
  }
  socket.on('data', chunk => { text += chunk; check() })
  socket.on('end', () => { ended = true; check() })
  socket.on('error', () => { ended = true; check() })
  return {
    socket,
    // Send a GET; resolves { head, body } of its response, or null if the connection ended first.
    get (path = '/') {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: lila\r\n\r\n`)
      return this.response()
    },
    response () {
      return within(15000, 'a response', new Promise(resolve => {
        const ready = () => {
          const end = text.indexOf('\r\n\r\n')
          if (end !== -1) {
            const head = text.slice(0, end)
            const length = Number((/content-length: (\d+)/i.exec(head) || [0, 0])[1])
            if (text.length >= end + 4 + length) {
              const body = text.slice(end + 4, end + 4 + length)
              text = text.slice(end + 4 + length)
              resolve({ head, body })
              return true
            }
          }
          if (ended) {
            resolve(null)
            return true
          }
          return false
        }
        if (!ready()) waiters.push(ready)
      }))
    },
    ended: () => within(15000, 'the connection to end', new Promise(resolve => {
      const done = () => { if (ended) resolve(); return ended }
      if (!done()) waiters.push(done)
    }))
  }
}

t.test('SIGTERM: an idle keep-alive connection serves one more request within --drain-grace, then closes', async t => {
  const a = await httpBackend(t, 'a')
  const lila = await spawnLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--drain-grace', '60s'])
  const client = keepAlive(lila.port)
  const first = await client.get()
  t.match(first.head, /^HTTP\/1\.1 200 /)
  t.notMatch(first.head, /connection: close/i, 'kept alive')
  lila.child.kill('SIGTERM')
  await lila.waitForLine(/SIGTERM: stopped accepting/)
  // The client writes its next request now, as a keep-alive client may at any moment.
  const second = await client.get()
  t.not(second, null, 'the request is served, not cut')
  t.match(second.head, /^HTTP\/1\.1 200 /)
  t.match(second.head, /\r\nconnection: close/i, 'and says the connection ends')
  t.equal(second.body, 'a\n')
  await client.ended()
  t.equal((await lila.exited).code, 0, 'lila exits once it is done')
})

t.test('SIGTERM: a connection idle past --drain-grace is closed without a word', async t => {
  const a = await httpBackend(t, 'a')
  const lila = await spawnLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--drain-grace', '50ms'])
  const client = keepAlive(lila.port)
  t.match((await client.get()).head, /^HTTP\/1\.1 200 /)
  lila.child.kill('SIGTERM')
  await client.ended()
  t.equal((await lila.exited).code, 0)
})

// A promise of the function that finishes the slow response, once the backend has it.
function slowResponse (start) {
  let reached
  const finish = new Promise(resolve => { reached = resolve })
  const handler = (req, res) => {
    if (req.url !== '/slow') return res.end('quick\n')
    start(res)
    reached(() => res.end(req.url === '/slow' && res.headersSent ? '67890' : 'slow\n'))
  }
  return { handler, finish: within(10000, 'the slow request to reach the backend', finish) }
}

t.test('SIGTERM while a response streams: its head promised keep-alive, so the next request is served too', async t => {
  const slow = slowResponse(res => {
    res.writeHead(200, { 'Content-Length': 10 })
    res.write('12345')
  })
  const a = await httpBackend(t, 'a', slow.handler)
  const lila = await spawnLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--drain-grace', '60s'])
  const client = keepAlive(lila.port)
  client.socket.write('GET /slow HTTP/1.1\r\nHost: lila\r\n\r\n')
  const finish = await slow.finish
  lila.child.kill('SIGTERM')
  await lila.waitForLine(/SIGTERM: stopped accepting/)
  finish()
  const response = await client.response()
  t.equal(response.body, '1234567890', 'the response under way completes')
  t.notMatch(response.head, /connection: close/i, 'its head had left before the drain')
  const next = await client.get()
  t.not(next, null, 'the request its client then sends is served')
  t.match(next.head, /\r\nconnection: close/i)
  await client.ended()
  t.equal((await lila.exited).code, 0)
})

for (const tls of [false, true]) {
  const over = tls ? 'over TLS' : 'in the clear'
  t.test(`SIGTERM: HTTP/2 ${over} gets GOAWAY twice (no new streams, then the last taken); no stream is refused`, async t => {
    const slowly = slowResponse(() => {})
    const a = await httpBackend(t, 'a', slowly.handler)
    const args = ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0']
    let connectOptions = {}
    if (tls) {
      const { cert, key, pem } = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
      args.push('--tls-cert', cert, '--tls-key', key)
      connectOptions = { ca: pem }
    }
    const lila = await spawnLila(t, args)
    const session = http2.connect(`${tls ? 'https' : 'http'}://127.0.0.1:${lila.port}`, connectOptions)
    session.on('error', () => {})
    const goaways = []
    session.on('goaway', (code, lastStreamID) => goaways.push([code, lastStreamID]))
    const read = stream => new Promise(resolve => {
      let body = ''
      stream.setEncoding('utf8')
      stream.on('data', chunk => { body += chunk })
      stream.on('end', () => resolve(body))
      stream.on('error', err => resolve(`error: ${err.code}`))
    })
    t.equal(await read(session.request({ ':path': '/' })), 'quick\n')
    const slow = read(session.request({ ':path': '/slow' }))
    const finish = await slowly.finish
    // The slow stream is finished the moment the first GOAWAY arrives: its end then
    // reaches lila before the client's answer to the PING behind that GOAWAY. Node's
    // client closes its session as soon as its last stream ends after a GOAWAY, so
    // lila must send the last GOAWAY before that end (it holds a stream's end until
    // the PING comes back: http2/session.js goAway); it lost it in 8 of 8 runs before.
    session.once('goaway', () => finish())
    lila.child.kill('SIGTERM')
    await within(10000, 'two GOAWAYs', new Promise(resolve => {
      const check = () => { if (goaways.length >= 2) resolve() }
      session.on('goaway', check)
      check()
    }))
    t.same(goaways[0], [0, 2 ** 31 - 1], 'busy past --drain-grace: first no new streams')
    t.same(goaways[1], [0, 3], 'then the last stream taken')
    t.equal(await slow, 'slow\n', 'the stream in flight finishes')
    await within(10000, 'the session to close', new Promise(resolve => session.once('close', resolve)))
    t.equal(goaways.length, 2, 'no other GOAWAY')
    t.equal((await lila.exited).code, 0)
  })
}

t.test('SIGTERM: the streams an idle HTTP/2 connection\'s client opens within --drain-grace are served, none refused', async t => {
  const a = await httpBackend(t, 'a')
  const lila = await spawnLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0'])
  // A client of raw frames, which reads nothing until told: whatever lila sends on the
  // drain, these streams are on their way before the client could have read it.
  const socket = net.connect(lila.port, '127.0.0.1')
  socket.on('error', () => {})
  const received = []
  const closed = new Promise(resolve => socket.on('close', resolve))
  let buf = Buffer.alloc(0)
  socket.on('data', chunk => {
    buf = Buffer.concat([buf, chunk])
    while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
      const length = buf.readUIntBE(0, 3)
      const type = buf[3]
      const id = buf.readUInt32BE(5) & 0x7fffffff
      if (type === TYPE.PING && (buf[4] & 1) === 0) socket.write(frame(TYPE.PING, 1, 0, buf.subarray(9, 17)))
      if (type === TYPE.SETTINGS && (buf[4] & 1) === 0) socket.write(frame(TYPE.SETTINGS, 1, 0))
      received.push({ type, id, last: type === TYPE.GOAWAY ? buf.readUInt32BE(9) & 0x7fffffff : null, flags: buf[4] })
      buf = buf.subarray(9 + length)
    }
  })
  const get = id => frame(TYPE.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, headerBlock())
  socket.write(Buffer.concat([PREFACE, frame(TYPE.SETTINGS, 0, 0), get(1)]))
  const ended = id => received.some(f => f.type === TYPE.DATA && f.id === id && (f.flags & FLAG.END_STREAM))
  await until(() => ended(1), 'the first response', { timeout: 10000 })
  socket.pause() // from now on the GOAWAY stays unread
  lila.child.kill('SIGTERM')
  await lila.waitForLine(/SIGTERM: stopped accepting/)
  // Idle, the connection had nothing in flight (Node would stop reading it after a
  // GOAWAY): these come after the drain began.
  socket.write(Buffer.concat([3, 5, 7, 9].map(get)))
  socket.resume()
  await within(15000, 'lila to close the connection', closed)
  t.same([3, 5, 7, 9].filter(ended), [3, 5, 7, 9], 'each is answered, none refused')
  const goaways = new Set(received.filter(f => f.type === TYPE.GOAWAY).map(f => f.last))
  t.same(goaways, new Set([9]), 'then, idle past --drain-grace, the connection is closed: GOAWAY, the last stream taken')
  t.equal((await lila.exited).code, 0)
})

t.test('a reload that removes a listener drains it the same way', async t => {
  const a = await httpBackend(t, 'a')
  const dir = tmpDir(t, 'lila-drain-')
  const file = path.join(dir, 'lila.json')
  const listener = name => ({ name, host: '127.0.0.1', port: 0, protocol: 'http', 'drain-grace': '60s', backends: [a.address] })
  fs.writeFileSync(file, JSON.stringify({ listeners: [listener('one'), listener('two')] }))
  const lila = await spawnLila(t, ['--config', file])
  const two = Number((await lila.waitForLine(/two: listening on 127\.0\.0\.1:(\d+) /))[1])
  const client = keepAlive(two)
  t.match((await client.get()).head, /^HTTP\/1\.1 200 /)
  fs.writeFileSync(file, JSON.stringify({ listeners: [listener('one')] }))
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/listener two removed/)
  const next = await client.get()
  t.not(next, null, 'the request on the idle connection is served')
  t.match(next.head, /\r\nconnection: close/i)
  await client.ended()
})
