'use strict'

// The client side's sessions to one peer (a backend): a stream goes on a session that
// can open one (under the peer's SETTINGS_MAX_CONCURRENT_STREAMS, not gone away, ids
// left), else on a new session: there is no cap and no queue here, what bounds streams
// is the caller's (a backend's max-conn). A session the peer went away from takes no
// new stream and closes once its streams are done (those above the GOAWAY's last id
// were reset with REFUSED_STREAM: retry them elsewhere). sweep(), called now and then
// by the owner, finds dead sessions without a clock: one quiet for `pingAfter` sweeps
// is pinged, and closed if the next sweep finds the PING unanswered; one with no stream
// for `idleAfter` sweeps is closed.
//
// `dial()` returns a socket (net or tls, connecting is fine: what is written waits),
// the pool joins a client Connection to it. A stream of a session that ends before the
// peer said anything (conn.settingsSeen false: the connect failed) was not processed.

const { Connection } = require('./connection')
const { attach } = require('./socket')

class SessionPool {
  constructor ({ dial, options = {}, pingAfter = 40, idleAfter = 120 }) {
    this.dial = dial
    this.options = options // each Connection's (connection.js DEFAULTS)
    this.pingAfter = pingAfter
    this.idleAfter = idleAfter
    this.sessions = []
    // The peer's SETTINGS_MAX_CONCURRENT_STREAMS as its sessions said it: a new session
    // assumes it until its own SETTINGS come (the peer's limit, not RFC 9113's
    // "unlimited", so that streams are not refused in the first round trip).
    this.peerMaxStreams = options.assumedMaxStreams || 100
    this.opened = 0 // sessions ever opened
    this.closed = false
  }

  // Open a stream (request(handler, list, endStream) of connection.js) on a session
  // that can take it, a new one if none can.
  request (handler, list, endStream) {
    const sessions = this.sessions
    for (let i = 0; i < sessions.length; i++) {
      const conn = sessions[i].conn
      if (conn.canOpen()) return conn.request(handler, list, endStream)
    }
    return this.open().request(handler, list, endStream)
  }

  open () {
    const conn = new Connection(this, 'client', { ...this.options, assumedMaxStreams: this.peerMaxStreams })
    this.sessions.push(new Session(conn))
    this.opened++
    attach(this.dial(), conn)
    return conn
  }

  sweep () {
    for (const session of [...this.sessions]) {
      const conn = session.conn
      if (conn.reads !== session.reads) {
        session.reads = conn.reads
        session.quiet = 0
        session.pinged = false
      } else if (session.pinged) {
        conn.destroy('no answer to a PING')
        continue
      } else if (++session.quiet >= this.pingAfter) {
        session.pinged = conn.ping()
        session.quiet = 0
      }
      session.idle = conn.streams.size === 0 ? session.idle + 1 : 0
      if (session.idle >= this.idleAfter) conn.shutdown()
    }
  }

  // Every session ends gracefully (their streams finish first).
  close () {
    this.closed = true
    for (const session of [...this.sessions]) session.conn.shutdown()
  }

  // { sessions, streams, opened }
  snapshot () {
    let streams = 0
    for (const session of this.sessions) streams += session.conn.streams.size
    return { sessions: this.sessions.length, streams, opened: this.opened }
  }

  // The Connection owner's side.
  onStream (conn, s) { conn.reset(s) } // a client is never offered streams
  onSettings (conn) { this.peerMaxStreams = conn.peerMaxStreams }
  onGoaway () {}
  // A session whose stream ids are spent closes once its last stream is done.
  onStreamClosed (conn) {
    if (conn.streams.size === 0 && conn.spent()) conn.shutdown()
  }

  onPingAck (conn) {
    const session = this.sessions.find(x => x.conn === conn)
    if (session !== undefined) session.pinged = false
  }

  onClose (conn) {
    const i = this.sessions.findIndex(x => x.conn === conn)
    if (i !== -1) this.sessions.splice(i, 1)
  }
}

// What the pool keeps of a session, beside its Connection.
class Session {
  constructor (conn) {
    this.conn = conn
    this.reads = 0 // conn.reads at the last sweep
    this.quiet = 0 // sweeps since a byte came
    this.idle = 0 // sweeps with no stream
    this.pinged = false // a PING awaits its ack
  }
}

module.exports = { SessionPool }
