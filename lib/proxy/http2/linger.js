'use strict'

const { NO_ERROR } = require('../../wire/h2/constants')
const { HALF_CLOSED_LOCAL } = require('../../wire/h2/stream')

// An HTTP/2 session's streams whose response went whole before the request's body
// ended (a refusal, a 401). RFC 9113 8.1 lets the server reset the rest NO_ERROR once
// the response is out, but a client may then report an error instead of the answer
// (curl 7.88 does while it uploads). So, as an HTTP/1.1 session lingers, what still
// comes is dropped (the session's drop: nor does it count as the connection's
// activity) until LINGER_MS after the response is out; a body not ended by then is
// reset NO_ERROR. Counted in the listener's sweeps, as HTTP/1.1's linger is: no timer,
// and nothing at all for a session that never lingers.
class Lingering {
  constructor (conn, ticks) {
    this.conn = conn
    this.ticks = ticks // sweeps in LINGER_MS
    this.left = new Map() // stream -> sweeps left
  }

  add (s) {
    this.left.set(s, this.ticks)
  }

  // One sweep nearer each stream's reset; a stream whose response the client has not
  // taken all of yet (its end queued behind the window) waits LINGER_MS again. True
  // once none is left.
  sweep () {
    for (const [s, ticks] of this.left) {
      if (s.closed) this.left.delete(s)
      else if (ticks > 1) this.left.set(s, ticks - 1)
      else if (s.state !== HALF_CLOSED_LOCAL) this.left.set(s, this.ticks)
      else {
        this.left.delete(s)
        this.conn.reset(s, NO_ERROR)
      }
    }
    return this.left.size === 0
  }
}

module.exports = { Lingering }
