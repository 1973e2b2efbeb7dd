'use strict'

const http2 = require('http2')
const { dial, readyEvent, backendReason } = require('../../upstream/dial')
const { handlers, addListeners } = require('../socket-events')

// HTTP/2 sessions to one backend (--backend-protocol h2): h2c, or h2 over TLS agreed by
// ALPN with --backend-tls. Streams share a session, so a backend usually has one; a new
// one opens when every session is at its stream limit (the backend's
// SETTINGS_MAX_CONCURRENT_STREAMS, at most MAX_STREAMS), is going away, or a leg asks
// for a fresh one. A GOAWAY from the backend lets the streams in flight finish and
// sends new ones to a new session (streams it says it never processed come back
// refused, and their legs retry); a session silent for PING_MS is pinged, and one that
// does not answer within the connect timeout is closed; an idle session closes after
// IDLE_MS. What HTTP/2 frames, Node's http2 module does.
//
// A leg (to-http2.js) asks with acquire(leg): leg.onSession(session) once a session has
// room for its stream (now, or once it connected), or leg.onSessionFailed(reason,
// cause, err) when the session could not be had; it gives the stream slot back with
// streamDone(session) when its stream closed, or cancel(leg) while it waits.
const NOT_H2 = 'does not speak HTTP/2 over TLS (ALPN agreed on no h2; is --backend-protocol right?)'

const MAX_STREAMS = 100 // per session, below the backend's own limit when that is higher
const IDLE_MS = 30000 // an idle session is closed after this long
const PING_MS = 10000 // a session nothing was heard on for this long is pinged

// Node's ClientHttp2Session handlers (socket-events.js): `this` is Node's session,
// which carries ours as `backendSession`.
const SESSION = handlers({
  remoteSettings (settings) { this.backendSession.onSettings(settings) },
  goaway () { this.backendSession.onGoaway() },
  error (err) { this.backendSession.error = err },
  close () { this.backendSession.onClose() }
})

function connected () {
  this.setTimeout(0) // the connect timeout is over
  this.backendSession.onConnect()
}

function connectTimedOut () {
  this.backendSession.fail('connect timed out')
}

class BackendSession {
  constructor (pool) {
    this.pool = pool
    this.socket = dial(pool.backend, pool.tls === null ? null : { ...pool.tls, ALPNProtocols: ['h2'] })
    this.socket.backendSession = this
    this.socket.once(readyEvent(this.socket), connected)
    this.socket.setTimeout(pool.connectTimeout)
    this.socket.once('timeout', connectTimedOut)
    this.h2 = http2.connect(`${pool.tls === null ? 'http' : 'https'}://${pool.backend.hostHeader}`, {
      createConnection: () => this.socket,
      settings: { enablePush: false }
    })
    this.h2.backendSession = this
    addListeners(this.h2, SESSION)
    this.ready = false // connected (TLS: agreed on h2), streams may be made
    this.pending = [] // legs waiting for it to connect
    this.streams = 0 // open streams
    this.served = 0 // streams it has carried
    this.limit = MAX_STREAMS
    this.draining = false // going away: no new streams
    this.closed = false
    this.error = null
    this.idleSince = Date.now()
    this.heardAt = Date.now() // the last frame from the backend (a response, a PING ack)
    this.pinging = false
    this.settled = false // the backend's SETTINGS came: it speaks HTTP/2
  }

  get hasRoom () {
    return !this.draining && !this.closed && this.streams + this.pending.length < this.limit
  }

  onConnect () {
    if (this.closed) return
    if (this.pool.tls !== null && this.socket.alpnProtocol !== 'h2') {
      return this.fail(NOT_H2)
    }
    this.ready = true
    this.heardAt = Date.now()
    for (const leg of this.pending.splice(0)) this.give(leg)
  }

  // A stream slot for `leg`.
  give (leg) {
    if (this.served > 0) this.pool.reuses++
    this.streams++
    this.served++
    leg.onSession(this)
  }

  onSettings (settings) {
    this.settled = true
    this.heardAt = Date.now()
    const max = settings.maxConcurrentStreams
    if (typeof max === 'number' && max > 0) this.limit = Math.min(max, MAX_STREAMS)
  }

