'use strict'

// What a TcpSession (tcp.js) holds of its client's bytes for a backend that has not got
// them or not answered them. While a backend is being connected, what the client sends
// is held (and replayed to the next backend if the connect fails); past REPLAY_LIMIT,
// the client is paused. With --retry-on reset, what went to a backend is kept until its
// first byte back (as long as it stays within REPLAY_LIMIT) for another backend if that
// one resets first. The last backend that reset them is remembered: the access log and
// the span name it when no other is left to take them.
const { REPLAY_LIMIT } = require('../limits')

class TcpReplay {
  constructor () {
    this.held = null // the client's bytes while no backend is connected
    this.bytes = 0 // held and kept, counted against REPLAY_LIMIT
    this.kept = null // --retry-on reset: what the backend was sent, while it has answered nothing
    this.resetBy = null // the address of the last backend that reset after taking them
  }

  // A chunk that came while connecting; true once the client should pause.
  hold (chunk) {
    ;(this.held ||= []).push(chunk)
    this.bytes += chunk.length
    return this.bytes >= REPLAY_LIMIT
  }

  // A chunk sent to a backend while `kept` is not null; past REPLAY_LIMIT, none is kept.
  keep (chunk) {
    this.bytes += chunk.length
    if (this.bytes > REPLAY_LIMIT) this.kept = null
    else this.kept.push(chunk)
  }

  // Connected: what was held is written to `socket` (true if anything was), and kept
  // for another backend when `resends` (--retry-on reset) and it fits.
  flushTo (socket, resends) {
    const held = this.held
    this.held = null
    if (held !== null) for (const chunk of held) socket.write(chunk)
    if (resends && this.bytes <= REPLAY_LIMIT) this.kept = held || []
    return held !== null
  }

  // The backend answered: nothing needs keeping.
  answered () {
    this.kept = null
  }

  // The backend at `address` reset before answering: what it was sent is held for the
  // next one.
  rewind (address) {
    this.held = this.kept
    this.kept = null
    this.resetBy = address
  }
}

module.exports = { TcpReplay }
