'use strict'

// TCP mode end to end: the real `lila` executable in front of real backends.

const t = require('tap')
const net = require('net')
const crypto = require('crypto')
const {
  tcpBackend, greetThenEcho, deadPort, blackhole, exchange, openGreeted, spawnLila, statusJson, settled, within
} = require('./fixtures/helpers')
const { blockFor } = require('./fixtures/bodies')

// These tests are about moving bytes: no health probes (they would count as backend
// connections). test/health.test.js covers the checks.
const base = ['--host', '127.0.0.1', '--port', '0', '--check', 'none']

t.test('round-robin: 300 sequential connections over 3 backends give 100/100/100', async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => tcpBackend(t, name)))
  const lila = await spawnLila(t, ['round-robin', ...backends.map(b => b.address), ...base])
  t.match(lila.listening, /^lila: listening on 127\.0\.0\.1:\d+ \(tcp, round-robin, 3 backends\)$/)
  const served = { a: 0, b: 0, c: 0 }
  const errors = []
  for (let i = 0; i < 300; i++) {
    const { data, error } = await exchange(lila.port)
    if (error) errors.push(error.code)
    served[data.trim()]++
  }
  t.same(errors, [], 'no client errors')
  t.same(served, { a: 100, b: 100, c: 100 })
  t.same(backends.map(b => b.connections), [100, 100, 100])
})

t.test('the mode may be left out: random, and the ":port" shorthand', async t => {
  const backends = await Promise.all(['a', 'b'].map(name => tcpBackend(t, name)))
  const lila = await spawnLila(t, [`:${backends[0].port}`, `:${backends[1].port}`, ...base])
  t.match(lila.listening, /\(tcp, random, 2 backends\)$/)
  const seen = new Set()
  for (let i = 0; i < 40; i++) seen.add((await exchange(lila.port)).data.trim())
  t.same([...seen].sort(), ['a', 'b'], 'both backends serve')
})

t.test('least-connections: a new connection goes where a connection just closed', async t => {
  const backends = await Promise.all(['a', 'b', 'c'].map(name => tcpBackend(t, name, greetThenEcho)))
  const lila = await spawnLila(t, ['lc', ...backends.map(b => b.address), ...base, '--log-level', 'debug'])
  const open = []
  for (let i = 0; i < 3; i++) open.push(await openGreeted(lila.port))
  t.same(open.map(o => o.name).sort(), ['a', 'b', 'c'], 'one connection each')
  for (const victim of [1, 0, 2]) {
    const closedName = open[victim].name
    open[victim].socket.end()
    await lila.waitForLine(/: closed, /, { count: [1, 0, 2].indexOf(victim) + 1 })
    open[victim] = await openGreeted(lila.port)
    t.equal(open[victim].name, closedName, `the replacement went to ${closedName}`)
  }
  for (const o of open) o.socket.destroy()
})

t.test('least-time: a slow backend gets little, a fast one the rest', async t => {
  // Both greet first; "slow" takes 300ms to. In tcp mode the latency sample is the
  // connect time plus the wait for the backend's first byte. The gap is wide because
  // the mode keeps a peak (decaying over 10 s): with a 60ms gap, one late first byte
  // from "fast" on a busy machine sent "slow" 20 of 30; now only a first byte from
  // "fast" later than 300ms would.
  const fast = await tcpBackend(t, 'fast')
  const slow = await tcpBackend(t, 'slow', socket => {
    const timer = setTimeout(() => socket.end('slow\n'), 300)
    socket.on('close', () => clearTimeout(timer))
  })
  const lila = await spawnLila(t, ['least-time', slow.address, fast.address, ...base])
  t.match(lila.listening, /\(tcp, least-time, 2 backends\)$/)
  const served = { fast: 0, slow: 0 }
  for (let i = 0; i < 30; i++) served[(await exchange(lila.port)).data.trim()]++
  t.ok(served.slow >= 1, 'the slow one was tried (to be measured)')
  t.ok(served.slow <= 5, `the slow one got ${served.slow} of 30`)
  t.equal(served.fast + served.slow, 30)
})

