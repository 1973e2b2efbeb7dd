'use strict'

// Where an HTTP/2 client connection in the clear reads into (lib/proxy/http2/
// client-reads.js): read-buffers.js's buffers, a bulk read's own buffer read into again
// only once no exchange fed from it holds its bytes (the backend write its DATA went
// to, a replay's copy). A buffer read into too soon would change bytes a waiting write
// still holds: bodies uploaded as concurrent streams of a few connections, to backends
// that read them at different speeds, must each arrive byte for byte; so must bodies
// sent on to h2c backends, and a frame cut between two reads.

const t = require('tap')
const { blockFor, digestOf, digestingBackend } = require('./fixtures/uploads')
const { spawnLila, within, settled } = require('./fixtures/helpers')
const { h2connect } = require('./fixtures/h2')

const BLOCKS = 16 // of 64 KiB: 1 MiB a body, past the stream window and loopback's buffers
const CONNECTIONS = 2
const STREAMS = 3 // at once on each connection

// One upload on `session`: the body in writes of a block each.
function upload (session, name) {
  return new Promise((resolve, reject) => {
    const block = blockFor(name)
    const req = session.request({ ':method': 'POST', ':path': `/${name}`, 'content-length': block.length * BLOCKS })
    let status = 0
    let text = ''
    req.on('response', headers => { status = headers[':status'] })
    req.setEncoding('utf8')
    req.on('data', chunk => { text += chunk })
    req.on('end', () => resolve({ status, text }))
    req.on('error', reject)
    let sent = 0
    const write = () => {
      while (sent < BLOCKS) {
        sent++
        if (!req.write(block)) return req.once('drain', write)
      }
      req.end()
    }
    write()
  })
}

for (const h2 of [false, true]) {
  const to = h2 ? 'h2c' : 'HTTP/1.1'
  t.test(`${CONNECTIONS} connections × ${STREAMS} streams upload 1 MiB bodies to a fast and a slow ${to} backend: every body intact`, async t => {
    const backends = [await digestingBackend(t, false, h2), await digestingBackend(t, true, h2)]
    const lila = await spawnLila(t, ['rr', ...backends, '--protocol', 'http', '--port', '0', '--host', '127.0.0.1',
      '--status-port', '0', '--check', 'none', ...(h2 ? ['--backend-protocol', 'h2'] : [])])
    const sessions = []
    for (let c = 0; c < CONNECTIONS; c++) sessions.push(await h2connect(t, lila.port))
    const names = []
    const uploads = []
    for (let c = 0; c < CONNECTIONS; c++) {
      for (let k = 0; k < STREAMS; k++) {
        const name = `${c}-${k}`
        names.push(name)
        uploads.push(upload(sessions[c], name))
      }
    }
    const got = await within(120000, 'the uploads', Promise.all(uploads))
    for (const [i, { status, text }] of got.entries()) {
      t.equal(status, 200, `${names[i]}: answered`)
      t.same(JSON.parse(text), { size: BLOCKS * 64 * 1024, digest: digestOf(blockFor(names[i]), BLOCKS) }, `${names[i]}: byte for byte`)
    }
    for (const session of sessions) session.destroy()
    await settled(lila, { timeout: 10000 })
  })
}
