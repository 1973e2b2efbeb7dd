'use strict'

const { RuntimeError, reasonOf } = require('./errors')
const { formatAddress, plainAddress } = require('./address')

// Bind `server` to the listener's host and port. Resolves with the bound address as
// text ("0.0.0.0:4444", "[::]:4444"); a bind failure becomes a RuntimeError that says
// where and why in one line.
function listen (server, { host, port }, log) {
  return new Promise((resolve, reject) => {
    const onError = err => {
      const where = formatAddress(host || '0.0.0.0', port)
      reject(new RuntimeError(`cannot listen on ${where}: ${reasonOf(err)}`, err))
    }
    server.once('error', onError)
    // A deep accept queue (the kernel caps it at net.core.somaxconn): a burst of
    // connects waits in it rather than having its SYNs dropped and retried seconds later.
    server.listen({ host: host || undefined, port, backlog: 4096 }, () => {
      server.off('error', onError)
      // Later errors (accept failing for lack of file descriptors) are logged; the
      // server keeps listening.
      server.on('error', err => log.error(`accept failed: ${reasonOf(err)}`))
      resolve(boundAddress(server))
    })
  })
}

function boundAddress (server) {
  const { address, port } = server.address()
  return formatAddress(address, port)
}

// The client's address as users write it (see plainAddress).
function clientAddress (socket) {
  return plainAddress(socket.remoteAddress || '')
}

module.exports = { listen, boundAddress, clientAddress }
