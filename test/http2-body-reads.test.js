'use strict'

// Where an HTTP/2 client connection in the clear reads into (lib/proxy/http2/
// client-reads.js): read-buffers.js's buffers, a bulk read's own buffer read into again
// only once no exchange fed from it holds its bytes (the backend write its DATA went
// to, a replay's copy); a read whose bytes are held till an answer comes (small bodies
// kept whole for a replay) copied out of the shared buffer. A buffer read into too soon
// would change bytes a waiting write or a replay still holds: bodies uploaded as
// concurrent streams of a few connections, to backends that read them at different
// speeds, must each arrive byte for byte; so must bodies sent on to h2c backends, a
// frame cut between two reads, and small bodies sent again after lila read on.

const t = require('tap')
const crypto = require('crypto')
const { blockFor, writeAll, digestingBackend } = require('./fixtures/bodies')
const { ReadSteps, sharedThenOwn } = require('./fixtures/read-steps')
const http = require('http')
const { spawnLila, within, settled, listenOn } = require('./fixtures/helpers')
const { h2connect } = require('./fixtures/h2')

const BLOCKS = 16 // of 64 KiB: 1 MiB a body, past the stream window and loopback's buffers
const CONNECTIONS = 2
const STREAMS = 3 // at once on each connection

// One request on `session` with `pieces` for its body, written one by one: its status
// and answer.
function send (session, name, method, pieces) {
  return new Promise((resolve, reject) => {
    const length = pieces.reduce((sum, piece) => sum + piece.length, 0)
    const req = session.request({ ':method': method, ':path': `/${name}`, 'content-length': length })
    let status = 0
    let text = ''
    req.on('response', headers => { status = headers[':status'] })
    req.setEncoding('utf8')
    req.on('data', chunk => { text += chunk })
    req.on('end', () => resolve({ status, text }))
    req.on('error', reject)
    writeAll(req, pieces)
  })
}

// `streams` requests at once on each of `sessions`, each with the body `bodyOf(name)`
// gives (its pieces): every one answered with its body's length and digest.
async function sendAll (t, sessions, streams, method, bodyOf) {
  const names = []
  const sent = []
  for (let k = 0; k < streams; k++) {
    for (let c = 0; c < sessions.length; c++) {
      const name = `${c}-${k}`
      names.push(name)
      sent.push(send(sessions[c], name, method, bodyOf(name)))
    }
  }
  const got = await within(120000, 'the answers', Promise.all(sent))
  for (const [i, { status, text }] of got.entries()) {
    const hash = crypto.createHash('sha256')
    let size = 0
    for (const piece of bodyOf(names[i])) {
      hash.update(piece)
      size += piece.length
    }
    t.equal(status, 200, `${names[i]}: answered`)
    t.same(JSON.parse(text), { size, digest: hash.digest('hex') }, `${names[i]}: byte for byte`)
  }
}

for (const h2 of [false, true]) {
  const to = h2 ? 'h2c' : 'HTTP/1.1'
  t.test(`${CONNECTIONS} connections × ${STREAMS} streams upload 1 MiB bodies to a fast and a slow ${to} backend: every body intact`, async t => {
    const backends = [await digestingBackend(t, false, h2), await digestingBackend(t, true, h2)]
    const lila = await spawnLila(t, ['rr', ...backends, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
      '--status-port', '0', '--check', 'none', ...(h2 ? ['--backend-protocol', 'h2'] : [])])
    const sessions = []
    for (let c = 0; c < CONNECTIONS; c++) sessions.push(await h2connect(t, lila.port))
    await sendAll(t, sessions, STREAMS, 'POST', name => Array(BLOCKS).fill(blockFor(name)))
    for (const session of sessions) session.destroy()
    await settled(lila, { timeout: 10000 })
  })
}

