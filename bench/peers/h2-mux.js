'use strict'

// The smallest HTTP/2 pass-through on lila's own codec (lib/wire/h2): issue 24's
// measurement gate, and nothing a balancer must do besides (no health, retries, header
// rewriting, limits, timeouts, logs), like the Node floor it is read against
// (node-proxy.js --kind h2):
//
//   node h2-mux.js --port 0 [--window BYTES] BACKEND...
//
// (--window: each stream's receive window, both sides; the codec's default otherwise.)
//
// HTTP/2 clients by prior knowledge (h2c); each stream goes, the next backend in turn,
// as a stream of one pooled h2c session to that backend (another opens when one is at
// the backend's SETTINGS_MAX_CONCURRENT_STREAMS). Heads are decoded into lila's head
// form and encoded again (stateless HPACK); DATA passes with flow control honoured
// both ways (a stream whose other side cannot take more is paused); trailers and
// resets pass. A stream's two halves point at each other (`user`); the handlers are
// two shared objects, so a stream costs the codec's two Stream objects and nothing
// else. Prints "listening on 127.0.0.1:PORT" on stderr once bound.

const net = require('net')
const { parseArgs } = require('util')
const path = require('path')
const lib = path.join(__dirname, '..', '..', 'lib', 'wire', 'h2')
const { Connection } = require(path.join(lib, 'connection'))
const { attach } = require(path.join(lib, 'socket'))
const { CANCEL, INTERNAL_ERROR } = require(path.join(lib, 'constants'))

let backends = []
let turn = 0
const options = {} // the codec's (connection.js DEFAULTS)

// The client's side: its connection's owner, and its streams' handler.
const CLIENTS = {
  onStream (conn, s, head, endStream) {
    const b = backends[turn++ % backends.length]
    const session = sessionOf(b)
    const list = [':method', head.method, ':scheme', 'http', ':authority', head.authority || head.host || b.address,
      ':path', head.target]
    const fields = head.fields
    for (let i = 0; i < fields.length; i += 3) list.push(fields[i + 1], fields[i + 2])
    const up = session.request(UPSTREAM, list, endStream)
    up.user = s
    s.user = up
    return DOWNSTREAM
  },
  onSettings () {},
  onGoaway () {},
  onStreamClosed () {},
  onPingAck () {},
  onClose () {}
}

// A client's stream: its request body and trailers go up; its reset resets the other.
const DOWNSTREAM = {
  onHead () {},
  onData (s, chunk, end) {
    const up = s.user
    if (!up.conn.write(up, chunk, end)) s.conn.pause(s)
  },
  onTrailers (s, fields) {
    const up = s.user
    up.conn.headers(up, pairs(fields), true)
  },
  onReset (s) {
    const up = s.user
    if (up !== null && !up.closed) up.conn.reset(up, CANCEL)
  },
  onDrain (s) {
    s.user.conn.resume(s.user)
  }
}

// A backend's stream: its response comes back down.
const UPSTREAM = {
  onHead (up, head, end) {
    const s = up.user
    const list = [':status', String(head.status)]
    const fields = head.fields
    for (let i = 0; i < fields.length; i += 3) list.push(fields[i + 1], fields[i + 2])
    s.conn.headers(s, list, end)
  },
  onData (up, chunk, end) {
    const s = up.user
    if (!s.conn.write(s, chunk, end)) up.conn.pause(up)
  },
  onTrailers (up, fields) {
    const s = up.user
    s.conn.headers(s, pairs(fields), true)
  },
  onReset (up) {
    const s = up.user
    if (!s.closed) s.conn.reset(s, INTERNAL_ERROR)
  },
  onDrain (up) {
    up.user.conn.resume(up.user)
  }
}

// The backend sessions' owner.
const SESSIONS = {
  onStream (conn, s) { conn.reset(s) }, // a backend opening streams: refused
  onSettings () {},
  onGoaway () {},
  onStreamClosed () {},
  onPingAck () {},
  onClose (conn) {
    for (const b of backends) {
      const i = b.sessions.indexOf(conn)
      if (i !== -1) b.sessions.splice(i, 1)
    }
  }
}

function pairs (fields) {
  const list = []
  for (let i = 0; i < fields.length; i += 3) list.push(fields[i + 1], fields[i + 2])
  return list
}

// A session of backend b that can take another stream, opened if none can.
function sessionOf (b) {
  for (let i = 0; i < b.sessions.length; i++) if (b.sessions[i].canOpen()) return b.sessions[i]
  const conn = new Connection(SESSIONS, 'client', options)
  b.sessions.push(conn)
  attach(net.connect({ host: b.host, port: b.port }), conn)
  return conn
}

function main () {
  const { values, positionals } = parseArgs({
    options: { port: { type: 'string', default: '0' }, window: { type: 'string' } },
    allowPositionals: true
  })
  if (values.window) options.initialWindowSize = Number(values.window)
  backends = positionals.map(a => {
    const i = a.lastIndexOf(':')
    return { address: a, host: a.slice(0, i), port: Number(a.slice(i + 1)), sessions: [] }
  })
  const clients = new Set()
  const server = net.createServer(socket => {
    const conn = new Connection(CLIENTS, 'server', options)
    clients.add(conn)
    socket.on('close', () => clients.delete(conn))
    attach(socket, conn)
  })
  // Once a second, as lila's listener sweeps: the codec's flood counters decay.
  setInterval(() => {
    for (const conn of clients) conn.sweep()
    for (const b of backends) for (const conn of b.sessions) conn.sweep()
  }, 1000).unref()
  server.listen(Number(values.port), '127.0.0.1', () => {
    process.stderr.write(`listening on 127.0.0.1:${server.address().port}\n`)
  })
  process.on('SIGTERM', () => process.exit(0))
  process.on('SIGINT', () => process.exit(0))
}

if (require.main === module) main()
