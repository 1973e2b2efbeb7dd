'use strict'

const { dial, readyEvent, connectTimedOut } = require('../../upstream/dial')
const { handlers, addListeners } = require('../socket-events')
const { readsInto, copied, OwnBuffer, SHARED } = require('../read-buffers')
const { parseResponseHead } = require('./parse')

// The UpstreamConnection a pooled socket carries.
const CONNECTION = Symbol('lila.upstreamConnection')

// Keep-alive connections to one backend, reused last-in first-out so that the ones at
// the bottom of the stack go idle long enough to expire. A connection is idle in the
// pool or owned by one exchange (exchange.js), which receives its socket's events.
// The pool sets no cap of its own: an exchange asks for a connection only once it holds
// a lease on the backend (upstream/attempt.js), so busy connections are at most the
// requests the backend's max-conn (or the listener's) lets in, and every request that
// waits does so in the one visible queue (upstream/queue.js).

// Idle time allowed when the backend gives no Keep-Alive hint: below the common backend
// defaults (Node 5 s, nginx 75 s, Apache 5 s) so the backend is not the one to close.
const DEFAULT_IDLE_MS = 4000
const MAX_IDLE_MS = 60000

// Idle time for a backend's "Keep-Alive: timeout=N" hint: less a margin, so lila stops
// using a connection before the backend closes it (the keep-alive race).
function idleFromHint (hintMs) {
  if (hintMs < 0) return DEFAULT_IDLE_MS
  return Math.min(hintMs - Math.min(1000, hintMs / 2), MAX_IDLE_MS)
}

// Socket handlers shared by every backend connection (`this` is the socket): events go
// to the owning exchange, or, while idle in the pool, end the connection (a byte while
// idle means it is no longer fit for reuse). A plain socket reads through READ, so only
// a TLS one listens to 'data'; and none to 'timeout': the connect timeout is a timer of
// the connection's own (connectTimer), gone once connected, where a socket's setTimeout
// keeps its Timeout for the socket's life (about 150 bytes a connection, each one a
// waiting HTTP/2 stream holds: bench/README.md).
function connConnect () {
  const c = this[CONNECTION]
  c.stopConnectTimer()
  c.ready = true
  if (c.owner !== null) c.owner.onUpstreamConnect(c)
}
function connData (chunk) {
  const c = this[CONNECTION]
  if (c.owner !== null) c.owner.onUpstreamData(c, chunk)
  else c.destroy()
}
function connTimedOut (c) {
  c.connectTimer = null
  if (c.owner === null) return c.destroy()
  connectTimedOut(() => !c.ready && !c.closed && c.owner !== null, () => c.owner.onUpstreamTimeout(c))
}
const CONN = handlers({
  drain () {
    const c = this[CONNECTION]
    if (c.owner !== null) c.owner.onUpstreamDrain(c)
  },
  error (err) {
    const c = this[CONNECTION]
    if (c.owner !== null) c.owner.onUpstreamError(c, err)
  },
  end () {
    const c = this[CONNECTION]
    if (c.owner !== null) c.owner.onUpstreamEnd(c)
  },
  close () {
    const c = this[CONNECTION]
    c.closed = true
    c.stopConnectTimer()
    c.reads.letGo(false) // a write to the client may still hold it
    c.pool.removed(c)
    if (c.owner !== null) c.owner.onUpstreamClose(c)
  }
})
const TLS_CONN = handlers({ data: connData }) // TLS sockets, which cannot read into lila's buffers (READ)

// Plain backend sockets read into read-buffers.js's buffers, each read handed to the
// owner at once, as bytes no later read writes over (as with 'data'). A bulk socket's
// own buffer (the connection's OwnBuffer) is read into again only when the owner that
// read it holds none of its bytes (owner.holdsRead(): its write to the client completed
// at once), asked after the read or as it let the connection go with it; otherwise the
// socket takes another (under the cap), and the old one stays with whatever holds it.
// The next buffer is chosen after the read is handed on (read-buffers.js).
const READ = readsInto(function (nread, buffer) {
  const c = this[CONNECTION]
  if (buffer === SHARED) {
    connData.call(this, copied(nread))
    return c.reads.next(nread, buffer, true)
  }
  const owner = c.owner
  connData.call(this, buffer.subarray(0, nread))
  if (c.owner === owner) return c.reads.next(nread, buffer, owner !== null && !owner.holdsRead())
  // The owner let the connection go with this read (a response's last bytes), saying
  // then whether it held any of them (release). Held by nothing, the socket keeps its
  // buffer, however small the read, for the next response: let go, the next response's
  // first read would be copied out of the shared buffer, and a buffer of its own made
  // for the one after, two 64 KiB allocations a response that V8 frees only with full
  // collections (W3: bench/README.md).
  if (c.freedRead && buffer === c.reads.own) return c.reads.keep()
  c.reads.next(nread, buffer, c.freedRead)
})

