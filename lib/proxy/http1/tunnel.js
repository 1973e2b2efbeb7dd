'use strict'

// 101 Switching Protocols: from here on, bytes flow raw both ways until either side
// closes; the backend connection is no longer HTTP and never goes back to the pool.
// Idleness is the listener's sweep (--idle-timeout) on the client's side, as for any
// client: the backend's socket has no timeout, and --timeout does not apply.
// Bytes to the client go through the exchange (toClient: counted, and the backend held
// while the client does not read), by the leg that owns the connection (leg.js); the
// client's come here from its session (request-reader.js).
class Tunnel {
  constructor (session, conn) {
    this.session = session
    this.conn = conn // the backend connection, until it closes
  }

  // The 101 went to the client: what it sent after its request head goes on.
  open () {
    const early = this.session.takeBuffered()
    if (early !== null) this.toBackend(early)
  }

  toBackend (piece) {
    // The backend closed: what the client still sends has nowhere to go.
    if (this.conn === null) return
    if (!this.conn.socket.write(piece)) this.session.pauseBody(null)
  }

  // A half-close passes through.
  clientEnded () {
    if (this.conn !== null) this.conn.socket.end()
  }

  backendEnded () {
    this.session.end()
  }

  backendClosed () {
    this.conn = null
    this.session.end()
  }
}

module.exports = { Tunnel }
