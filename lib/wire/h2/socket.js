'use strict'

// A Connection (connection.js) carried by a socket (net or tls): what is read goes to
// receive(); what the connection writes is taken once per turn of the event loop, in
// its check phase (setImmediate), after every event the poll phase brought: the frames
// of every read and timer of that turn in one write. (A flush per read, as
// process.nextTick gives, wrote once per backend response on lila's HTTP/2 clients of
// HTTP/1.1 backends: 2.2 writes a request where 1.1 are needed, measured with strace
// under h2load.) A write the socket cannot take
// at once makes the connection congested until 'drain'. The socket's end or error
// ends the connection (its streams hear CLOSED); the connection's end ends the socket
// once what it wrote last is out.
//
// The socket's listeners are shared by every connection (`this` is the socket), so a
// connection costs no closures.

// After its last frames (a GOAWAY), a connection's socket is ended, then destroyed if
// the peer has not closed its side within LINGER_MS: it has what it needs by then, and
// a peer that keeps its side open (Node's http2 server does) would hold it forever.
const { LINGER_MS } = require('../../limits')

// The SocketTransport a socket carries.
const TRANSPORT = Symbol('lila.h2Transport')

const EVENTS = {
  data (chunk) { this[TRANSPORT].conn.receive(chunk) },
  drain () { this[TRANSPORT].conn.setCongested(false) },
  error () {}, // 'close' follows
  close () { this[TRANSPORT].conn.destroy('the connection closed') }
}

class SocketTransport {
  constructor (socket, conn) {
    this.socket = socket
    this.conn = conn
    this.scheduled = false
    this.ending = false
    socket[TRANSPORT] = this
    for (const name in EVENTS) socket.on(name, EVENTS[name])
  }

  flushSoon () {
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(flush, this)
  }

  close () {
    this.ending = true
    this.flushSoon()
  }
}

function flush (t) {
  t.scheduled = false
  const socket = t.socket
  const out = t.conn.output.take()
  if (out !== null && !socket.destroyed) {
    let ok
    if (Array.isArray(out)) {
      socket.cork()
      for (let i = 0; i < out.length; i++) ok = socket.write(out[i])
      socket.uncork()
    } else {
      ok = socket.write(out)
    }
    if (!ok && !t.conn.congested) t.conn.setCongested(true)
  }
  if (t.ending && !socket.destroyed && !socket.writableEnded) {
    socket.end()
    socket.setTimeout(LINGER_MS, linger)
  }
}

function linger () { this.destroy() }

// Join conn to socket, and start it (its preface and SETTINGS go out).
function attach (socket, conn) {
  socket.setNoDelay(true)
  const transport = new SocketTransport(socket, conn)
  conn.start(transport)
  return transport
}

module.exports = { attach }