class UpstreamConnection {
  constructor (pool, socket) {
    this.pool = pool
    this.socket = socket
    this.owner = null // the exchange using it, or null while idle
    this.reused = false // has served a request before the current one
    this.idleMs = DEFAULT_IDLE_MS
    this.requestsLeft = Infinity // from "Keep-Alive: max=N"
    this.idleSince = 0
    this.ready = false // connected (and for TLS, the handshake done)
    this.closed = false
    this.reads = new OwnBuffer() // its socket's own read buffer, while it moves bulk (READ)
    this.freedRead = false // its owner let it go (release) holding none of its last read
    this.head = null // the form its response heads are parsed into (readHead)
    this.connectTimer = null // until connected: --connect-timeout (connTimedOut)
    socket[CONNECTION] = this
    socket.on(readyEvent(socket), connConnect)
    addListeners(socket, CONN)
    if (socket.encrypted) addListeners(socket, TLS_CONN)
  }

  startConnectTimer (ms) {
    this.connectTimer = setTimeout(connTimedOut, ms, this).unref()
  }

  stopConnectTimer () {
    if (this.connectTimer === null) return
    clearTimeout(this.connectTimer)
    this.connectTimer = null
  }

  // Hand the connection to an exchange; it drives the socket until release.
  attach (owner) {
    this.owner = owner
    this.freedRead = false
  }

  // A response came on it: one request fewer left, within what the backend's
  // "Keep-Alive: timeout=N, max=M" allows (-1: not said).
  answered (timeoutMs, max) {
    if (timeoutMs !== -1) this.idleMs = idleFromHint(timeoutMs)
    if (max !== -1) this.requestsLeft = max
    this.requestsLeft--
  }

  // A response head on it, in buf[start, end) (parse.js parseResponseHead, which throws
  // an HttpError for a bad one), parsed into the form the one before was: that head's
  // exchange read it while it owned the connection and is done with it (a compressed
  // response, whose end comes later, was given an edited copy: edge-calls.js).
  readHead (buf, start, end, method) {
    this.head = parseResponseHead(buf, start, end, method, this.head)
    return this.head
  }

  // Its socket's remaining events (close, a late error) go to no exchange.
  destroy () {
    this.owner = null
    this.freedRead = false
    this.socket.destroy()
  }
}

class Pool {
  constructor (backend, { connectTimeout, tls = null }) {
    this.backend = backend
    this.connectTimeout = connectTimeout
    this.tls = tls // tls.connect options with --backend-tls
    this.idle = []
    this.size = 0 // every socket: connecting, busy and idle
    this.connects = 0
    this.reuses = 0
  }

  // A reload: new connections use the new settings.
  configure (connectTimeout, tls) {
    this.connectTimeout = connectTimeout
    this.tls = tls
  }

  // Give `exchange` a connection: an idle one (exchange.onUpstreamConnect runs at once)
  // or a new one (it runs once connected). Returns it.
  acquire (exchange, { fresh = false } = {}) {
    if (!fresh) {
      const now = Date.now()
      while (this.idle.length > 0) {
        const conn = this.idle.pop()
        // Not one the backend has ended (its close comes a turn later), nor one past its
        // idle time (the backend may be closing it; the timer may not have fired yet).
        if (conn.socket.readableEnded || now - conn.idleSince >= conn.idleMs) {
          conn.destroy()
          continue
        }
        this.reuses++
        conn.reused = true
        conn.attach(exchange)
        exchange.onUpstreamConnect(conn)
        return conn
      }
    }
    return this.connect(exchange)
  }

  connect (exchange) {
    this.size++
    this.connects++
    const socket = dial(this.backend, this.tls, { onread: READ })
    const conn = new UpstreamConnection(this, socket)
    conn.startConnectTimer(this.connectTimeout)
    conn.attach(exchange)
    return conn
  }

  // An exchange is done with a connection that can serve another request (unless the
  // backend allows no more on it).
  release (conn) {
    conn.freedRead = !conn.owner.holdsRead() // for READ, when let go with a read
    conn.owner = null
    if (conn.closed) return
    if (conn.idleMs <= 0 || conn.requestsLeft <= 0) return conn.destroy()
    conn.socket.resume() // it may have been paused for a slow client
    conn.idleSince = Date.now()
    this.idle.push(conn)
  }

  // Close idle connections past their limit. The stack's bottom holds the oldest.
  expire (now) {
    while (this.idle.length > 0 && now - this.idle[0].idleSince >= this.idle[0].idleMs) {
      this.idle.shift().destroy()
    }
  }

  removed (conn) {
    this.size--
    const i = this.idle.indexOf(conn)
    if (i !== -1) this.idle.splice(i, 1)
  }

  close () {
    for (const conn of this.idle.splice(0)) conn.destroy()
  }

  snapshot () {
    return { sockets: this.size, idle: this.idle.length, connects: this.connects, reuses: this.reuses }
  }
}

module.exports = { Pool, idleFromHint, UpstreamConnection, READ, CONNECTION } // the last three: for tests
