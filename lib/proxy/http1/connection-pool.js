'use strict'

const { dial, readyEvent, connectTimedOut } = require('../../upstream/dial')
const { handlers, addListeners } = require('../socket-events')

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
// to the owning exchange, or, while idle in the pool, end the connection (a byte or a
// timeout while idle means it is no longer fit for reuse).
function connConnect () {
  this.setTimeout(0) // the connect timeout is over; the listener's sweep takes it from here
  const c = this.conn
  c.ready = true
  if (c.owner !== null) c.owner.onUpstreamConnect(c)
}
function connData (chunk) {
  const c = this.conn
  if (c.owner !== null) c.owner.onUpstreamData(c, chunk)
  else c.destroy()
}
const CONN = handlers({
  data: connData, // TLS sockets, which cannot read into lila's buffers (READ)
  drain () {
    const c = this.conn
    if (c.owner !== null) c.owner.onUpstreamDrain(c)
  },
  timeout () {
    const c = this.conn
    if (c.owner === null) return c.destroy()
    if (c.ready) return c.owner.onUpstreamTimeout(c)
    connectTimedOut(() => !c.ready && !c.closed && c.owner !== null, () => c.owner.onUpstreamTimeout(c))
  },
  error (err) {
    const c = this.conn
    if (c.owner !== null) c.owner.onUpstreamError(c, err)
  },
  end () {
    const c = this.conn
    if (c.owner !== null) c.owner.onUpstreamEnd(c)
  },
  close () {
    const c = this.conn
    c.closed = true
    c.pool.removed(c)
    if (c.owner !== null) c.owner.onUpstreamClose(c)
  }
})

// Plain backend sockets read into buffers lila keeps (net.Socket's `onread` option) and
// hand each read to the owner at once: no buffer allocated per read (V8 counts each as
// external memory, and collects the more often), and none of the Readable machinery
// ('data' event, a buffer list, a tick). Small reads land in one buffer every pooled
// socket shares, so they are copied out into a Buffer of their own size (from Node's
// pool: an answer costs a small copy) before they are handed on. A read that fills a
// good part of it is bulk (a body moving in large pieces): it is copied too, and that
// socket reads into a buffer of its own next, handed on without a copy. That buffer is
// read into again only when the owner that read it still has the connection and holds
// none of its bytes (owner.holdsRead(): its write to the client completed at once);
// otherwise the socket gets a new one, and the old one stays with whatever holds it. A
// socket whose reads turn small goes back to the shared buffer. Either way the owner
// gets bytes no later read writes over, as with 'data'.
const READ_SIZE = 64 * 1024
const BULK = 16 * 1024
const SHARED = Buffer.allocUnsafeSlow(READ_SIZE)
let next = SHARED // what the socket that just read reads into next (see `buffer`)
const READ = Object.freeze({
  // Called once when the socket connects and after every read, right after `callback`
  // for that socket.
  buffer () {
    const buffer = next
    next = SHARED
    return buffer
  },
  callback (nread, buffer) {
    if (buffer === SHARED) {
      const chunk = Buffer.allocUnsafe(nread)
      buffer.copy(chunk, 0, 0, nread)
      if (nread >= BULK) next = Buffer.allocUnsafeSlow(READ_SIZE)
      return connData.call(this, chunk)
    }
    const owner = this.conn.owner
    connData.call(this, buffer.subarray(0, nread))
    if (nread < BULK) return // back to the shared buffer; this one goes with its bytes
    const free = owner !== null && this.conn.owner === owner && !owner.holdsRead()
    next = free ? buffer : Buffer.allocUnsafeSlow(READ_SIZE)
  }
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
    socket.conn = this
    socket.on(readyEvent(socket), connConnect)
    addListeners(socket, CONN)
  }

  // Hand the connection to an exchange; it drives the socket until release.
  attach (owner) {
    this.owner = owner
  }

  // A response came on it: one request fewer left, within what the backend's
  // "Keep-Alive: timeout=N, max=M" allows (-1: not said).
  answered (timeoutMs, max) {
    if (timeoutMs !== -1) this.idleMs = idleFromHint(timeoutMs)
    if (max !== -1) this.requestsLeft = max
    this.requestsLeft--
  }

  // Its socket's remaining events (close, a late error) go to no exchange.
  destroy () {
    this.owner = null
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
    socket.setTimeout(this.connectTimeout) // until connected (see connConnect)
    conn.attach(exchange)
    return conn
  }

  // An exchange is done with a connection that can serve another request (unless the
  // backend allows no more on it).
  release (conn) {
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

module.exports = { Pool, idleFromHint, DEFAULT_IDLE_MS, READ }