// Many small bodies at once on each connection (P1h2's shape): reads of several bodies
// each, every body kept whole for a replay till its answer. One backend reads each body
// and answers 503 only once it got all the requests it is to get, so that lila has read
// on meanwhile; the requests (PUT: idempotent) go again to the other, which says what
// it read. A buffer read into again while a kept body was a view of it would send
// another body's bytes.
t.test('small bodies kept for a replay while lila reads on are sent again intact', async t => {
  const SMALL_STREAMS = 40
  const BODY = 4096
  const total = CONNECTIONS * SMALL_STREAMS
  const digesting = await digestingBackend(t, false)
  const held = []
  let refusing = false
  const refuser = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      held.push(res)
      if (held.length === total / 2) refusing = true
      if (refusing) for (const r of held.splice(0)) r.writeHead(503, { 'content-length': 0 }).end()
    })
  })
  await listenOn(t, refuser)
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${refuser.address().port}`, digesting, '--protocol', 'http',
    '--port', '0', '--host', '127.0.0.1', '--status-port', '0', '--check', 'none', '--retry-budget', 'off'])
  const sessions = []
  for (let c = 0; c < CONNECTIONS; c++) sessions.push(await h2connect(t, lila.port))
  await sendAll(t, sessions, SMALL_STREAMS, 'PUT', name => [blockFor(name).subarray(0, BODY)])
  t.equal(held.length, 0, 'every request the first backend got was refused and went again')
  for (const session of sessions) session.destroy()
  await settled(lila, { timeout: 10000 })
})

// The rule in process, read by read: the client socket "reads" as Node's onread does
// (into what the read buffers give it next, then the callback), the codec handing DATA
// to exchanges that say whether they still hold it.
t.test('which buffer an HTTP/2 client socket reads into next', async t => {
  const { onRead, fed, ClientReads, READS } = require('../lib/proxy/http2/client-reads')
  const { readsInto, SHARED } = require('../lib/proxy/read-buffers')
  const { RequestBody } = require('../lib/proxy/http/request-body')
  const handed = []
  const leg = { writing: false, holdsBody () { return this.writing } }
  const x = { shadow: null, body: new RequestBody('POST', 1 << 20, false), leg }
  x.body.kept = false // past the replay limit: only the leg's writes hold its bytes
  let feeds = [x]
  const conn = {
    receive (chunk) {
      handed.push(chunk)
      for (const to of feeds) {
        fed(socket, to)
        to.body.add(chunk, chunk.length)
      }
    }
  }
  const socket = { [READS]: new ClientReads({ conn }) }
  const steps = new ReadSteps(socket, readsInto(onRead), handed)

  let own = sharedThenOwn(t, steps)
  leg.writing = true
  steps.read(64 * 1024, 4)
  leg.writing = false
  t.not(steps.into, own, 'a leg\'s write still holds it: the socket gets another')
  t.not(steps.into, SHARED, 'of its own')
  own = steps.into
  // Small bodies, each whole in the read and kept for a replay till its answer.
  const small = () => {
    const body = new RequestBody('PUT', 4096, false)
    body.end()
    return { shadow: null, body, leg }
  }
  feeds = [small(), small()]
  let chunk = steps.read(40 * 1024, 5)
  t.equal(chunk.buffer, own.buffer, 'a read of small bodies kept whole is handed on as it is')
  t.equal(steps.into, SHARED, 'then the socket is back on the shared buffer, not on another of its own')
  chunk = steps.read(40 * 1024, 6)
  t.not(chunk.buffer, SHARED.buffer, 'the next such read is copied out')
  t.equal(steps.into, SHARED, 'and the socket stays on the shared buffer')
  // A long body's first read, kept only till it passes the replay limit: brief.
  const long = new RequestBody('PUT', 1 << 20, false)
  feeds = [{ shadow: null, body: long, leg }]
  steps.read(64 * 1024, 7)
  t.ok(long.kept, 'a long body\'s first read is kept')
  t.not(steps.into, SHARED, 'but only till the body passes the limit: a buffer of its own')
  own = steps.into
  feeds = [x]
  steps.read(64 * 1024, 8)
  t.equal(steps.into, own, 'read into again once nothing holds it')
  steps.read(64 * 1024, 9)
  // All but the third and the eighth, whose buffers the next reads were allowed into.
  t.same(handed.map(c => c[0]), [1, 2, 4, 4, 5, 6, 7, 9, 9], 'every piece still held kept its bytes')
  socket[READS].letGo(false)
})