  onGoaway () {
    this.draining = true
  }

  // Before it connected: every waiting leg fails as a connect would.
  fail (reason) {
    const legs = this.pending.splice(0)
    this.closed = true
    this.h2.destroy()
    this.socket.destroy()
    for (const leg of legs) leg.onSessionFailed(reason, 'connect')
  }

  onClose () {
    this.closed = true
    this.pool.removed(this)
    if (this.pending.length > 0) {
      const err = this.error
      const reason = err === null
        ? 'closed the connection'
        : err.code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL' ? NOT_H2 : backendReason(err, this.pool.tls)
      for (const leg of this.pending.splice(0)) leg.onSessionFailed(reason, 'connect', err)
    }
  }

  // A new stream on it (a leg calls this from onSession).
  request (headers, options) {
    return this.h2.request(headers, options)
  }

  heard () {
    this.heardAt = Date.now()
  }

  // The pool's sweep: close it idle, ping it silent.
  sweep (now, pingTimeout) {
    if (!this.ready || this.closed) return
    if (this.streams === 0 && (this.draining || now - this.idleSince >= IDLE_MS)) return this.close()
    if (this.pinging || now - this.heardAt < PING_MS) return
    this.pinging = true
    const timer = setTimeout(() => this.h2.destroy(new Error('did not answer a PING')), pingTimeout)
    timer.unref()
    const sent = this.h2.ping((err) => {
      clearTimeout(timer)
      this.pinging = false
      if (!err) this.heard()
    })
    if (!sent) clearTimeout(timer)
  }

  close () {
    if (this.closed) return
    this.closed = true
    this.h2.close()
  }
}

class Http2Pool {
  constructor (backend, { connectTimeout, tls = null }) {
    this.backend = backend
    this.connectTimeout = connectTimeout
    this.tls = tls // tls.connect options with --backend-tls
    this.sessions = []
    this.connects = 0
    this.reuses = 0
  }

  configure (connectTimeout, tls) {
    this.connectTimeout = connectTimeout
    this.tls = tls
  }

  // A stream for `leg` on a session with room: a ready one, one connecting, or a new
  // one. `fresh`: not on a session that already carried streams (the leg's last one
  // was refused or its session went away). No cap on sessions and no queue of its own,
  // as the HTTP/1.1 pool: a leg exists only with a lease on the backend, so streams are
  // bounded by max-conn, and every request that waits does so in the visible queue.
  acquire (leg, { fresh = false } = {}) {
    for (const session of this.sessions) {
      if (!session.hasRoom || (fresh && session.served > 0)) continue
      if (session.ready) return session.give(leg)
      session.pending.push(leg)
      return
    }
    this.connects++
    const session = new BackendSession(this)
    this.sessions.push(session)
    session.pending.push(leg)
  }

  // A leg's stream closed.
  streamDone (session) {
    session.streams--
    session.heard()
    if (session.streams === 0) session.idleSince = Date.now()
    if (session.draining && session.streams === 0) session.close()
  }

  // A leg given up before its session connected.
  cancel (leg) {
    for (const session of this.sessions) {
      const i = session.pending.indexOf(leg)
      if (i !== -1) return session.pending.splice(i, 1)
    }
  }

  removed (session) {
    const i = this.sessions.indexOf(session)
    if (i !== -1) this.sessions.splice(i, 1)
  }

  // The listener's sweep (protocol.js): idle sessions closed, silent ones pinged.
  expire (now) {
    for (const session of [...this.sessions]) session.sweep(now, this.connectTimeout)
  }

  close () {
    for (const session of [...this.sessions]) {
      if (session.streams === 0) session.close()
      else session.draining = true
    }
  }

  snapshot () {
    let idle = 0
    let streams = 0
    for (const session of this.sessions) {
      if (session.streams === 0) idle++
      streams += session.streams
    }
    return { sockets: this.sessions.length, idle, connects: this.connects, reuses: this.reuses, streams }
  }
}

module.exports = { Http2Pool, MAX_STREAMS, IDLE_MS, PING_MS }
