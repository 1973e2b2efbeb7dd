'use strict'

const { responseHead } = require('./rewrite')

const UPGRADE = { upgrade: true } // responseHead's `how` for a 101

// 101 Switching Protocols: from here on, bytes flow raw both ways until either side
// closes; the backend connection is no longer HTTP and never goes back to the pool.
// Idleness is the listener's sweep (--idle-timeout) on the client's side, as for any
// client: the backend's socket has no timeout, and --timeout does not apply.
// Bytes to the client go through the exchange (exchange.toClient), which counts them
// and holds the backend while the client does not read.
class Tunnel {
  constructor (exchange, session, conn) {
    this.exchange = exchange
    this.session = session
    this.conn = conn // the backend connection, until it closes
  }

  // The backend's 101 head `res`, read in buf up to `end`: what followed it goes to
  // the client, and what the client sent after its request head to the backend.
  open (res, buf, end) {
    const { exchange, session } = this
    this.conn.socket.setTimeout(0)
    const { protocol } = exchange.listener
    exchange.sendHead(protocol.sticky.head(exchange, responseHead(res, UPGRADE, protocol.rewrite.response, exchange)))
    if (end < buf.length) exchange.toClient(buf.subarray(end))
    const early = session.takeBuffered()
    if (early !== null) this.toBackend(early)
  }

  toBackend (piece) {
    // The backend closed: what the client still sends has nowhere to go.
    if (this.conn === null) return
    if (!this.conn.socket.write(piece)) this.session.pause()
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
