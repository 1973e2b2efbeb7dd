'use strict'

const { SessionPool } = require('../../wire/h2/pool')
const { dial, readyEvent, connectTimedOut } = require('../../upstream/dial')

// Why a backend session's socket failed, hung on the socket (a Symbol: the socket is
// Node's): its error, or words for a failure lila decided (a connect that took too
// long, TLS that agreed on no h2).
const FAILURE = Symbol('lila.h2BackendFailure')
const CONNECTED = Symbol('lila.h2BackendConnected') // its readyEvent came

const NOT_H2 = 'does not speak HTTP/2 over TLS (ALPN agreed on no h2; is --backend-protocol right?)'
// How often a backend session is swept for: a PING when nothing was heard for PING_MS
// (a dead one is closed when the next sweep finds it unanswered), closed when it
// carried no stream for IDLE_MS.
const PING_MS = 10000
const IDLE_MS = 30000

// A test's knob, not an option: the last stream id lila opens on a backend session
// (RFC 9113's 2^31-1 by default), so that a test can see a long-lived session's ids run
// out (a new session takes over) without two billion requests.
const LAST_STREAM_ID = Number(process.env.LILA_TEST_H2_LAST_STREAM_ID) || 2 ** 31 - 1

// HTTP/2 sessions to one backend (--backend-protocol h2, --protocol grpc): h2c, or h2
// over TLS agreed by ALPN with --backend-tls, on lila's own codec (wire/h2/pool.js: a
// stream goes on a session with room under the backend's
// SETTINGS_MAX_CONCURRENT_STREAMS, else on a new one; a session the backend went away
// from, or whose stream ids are spent, takes no new stream and closes once its streams
// are done; no cap and no queue of its own: a leg exists only with a lease on the
// backend, so streams are bounded by max-conn, and a request that waits does so in the
// visible queue). Here: dialling (through upstream/dial.js, with the connect timeout and
// ALPN checked), the sweep that pings and closes, and what status pages show.
//   pool.request(handler, list, endStream, fresh) -> a stream (wire/h2/stream.js)
//   failureOf(stream) -> why its session's socket failed: an Error, words, or null
class Http2Pool {
  constructor (backend, { connectTimeout, tls = null, sweepMs = 1000 }) {
    this.backend = backend
    this.connectTimeout = connectTimeout
    this.tls = tls // tls.connect options with --backend-tls
    this.reuses = 0 // streams on a session that had carried one before
    const sweeps = ms => Math.max(2, Math.ceil(ms / sweepMs))
    this.sessions = new SessionPool({
      dial: () => this.dial(),
      options: { maxStreamId: LAST_STREAM_ID },
      pingAfter: sweeps(PING_MS),
      idleAfter: sweeps(IDLE_MS)
    })
  }

  // A reload: new sessions use the new settings.
  configure (connectTimeout, tls) {
    this.connectTimeout = connectTimeout
    this.tls = tls
  }

  dial () {
    const socket = dial(this.backend, this.tls === null ? null : { ...this.tls, ALPNProtocols: ['h2'] })
    socket.setTimeout(this.connectTimeout) // until connected (see connected)
    socket.once(readyEvent(socket), connected)
    socket.once('timeout', onConnectTimeout)
    socket.on('error', failed)
    return socket
  }

  // A stream for `handler` with the request's header list; `fresh`: on a new session
  // (the last one refused the stream, or went away).
  request (handler, list, endStream, fresh = false) {
    const s = fresh
      ? this.sessions.open().request(handler, list, endStream)
      : this.sessions.request(handler, list, endStream)
    if (s !== null && s.id > 1) this.reuses++
    return s
  }

  // The listener's sweep: silent sessions pinged, dead and idle ones closed, and each
  // session's flood counters decayed.
  expire () {
    this.sessions.sweep()
    for (const session of this.sessions.sessions) session.conn.sweep()
  }

  // Every session ends once its streams are done.
  close () {
    this.sessions.close()
  }

  // { sockets: sessions, idle, connects, reuses, streams }
  snapshot () {
    let idle = 0
    let streams = 0
    for (const { conn } of this.sessions.sessions) {
      if (conn.streams.size === 0) idle++
      streams += conn.streams.size
    }
    const { sessions, opened } = this.sessions
    return { sockets: sessions.length, idle, connects: opened, reuses: this.reuses, streams }
  }
}

// Socket handlers (`this` is the socket).
function connected () {
  this[CONNECTED] = true
  this.setTimeout(0) // the connect timeout is over
  if (this.encrypted && this.alpnProtocol !== 'h2') {
    this[FAILURE] = NOT_H2
    this.destroy()
  }
}

function onConnectTimeout () {
  const socket = this
  connectTimedOut(() => socket[CONNECTED] !== true && !socket.destroyed, () => {
    if (socket[FAILURE] === undefined) socket[FAILURE] = 'connect timed out'
    socket.destroy()
  })
}

function failed (err) {
  if (this[FAILURE] !== undefined) return
  const noH2 = err.code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL' ||
    /no application protocol/i.test(err.message)
  this[FAILURE] = noH2 ? NOT_H2 : err
}

// Why the session of stream `s` lost its socket: an Error, words, or null (it closed).
function failureOf (s) {
  const transport = s.conn.transport
  const failure = transport === null ? undefined : transport.socket[FAILURE]
  return failure === undefined ? null : failure
}

module.exports = { Http2Pool, failureOf }
