'use strict'

const { Http1Protocol } = require('../http1/protocol')

// What lila's HTTP/2 server side tells clients (RFC 9113 6.5.2), and the limits Node's
// http2 (nghttp2) keeps for it, said here rather than left to Node's defaults (the
// values are Node 20's unless said otherwise). The floods are nghttp2's to stop:
// CONTINUATION frames past 8 per header block and a header list past its size end the
// connection (CVE-2024-27316), streams reset faster than 33/s after a burst of 1000
// end it (CVE-2023-44487; lila's own count in session.js ends it much sooner), SETTINGS
// and PING acks a client does not read are capped; test/http2-floods.test.js sends
// each attack.
const HTTP2_OPTIONS = {
  settings: {
    // Streams per connection: like HAProxy's 100 and nginx's 128; more are refused
    // (REFUSED_STREAM).
    maxConcurrentStreams: 128,
    maxHeaderListSize: 64 * 1024 // decoded; lila refuses heads over 16 KiB (request.js)
  },
  maxSessionMemory: 10, // MiB per connection: past it, new streams are refused
  maxHeaderListPairs: 128, // fields per header block, pseudo-headers included (lila: 100 fields)
  maxSettings: 32, // entries in one SETTINGS frame
  maxOutstandingPings: 10, // PINGs of lila's own not yet acknowledged
  // Frames Node counts as invalid (empty DATA without END_STREAM among them: the
  // empty-frames flood), and streams refused: past these, the connection is closed.
  maxSessionInvalidFrames: 1000,
  maxSessionRejectedStreams: 100
}

// HTTP as a Listener's protocol (listener.js): HTTP/1.1 and HTTP/2 on one port. It is
// the HTTP/1.1 protocol (http1/protocol.js: sessions, backend pools, rewrite, Via,
// response stats) plus the HTTP/2 side: TLS offers h2 first by ALPN, and an HTTP/1.1
// session whose client speaks HTTP/2 (ALPN h2, or the connection preface in the clear)
// hands its connection over (startHttp2). Node's http2 module frames HTTP/2; its
// server object is made for the first HTTP/2 client, never listens, and is given
// connections by emitting 'connection'. Each stream is balanced as a request of its
// own, over the same pools, to HTTP/1.1 backends.
// `grpc` (--protocol grpc): the same, its backends HTTP/2 (the config says so) and its
// own answers gRPC-shaped for every request (see grpc.js callType).
// One per listener: createHttpProtocol({ via, grpc }).
class HttpProtocol extends Http1Protocol {
  constructor ({ via, grpc = false }) {
    super({ via })
    this.grpc = grpc
    if (grpc) this.name = 'grpc'
    this.alpn = ['h2', 'http/1.1']
    this.server = null // Node's Http2Server, once a client spoke HTTP/2
    this.attaching = null // the Http2Session whose connection Node is taking
    this.nodePools = new Map() // Backend -> Node http2 sessions, for HTTP/2 clients' streams
  }

  reconfigure (config, listener) {
    super.reconfigure(config, listener)
    for (const pool of this.nodePools.values()) pool.configure(this.connectTimeout, this.backendTls)
  }

  sweep (listener) {
    super.sweep(listener)
    const now = Date.now()
    for (const [backend, pool] of this.nodePools) {
      if (backend.retired && backend.live === 0) {
        pool.close()
        this.nodePools.delete(backend)
      } else {
        pool.expire(now)
      }
    }
  }

  drained () {
    super.drained()
    for (const pool of this.nodePools.values()) pool.close()
  }

  // A backend as stats() shows it: its pool is its HTTP/2 sessions' with
  // --backend-protocol h2 ({ sockets: sessions, idle, connects, reuses, streams }).
  snapshotBackend (backend) {
    const snapshot = super.snapshotBackend(backend)
    const pool = this.nodePools.get(backend)
    if (pool !== undefined && (this.backendProtocol === 'h2' || snapshot.pool === null)) snapshot.pool = pool.snapshot()
    return snapshot
  }

  // Node's HTTP/2 sessions to `backend`, for an HTTP/2 client's leg (to-http2.js).
  nodeHttp2PoolFor (backend) {
    let pool = this.nodePools.get(backend)
    if (pool === undefined) {
      const { Http2Pool } = require('./backend-pool')
      pool = new Http2Pool(backend, { connectTimeout: this.connectTimeout, tls: this.backendTls })
      this.nodePools.set(backend, pool)
    }
    return pool
  }

  // `from`, an HTTP/1.1 session, found that its client speaks HTTP/2: an Http2Session
  // (session.js) takes its place in the listener, and Node's http2 the socket, with the
  // bytes already read (`buf`, or null) put back in front. Node takes those from the
  // socket's buffer on the next tick and the rest straight from the socket, so the
  // socket is handed over once the read that brought `buf` is over (setImmediate): what
  // comes meanwhile queues in the buffer behind `buf`, in order.
  startHttp2 (listener, from, socket, buf) {
    const { Http2Session } = require('./session')
    const session = new Http2Session(listener, socket)
    listener.handOver(from, session)
    socket.on('error', ignore) // until Node's http2 listens (and reports) too
    // A client's FIN ends an HTTP/2 connection (lila's listeners allow half-open TCP).
    socket.allowHalfOpen = false
    if (buf === null) return this.connectHttp2(session)
    socket.unshift(buf)
    setImmediate(() => this.connectHttp2(session))
  }

  connectHttp2 (session) {
    const { socket } = session
    if (socket.destroyed) return session.onClose()
    this.attaching = session
    try {
      this.http2Server().emit('connection', socket)
    } finally {
      this.attaching = null
    }
    if (session.h2 === null) { // Node did not take it
      socket.destroy()
      return session.onClose()
    }
    process.nextTick(readOn, socket)
  }

  http2Server () {
    if (this.server === null) {
      const http2 = require('http2')
      this.server = http2.createServer(HTTP2_OPTIONS)
      this.server.on('session', h2 => this.attaching.attach(h2))
    }
    return this.server
  }
}

function ignore () {}

// After Node's http2 took the bytes in the socket's buffer: the socket reads on (one
// never read yet, paused since its accept, starts), straight into Node's http2.
function readOn (socket) {
  if (!socket.destroyed) socket.read(0)
}

function createHttpProtocol ({ via, grpc = false }) {
  return new HttpProtocol({ via, grpc })
}

module.exports = { createHttpProtocol, HttpProtocol, HTTP2_OPTIONS }
