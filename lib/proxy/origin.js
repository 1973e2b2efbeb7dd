'use strict'

const { plainAddress } = require('../address')

// Where a client connection is from, as the prelude learnt it and the sessions read it:
//   setOrigin(socket, origin), carryOrigin(raw, tlsSocket)   the prelude's side
//   clientAddress(socket) -> "10.0.0.1", "::1", "unix:"      for logs, limits, hashing
//   originOf(socket) -> { source, destination }              for a PROXY header sent on

// A connection's two ends as a PROXY protocol header gave them (--accept-proxy), set by
// the prelude on the socket a session reads.
const ORIGIN = Symbol('lila.origin')
// A client of a Unix socket listener: no address to forward (a PROXY header says
// UNKNOWN/LOCAL); its address, for logs and hashing, is "unix:" (as nginx says it).
const UNIX_ORIGIN = Object.freeze({ source: null, destination: null })
const UNIX_CLIENT = 'unix:'

function setOrigin (socket, origin) {
  socket[ORIGIN] = origin
}

// The TLSSocket made over `raw` has its origin (the PROXY header's, or the Unix one).
function carryOrigin (raw, socket) {
  if (raw[ORIGIN] !== undefined) socket[ORIGIN] = raw[ORIGIN]
}

// The client's address as users write it (see plainAddress): the one a PROXY header
// gave, or the socket's peer ("unix:" on a Unix socket).
function clientAddress (socket) {
  const origin = socket[ORIGIN]
  if (origin === undefined) return plainAddress(socket.remoteAddress || '')
  return origin.source === null ? UNIX_CLIENT : plainAddress(origin.source.address)
}

// { source, destination } ({ address, port } each) of a client connection: what a
// PROXY header says to a backend. null when the socket no longer knows its peer.
function originOf (socket) {
  const origin = socket[ORIGIN]
  if (origin !== undefined) return origin
  if (!socket.remoteAddress || !socket.localAddress) return { source: null, destination: null }
  return {
    source: { address: plainAddress(socket.remoteAddress), port: socket.remotePort },
    destination: { address: plainAddress(socket.localAddress), port: socket.localPort }
  }
}

module.exports = {
  clientAddress,
  setOrigin,
  carryOrigin,
  originOf,
  UNIX_ORIGIN
}
