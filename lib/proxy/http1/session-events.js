'use strict'

const { handlers } = require('../socket-events')
const { closed } = require('./client-reads')

// The HttpSession (session.js) a client socket serves.
const SESSION = Symbol('lila.httpSession')

// Client socket handlers shared by every session (socket-events.js): `this` is the
// socket.
const CLIENT = handlers({
  data (chunk) { this[SESSION].onData(chunk) },
  end () { this[SESSION].onEnd() },
  error (err) { this[SESSION].onError(err) },
  close () {
    this[SESSION].onClose()
    closed(this)
  },
  drain () { if (this[SESSION].exchange !== null) this[SESSION].exchange.onClientDrain() }
})

module.exports = { SESSION, CLIENT }
