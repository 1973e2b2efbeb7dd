'use strict'

const fs = require('fs')
const net = require('net')
const { RuntimeError, reasonOf } = require('../errors')
const { formatAddress, plainAddress, unixPath } = require('../address')

// A deep accept queue (the kernel caps it at net.core.somaxconn): a burst of connects
// waits in it rather than having its SYNs dropped and retried seconds later.
const BACKLOG = 4096

// Bind `server` to the listener's host and port, or to the Unix socket its host names
// ("unix:/run/lila.sock"). Resolves with the bound address as text ("0.0.0.0:4444",
// "[::]:4444", "unix:/run/lila.sock"); a bind failure becomes a RuntimeError that says
// where and why in one line. Later errors (accept failing) are the caller's to handle.
// A socket file left behind by a process that is gone (nothing accepts on it) is
// removed first; one something still listens on is left alone, and the bind fails.
// Closing the server removes the file (Node does).
async function listen (server, { host, port }) {
  const path = unixPath(host)
  const where = path !== null ? host : formatAddress(host || '0.0.0.0', port)
  const bind = () => new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(listenOptions({ host, port }), () => {
      server.off('error', reject)
      resolve()
    })
  })
  try {
    try {
      await bind()
    } catch (err) {
      if (path === null || err.code !== 'EADDRINUSE' || !await removeStaleSocket(path)) throw err
      await bind()
    }
  } catch (err) {
    throw new RuntimeError(`cannot listen on ${where}: ${listenReason(err, path)}`, err)
  }
  return boundAddress(server)
}

// What server.listen() takes for a listener's host and port (also to listen again).
function listenOptions ({ host, port }) {
  const path = unixPath(host)
  if (path !== null) return { path, backlog: BACKLOG }
  return { host: host || undefined, port, backlog: BACKLOG }
}

function listenReason (err, path) {
  if (path !== null && err.code === 'EADDRINUSE') {
    if (!isSocket(path)) return 'a file that is not a socket is in the way'
    return 'address already in use (something listens on it)'
  }
  return reasonOf(err)
}

// Remove the socket file at `path` if nothing accepts connections on it (what a process
// that died leaves behind). Resolves true when it was removed (or is gone), false when
// it is in use or is not a socket.
function removeStaleSocket (path) {
  if (!isSocket(path)) return Promise.resolve(!fs.existsSync(path))
  return new Promise(resolve => {
    const probe = net.connect({ path })
    probe.once('connect', () => {
      probe.destroy()
      resolve(false)
    })
    probe.once('error', err => {
      if (err.code !== 'ECONNREFUSED') return resolve(err.code === 'ENOENT')
      try {
        fs.unlinkSync(path)
        resolve(true)
      } catch (unlinkErr) {
        resolve(unlinkErr.code === 'ENOENT')
      }
    })
  })
}

function isSocket (path) {
  try {
    return fs.lstatSync(path).isSocket()
  } catch {
    return false
  }
}

function boundAddress (server) {
  const address = server.address()
  if (typeof address === 'string') return `unix:${address}`
  return formatAddress(address.address, address.port)
}

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
  listen,
  listenOptions,
  removeStaleSocket,
  clientAddress,
  setOrigin,
  carryOrigin,
  originOf,
  BACKLOG,
  UNIX_ORIGIN
}
