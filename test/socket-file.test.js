'use strict'

// The socket file of a Unix socket listener (lib/net/socket-file.js): placed at its path
// from the temporary name it was bound at, by several workers of one primary at once,
// over a stale file or against a live one.

const t = require('tap')
const fs = require('fs')
const net = require('net')
const path = require('path')
const { place, removeStaleSocket } = require('../lib/net/socket-file')
const { tmpDir } = require('./fixtures/tmp')

function listening (file, text = 'ours') {
  return new Promise((resolve, reject) => {
    const server = net.createServer(socket => {
      socket.on('error', () => {}) // probes connect and go at once
      socket.end(`${text}\n`)
    })
    server.once('error', reject)
    server.listen(file, () => resolve(server))
  })
}

function close (server) {
  return new Promise(resolve => server.close(() => resolve()))
}

// A socket file nothing accepts on, as a process that died leaves: bound, linked to
// `file`, and closed (which removes only the name it was bound at).
async function staleSocket (file) {
  const bound = `${file}.bound`
  const server = await listening(bound)
  fs.linkSync(bound, file)
  await close(server)
  if (!fs.lstatSync(file).isSocket()) throw new Error(`no stale socket at ${file}`)
}

function greeting (file) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path: file })
    socket.setEncoding('utf8')
    let text = ''
    socket.on('data', chunk => { text += chunk })
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
  })
}

// Workers of --workers share the primary's socket, bound once at the temporary name,
// and each places it: every one must succeed whatever the interleaving.
const WORKERS = 4
const ROUNDS = 20

for (const before of ['nothing', 'a stale socket']) {
  t.test(`${WORKERS} workers place one socket over ${before}: all succeed, the path is the socket`, async t => {
    const dir = tmpDir(t)
    for (let round = 0; round < ROUNDS; round++) {
      const file = path.join(dir, `lila-${round}.sock`)
      const temporary = `${file}.1.new`
      if (before !== 'nothing') await staleSocket(file)
      const server = await listening(temporary)
      const results = await Promise.allSettled(Array.from({ length: WORKERS }, () => place(temporary, file)))
      t.same(results.filter(r => r.status === 'rejected').map(r => r.reason.message), [], `round ${round}: no worker failed`)
      t.notOk(fs.existsSync(temporary), 'the temporary name is gone')
      t.equal(await greeting(file), 'ours\n', 'the path reaches the socket placed')
      await close(server)
    }
  })
}

t.test('a live socket at the path: every worker is refused with the reason, the live one stays', async t => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'lila.sock')
  const other = await listening(file, 'other')
  t.teardown(() => close(other))
  const temporary = `${file}.1.new`
  const server = await listening(temporary)
  t.teardown(() => close(server))
  const results = await Promise.allSettled(Array.from({ length: WORKERS }, () => place(temporary, file)))
  t.same(results.map(r => r.reason && r.reason.reason), Array(WORKERS).fill('address already in use (something listens on it)'))
  t.equal(await greeting(file), 'other\n', 'the other server still has the path')
})

t.test('removeStaleSocket: a stale file goes, a live one stays, a missing one counts as gone', async t => {
  const dir = tmpDir(t)
  const stale = path.join(dir, 'stale.sock')
  await staleSocket(stale)
  t.equal(await removeStaleSocket(stale), true)
  t.notOk(fs.existsSync(stale))
  t.equal(await removeStaleSocket(stale), true, 'gone already')
  const live = path.join(dir, 'live.sock')
  const server = await listening(live)
  t.equal(await removeStaleSocket(live), false)
  t.ok(fs.existsSync(live))
  await close(server)
  const plain = path.join(dir, 'plain')
  fs.writeFileSync(plain, 'x')
  t.equal(await removeStaleSocket(plain), false, 'not a socket')
})
