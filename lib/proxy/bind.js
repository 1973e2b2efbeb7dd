'use strict'

const { RuntimeError, reasonOf } = require('../errors')
const { formatAddress, plainAddress } = require('../address')

// A deep accept queue (the kernel caps it at net.core.somaxconn): a burst of connects
// waits in it rather than having its SYNs dropped and retried seconds later.
const BACKLOG = 4096

// Bind `server` to the listener's host and port. Resolves with the bound address as
// text ("0.0.0.0:4444", "[::]:4444"); a bind failure becomes a RuntimeError that says
// where and why in one line. Later errors (accept failing) are the caller's to handle.
function listen (server, { host, port }) {
  return new Promise((resolve, reject) => {
    const onError = err => {
      const where = formatAddress(host || '0.0.0.0', port)
      reject(new RuntimeError(`cannot listen on ${where}: ${reasonOf(err)}`, err))
    }
    server.once('error', onError)
    server.listen({ host: host || undefined, port, backlog: BACKLOG }, () => {
      server.off('error', onError)
      resolve(boundAddress(server))
    })
  })
}

function boundAddress (server) {
  const { address, port } = server.address()
  return formatAddress(address, port)
}

// A connection's two ends as a PROXY protocol header gave them (--accept-proxy), set by
// the prelude on the socket a session reads.
const ORIGIN = Symbol('lila.origin')

function setOrigin (socket, origin) {
  socket[ORIGIN] = origin
}

// The client's address as users write it (see plainAddress): the one a PROXY header
// gave, or the socket's peer.
function clientAddress (socket) {
  const origin = socket[ORIGIN]
  return plainAddress(origin === undefined ? socket.remoteAddress || '' : origin.source.address)
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

module.exports = { listen, clientAddress, setOrigin, originOf, BACKLOG }