t.test('failover: a refused backend and one that never answers the connect lose no client', async t => {
  const good = await tcpBackend(t, 'good')
  const refused = await deadPort()
  const silent = await blackhole(t)
  const lila = await spawnLila(t, [
    'rr', `127.0.0.1:${refused}`, `127.0.0.1:${silent}`, good.address,
    ...base, '--connect-timeout', '150ms', '--log-level', 'debug'
  ])
  for (let i = 0; i < 12; i++) {
    const { data, error } = await exchange(lila.port)
    t.equal(error, null)
    t.equal(data, 'good\n', `connection ${i + 1} reached the good backend`)
  }
  t.equal(good.connections, 12)
  t.ok(lila.lines.some(l => /connect to 127\.0\.0\.1:\d+ failed: connect timed out/.test(l)), 'the timeout fired')
  t.ok(lila.lines.some(l => /connect to 127\.0\.0\.1:\d+ failed: connection refused/.test(l)), 'the refusal was seen')
  await lila.waitForLine(new RegExp(`backend 127\\.0\\.0\\.1:${refused} down: 5 failures in a row \\(connection refused\\)`))
})

t.test('the client\'s first bytes wait until a backend is connected, and are not lost on failover', async t => {
  const echo = await tcpBackend(t, 'echo', socket => socket.pipe(socket))
  const refused = await deadPort()
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${refused}`, echo.address, ...base])
  for (let i = 0; i < 4; i++) {
    const { data } = await exchange(lila.port, `hello ${i}`)
    t.equal(data, `hello ${i}`)
  }
})

t.test('all backends dead: lila closes the client, says why, and stays up', async t => {
  const ports = [await deadPort(), await deadPort()]
  const lila = await spawnLila(t, ['rr', ...ports.map(p => `127.0.0.1:${p}`), ...base, '--status-port', '0'])
  const unserved = /no backend could take a connection from .*$/
  for (let i = 0; i < 5; i++) {
    // The client never ends its side first (it ends it only in answer to lila's FIN):
    // the close can only come from lila.
    const { data } = await within(5000, 'lila to close the client', exchange(lila.port, 'anyone?', { end: false, allowHalfOpen: false }))
    t.equal(data, '', 'nothing came back')
    const [said] = await lila.waitForLine(unserved, { count: i + 1 })
    t.equal(said, 'no backend could take a connection from 127.0.0.1 (2 tried)', `client ${i + 1}: the reason, both backends tried`)
  }
  const [listener] = (await statusJson(lila)).listeners
  t.match(listener, { accepted: 5, unserved: 5, active: 0 }, 'five clients taken, five unserved, none left open')
  t.same(listener.backends.map(b => [b.total, b.failures]), [[5, 5], [5, 5]], 'each backend tried once per client, and failed each time')
  t.equal(lila.child.exitCode, null, 'lila is still running')
  t.equal((await lila.stop()).code, 0, 'and exits 0 when asked')
})

t.test('32 MiB each way with half-close arrives intact', async t => {
  const SIZE = 32 * 1024 * 1024
  const reply = crypto.randomBytes(SIZE)
  // Reads until the client half-closes, then answers with the sha256 of what it got and
  // 32 MiB of its own: the reverse direction must still flow after the client's FIN.
  const backend = await tcpBackend(t, 'sink', socket => {
    const hash = crypto.createHash('sha256')
    socket.on('data', chunk => hash.update(chunk))
    socket.on('end', () => {
      socket.write(hash.digest('hex') + '\n')
      socket.end(reply)
    })
  })
  const lila = await spawnLila(t, ['rr', backend.address, ...base])
  const sent = crypto.randomBytes(SIZE)
  const received = await within(60000, 'the 32 MiB exchange', new Promise((resolve, reject) => {
    const chunks = []
    const socket = net.connect({ port: lila.port, host: '127.0.0.1', allowHalfOpen: true })
    socket.on('data', chunk => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('end', () => resolve(Buffer.concat(chunks)))
    socket.end(sent)
  }))
  const newline = received.indexOf('\n')
  t.equal(received.subarray(0, newline).toString(), crypto.createHash('sha256').update(sent).digest('hex'), 'the backend got every byte')
  const back = received.subarray(newline + 1)
  t.equal(back.length, SIZE)
  t.ok(back.equals(reply), 'the client got every byte back')
})

t.test('80 downloads at once, half read slowly, and small exchanges meanwhile: every byte arrives intact', async t => {
  // Backend reads are copied out of a buffer all sockets share, or (bulk) written from a
  // buffer of the socket's own while no write holds it (tcp.js READ): many sockets,
  // slow readers and small replies interleaved must not mix up a byte.
  const SIZE = 1024 * 1024
  const backend = await tcpBackend(t, 'mixed', socket => {
    let head = Buffer.alloc(0)
    socket.on('data', function first (chunk) {
      head = Buffer.concat([head, chunk])
      if (!head.includes(10)) return
      socket.removeListener('data', first)
      if (head.toString('latin1', 0, 3) === 'big') {
        const data = crypto.randomBytes(SIZE)
        socket.write(crypto.createHash('sha256').update(data).digest('hex') + '\n')
        socket.end(data)
      } else {
        socket.write(head)
        socket.on('data', chunk => socket.write(chunk))
        socket.on('end', () => socket.end())
      }
    })
  })
  const lila = await spawnLila(t, ['rr', backend.address, ...base])
  const download = slow => new Promise((resolve, reject) => {
    const chunks = []
    const socket = net.connect(lila.port, '127.0.0.1')
    socket.on('error', reject)
    socket.on('data', chunk => {
      chunks.push(chunk)
      if (slow) {
        socket.pause()
        setTimeout(() => socket.resume(), 2)
      }
    })
    socket.on('end', () => {
      const all = Buffer.concat(chunks)
      const newline = all.indexOf('\n')
      const body = all.subarray(newline + 1)
      resolve(body.length === SIZE && crypto.createHash('sha256').update(body).digest('hex') === all.subarray(0, newline).toString())
    })
    socket.write('big\n')
  })
  const chat = async i => {
    const lines = Array.from({ length: 20 }, (_, j) => `echo ${i} ${j} ${'.'.repeat(j * 7)}\n`)
    const { data } = await exchange(lila.port, lines.join(''))
    return data === lines.join('')
  }
  const results = await within(60000, 'the downloads and exchanges', Promise.all([
    ...Array.from({ length: 80 }, (_, i) => download(i % 2 === 1)),
    ...Array.from({ length: 100 }, (_, i) => chat(i))
  ]))
  t.equal(results.slice(0, 80).filter(ok => ok).length, 80, 'every download intact')
  t.equal(results.slice(80).filter(ok => ok).length, 100, 'every exchange intact')
})

t.test('kept-open connections, 1 MiB answers back to back, slow readers, quiet gaps: every byte intact', async t => {
  // A backend socket keeps its own read buffer across an answer's small last read, and
  // is put back on the shared one once its connection goes quiet (tcp-reads.js): answers
  // that follow each other, clients that stall holding what was written to them, and
  // gaps of more than two sweeps must not mix up a byte. Each answer is 1 MiB and a few
  // bytes of its own pattern. Sweeps come every 250 ms by --connect-timeout 2s (an
  // eighth of it), not by a short --idle-timeout: that closed a connection whose client
  // process a busy machine had not run for 2 s, and the client waited for answers.
  const SIZE = 1024 * 1024 + 37
  const answerTo = name => {
    const block = blockFor(name)
    const out = Buffer.allocUnsafe(SIZE)
    for (let i = 0; i < SIZE; i += block.length) block.copy(out, i)
    return out
  }
  const digest = data => crypto.createHash('sha256').update(data).digest('hex')
  const backend = await tcpBackend(t, 'answers', socket => {
    let pending = ''
    socket.on('data', chunk => {
      pending += chunk.toString('latin1')
      for (let newline = pending.indexOf('\n'); newline !== -1; newline = pending.indexOf('\n')) {
        socket.write(answerTo(pending.slice(0, newline)))
        pending = pending.slice(newline + 1)
      }
    })
    socket.on('end', () => socket.end())
  })
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--connect-timeout', '2s'])
  // One connection asking for six answers, three at a time; before the second three, a
  // gap of `gapMs`. A slow one stalls for 20 ms after every 8 chunks, so that lila's
  // writes wait holding what they were given. Each answer intact, in order.
  const client = (id, { slow, gapMs }) => new Promise((resolve, reject) => {
    const socket = net.connect(lila.port, '127.0.0.1')
    const results = []
    let chunks = []
    let got = 0
    let since = 0
    const ask = first => socket.write([first, first + 1, first + 2].map(n => `${id}-${n}\n`).join(''))
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`client ${id}: closed after ${results.length} answers and ${got} bytes`)))
    socket.on('data', chunk => {
      chunks.push(chunk)
      got += chunk.length
      if (slow && ++since === 8) {
        since = 0
        socket.pause()
        setTimeout(() => socket.resume(), 20)
      }
      while (got >= SIZE) {
        const all = Buffer.concat(chunks)
        const n = results.length + 1
        results.push(digest(all.subarray(0, SIZE)) === digest(answerTo(`${id}-${n}`)))
        chunks = [all.subarray(SIZE)]
        got -= SIZE
        if (n === 3) setTimeout(ask, gapMs, 4)
        if (n === 6) socket.end(() => resolve(results))
      }
    })
    ask(1)
  })
  const results = await within(60000, 'the answers', Promise.all(Array.from({ length: 12 }, (_, i) =>
    client(i, { slow: i % 3 === 1, gapMs: i % 2 === 0 ? 600 : 0 }))))
  const answers = results.flat()
  t.equal(answers.length, 72, 'every answer came')
  t.equal(answers.filter(ok => ok).length, 72, 'every answer intact')
})

t.test('an error on one side ends the other', async t => {
  t.test('client resets: the backend connection closes', async t => {
    const backend = await tcpBackend(t, 'b', greetThenEcho)
    const lila = await spawnLila(t, ['rr', backend.address, ...base])
    const { socket } = await openGreeted(lila.port)
    const closed = backend.nextClose()
    socket.resetAndDestroy()
    await within(5000, 'the backend side to close', closed)
    t.equal(backend.open, 0)
  })

  t.test('backend resets: the client sees it', async t => {
    const backend = await tcpBackend(t, 'b', socket => {
      socket.write('b\n')
      socket.once('data', () => socket.resetAndDestroy())
    })
    const lila = await spawnLila(t, ['rr', backend.address, ...base])
    const { socket } = await openGreeted(lila.port)
    const ended = new Promise(resolve => {
      socket.on('error', err => resolve(err.code))
      socket.on('close', () => resolve('closed'))
    })
    socket.write('boom')
    t.equal(await within(5000, 'the client to be reset', ended), 'ECONNRESET')
  })

  t.test('backend resets before a byte went either way: another backend takes the client', async t => {
    // What a client sees when a backend's listen socket closes with its connection
    // still in the backlog: connected, then reset. Nothing reached the backend.
    const rude = await tcpBackend(t, 'rude', socket => socket.resetAndDestroy())
    const good = await tcpBackend(t, 'good', socket => socket.end('good\n'))
    const lila = await spawnLila(t, ['rr', rude.address, good.address, ...base, '--check', 'none'])
    for (let i = 0; i < 4; i++) {
      const { data, error } = await exchange(lila.port)
      t.same({ data, error: error && error.code }, { data: 'good\n', error: null })
    }
    t.ok(rude.connections >= 1, 'the rude backend was tried')
  })
})

// --retry-on reset: bytes a backend took and reset before answering go to another
// backend, when they fit in 64 KiB (REPLAY_LIMIT); without it, or past that, the
// client is reset. `rude` reads everything up to the client's FIN, then resets.
t.test('--retry-on reset: bytes a backend reset before answering go to another backend, up to 64 KiB', async t => {
  const rude = await tcpBackend(t, 'rude', (socket, backend) => {
    const chunks = []
    socket.on('data', chunk => chunks.push(chunk))
    socket.on('end', () => {
      ;(backend.received ||= []).push(Buffer.concat(chunks))
      socket.resetAndDestroy()
    })
  })
  const echo = await tcpBackend(t, 'echo', socket => socket.pipe(socket))
  const took = () => (rude.received || []).length
  const digest = data => crypto.createHash('sha256').update(data).digest('hex')
  // Each client's bytes, and what it got: its bytes back from echo, or a reset when
  // rude took them and they were not sent again.
  async function clients (lila, payloads) {
    const outcomes = []
    for (const payload of payloads) {
      const before = took()
      const { data, error } = await exchange(lila.port, payload)
      const tookIt = took() > before
      if (tookIt) t.equal(digest(rude.received.at(-1)), digest(payload), 'rude read the bytes whole before it reset')
      outcomes.push({ tookIt, echoed: data === payload.toString() && error === null, reset: error !== null && error.code === 'ECONNRESET' })
    }
    return outcomes
  }
  const args = extra => ['rr', rude.address, echo.address, ...base, '--eject-after', '0', '--status-port', '0', ...extra]

  const opted = await spawnLila(t, args(['--retry-on', 'reset']))
  const small = await clients(opted, ['one', 'two', 'three', 'four'].map(s => Buffer.from(s)))
  t.ok(small.some(o => o.tookIt), 'rude took some')
  t.same(small.filter(o => !o.echoed), [], 'every client got its bytes back from echo')
  const limit = crypto.randomBytes(64 * 1024)
  const atLimit = await clients(opted, [limit, limit])
  t.ok(atLimit.some(o => o.tookIt) && atLimit.every(o => o.echoed), '64 KiB: sent again, and echoed whole')
  const past = crypto.randomBytes(64 * 1024 + 1)
  const pastLimit = await clients(opted, [past, past])
  t.ok(pastLimit.some(o => o.tookIt), 'rude took one past 64 KiB')
  t.same(pastLimit.map(o => o.tookIt ? o.reset : o.echoed), [true, true], 'past 64 KiB: not kept, the client reset; the other echoed')
  await settled(opted)

  const plain = await spawnLila(t, args([]))
  const without = await clients(plain, ['one', 'two'].map(s => Buffer.from(s)))
  t.same(without.map(o => o.tookIt ? o.reset : o.echoed), [true, true], 'without it: the client rude took is reset')
  t.ok(without.some(o => o.tookIt))
  await settled(plain)
})

t.test('--retry-on in tcp mode takes reset or none only', async t => {
  const { parseCommandLine } = require('../lib/config/argv')
  t.same(parseCommandLine([':80', '--retry-on', 'reset']).config.listeners[0].retryOn, ['reset'])
  t.throws(() => parseCommandLine([':80', '--retry-on', '502,reset']),
    /option --retry-on "502,reset" names statuses, which need --protocol http: expected reset or none with --protocol tcp/)
})

t.test('--idle-timeout closes a connection with no traffic', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--idle-timeout', '200ms'])
  const { socket } = await openGreeted(lila.port)
  const started = Date.now()
  await within(5000, 'the idle connection to close', new Promise(resolve => socket.on('close', resolve)))
  t.ok(Date.now() - started >= 150, 'not before the timeout')
  await within(5000, 'the backend side to close', backend.open === 0 ? Promise.resolve() : backend.nextClose())
})

t.test('--max-conn holds extra clients until a slot frees, then serves them', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--max-conn', '1'])
  const first = await openGreeted(lila.port)
  const second = openGreeted(lila.port)
  // A round trip on the first connection: lila has surely seen the second by then.
  await new Promise(resolve => { first.socket.once('data', resolve); first.socket.write('ping') })
  t.equal(backend.connections, 1, 'the second client waits; the backend has seen one connection')
  first.socket.end()
  const served = await within(5000, 'the waiting client to be served', second)
  t.equal(served.name, 'b')
  t.equal(backend.connections, 2)
  served.socket.destroy()
})

t.test('IPv6 backends and listeners', async t => {
  const probe = net.createServer()
  const hasV6 = await new Promise(resolve => {
    probe.once('error', () => resolve(false))
    probe.listen({ host: '::1', port: 0 }, () => probe.close(() => resolve(true)))
  })
  if (!hasV6) return t.skip('no ::1 on this machine')
  const server = net.createServer(socket => socket.end('six\n'))
  await new Promise(resolve => server.listen({ host: '::1', port: 0 }, resolve))
  t.teardown(() => server.close())
  const lila = await spawnLila(t, ['rr', `[::1]:${server.address().port}`, '--host', '::1', '--port', '0'])
  t.match(lila.listening, /listening on \[::1\]:\d+ /)
  const { data } = await exchange(lila.port, null, { host: '::1' })
  t.equal(data, 'six\n')
})

t.test('graceful shutdown: in-flight work finishes, new connections are refused, exit 0', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await spawnLila(t, ['rr', backend.address, ...base])
  const { socket } = await openGreeted(lila.port)
  lila.child.kill('SIGTERM')
  await lila.waitForLine(/SIGTERM: stopped accepting/)
  const refused = await new Promise(resolve => {
    const c = net.connect(lila.port, '127.0.0.1')
    c.on('connect', () => { c.destroy(); resolve('connected') })
    c.on('error', err => resolve(err.code))
  })
  t.equal(refused, 'ECONNREFUSED', 'no new connections')
  const echoed = await new Promise(resolve => { socket.once('data', d => resolve(String(d))); socket.write('still here') })
  t.equal(echoed, 'still here', 'the open connection still works')
  t.equal(lila.child.exitCode, null, 'lila waits for it')
  socket.end()
  const { code } = await within(10000, 'lila to exit', lila.exited)
  t.equal(code, 0)
  t.match(lila.lines.at(-1), /stopped$/)
})

t.test('graceful shutdown: --shutdown-timeout cuts what is left, exit 0', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--shutdown-timeout', '300ms'])
  const { socket } = await openGreeted(lila.port)
  const closed = new Promise(resolve => socket.on('close', resolve))
  const { code } = await lila.stop('SIGINT')
  t.equal(code, 0)
  await within(5000, 'the client to be closed', closed)
})

t.test('a second signal exits at once', async t => {
  const backend = await tcpBackend(t, 'b', greetThenEcho)
  const lila = await spawnLila(t, ['rr', backend.address, ...base])
  const { socket } = await openGreeted(lila.port)
  const closed = new Promise(resolve => socket.on('close', resolve))
  lila.child.kill('SIGTERM')
  await lila.waitForLine(/SIGTERM: stopped accepting/)
  lila.child.kill('SIGTERM')
  const { code } = await within(5000, 'lila to exit', lila.exited)
  t.equal(code, 0)
  await within(5000, 'the client to be closed', closed)
  t.ok(lila.lines.some(l => /SIGTERM again: closing every connection now/.test(l)))
})

t.test('the listening line is printed whatever --log-level says', async t => {
  const backend = await tcpBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--log-level', 'error', '--check', 'none'])
  t.match(lila.listening, /^lila: listening on 127\.0\.0\.1:\d+ \(tcp, round-robin, 1 backend\)$/)
  t.equal(lila.lines.length, 1, 'and nothing else at --log-level error')
})
