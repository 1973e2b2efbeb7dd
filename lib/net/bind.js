'use strict'

const net = require('net')
const { RuntimeError, reasonOf } = require('../errors')
const { formatAddress, plainAddress, unixPath } = require('../address')
const { temporaryName, place, own, removeStaleSocket, isSocket } = require('./socket-file')

// Binding the servers lila listens with: the proxy's listeners, --redirect-http's, the
// admin listener. Below proxy/ and admin/, which both use it.
//   listen(server, { host, port, addressGiven }, given) -> the bound address, in words
//   handleOf(server), descriptorOf(server)   to hand a listening socket on

// A deep accept queue (the kernel caps it at net.core.somaxconn): a burst of connects
// waits in it rather than having its SYNs dropped and retried seconds later.
const BACKLOG = 4096

// Bind `server` to the listener's host and port, or to the Unix socket its host names
// ("unix:/run/lila.sock"). Resolves with the bound address as text ("0.0.0.0:4444",
// "[::]:4444", "unix:/run/lila.sock"); a bind failure becomes a RuntimeError that says
// where and why in one line. Later errors (accept failing) are the caller's to handle.
// A socket file left behind by a process that is gone (nothing accepts on it) is
// replaced; one something still listens on is left alone, and the bind fails. The
// socket file stays when the server closes: forget(server) (socket-file.js) removes it.
// `given`: a socket this process was given rather than one to bind (by systemd, or by
// the lila it takes over from: cli/inherited.js), { fd, what, check, owned }: listen on
// it; with `check`, the host and port given (addressGiven) must be the socket's.
async function listen (server, options, given = null) {
  const bound = await listenAt(server, options, given)
  noDelayOnce(server)
  return bound
}

async function listenAt (server, { host, port, addressGiven = null }, given) {
  if (given !== null) return listenOn(server, { host, port, addressGiven }, given)
  const path = unixPath(host)
  if (path !== null) return listenUnix(server, host, path)
  const where = formatAddress(host || '0.0.0.0', port)
  try {
    await bind(server, listenOptions({ host, port }))
  } catch (err) {
    throw new RuntimeError(`cannot listen on ${where}: ${reasonOf(err)}`, err)
  }
  return boundAddress(server)
}

function bind (server, options) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(options, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

// A Unix socket: bound at a temporary name, then linked where it belongs (socket-file.js).
async function listenUnix (server, host, path) {
  const temporary = temporaryName(path)
  const name = temporary === null ? path : temporary
  try {
    try {
      await bind(server, { path: name, backlog: BACKLOG })
    } catch (err) {
      if (err.code !== 'EADDRINUSE' || !await removeStaleSocket(name)) throw err
      await bind(server, { path: name, backlog: BACKLOG })
    }
    if (temporary !== null) await place(temporary, path)
  } catch (err) {
    if (server.listening) server.close()
    throw new RuntimeError(`cannot listen on ${host}: ${err.reason || listenReason(err, path)}`, err)
  }
  if (temporary !== null) own(server, path)
  return host
}

// A socket given to this process: listened on as it is (its address is the socket's).
async function listenOn (server, { host, port, addressGiven }, given) {
  try {
    await bind(server, { fd: given.fd, backlog: BACKLOG })
  } catch (err) {
    throw new RuntimeError(`cannot listen on ${given.what}: ${reasonOf(err)}`, err)
  }
  const path = unixPath(host)
  const problem = given.check ? mismatch({ host, port, path, addressGiven }, server.address()) : null
  if (problem !== null) {
    server.close()
    throw new RuntimeError(`${given.what} ${problem}`)
  }
  if (path !== null) {
    if (given.owned) own(server, path) // lila's own file, from the lila before: removed at the end
    return host
  }
  return boundAddress(server)
}

// How the socket bound at `actual` (server.address()) differs from what the config
// asks for, in words after the socket's name; null when it does not. Only what was
// given is held to: a listener without --port takes the socket's port.
function mismatch ({ host, port, path, addressGiven }, actual) {
  const given = addressGiven || { host: true, port: true }
  const at = typeof actual === 'string' ? `unix:${actual}` : formatAddress(actual.address, actual.port)
  if (path !== null) {
    return typeof actual === 'string' && actual === path ? null : `listens on ${at}, not on ${host} (--host)`
  }
  if (typeof actual === 'string') return `listens on ${at}, not on a TCP port (--host, --port)`
  if (given.port && port !== 0 && port !== actual.port) return `listens on ${at}, not on port ${port} (--port)`
  const wanted = host && net.isIP(host) ? plainAddress(host) : null // a name is not looked up
  if (given.host && wanted !== null && wanted !== plainAddress(actual.address)) {
    return `listens on ${at}, not on ${host} (--host)`
  }
  return null
}

// What server.listen() takes for a TCP listener's host and port.
function listenOptions ({ host, port }) {
  return { host: host || undefined, port, backlog: BACKLOG }
}

function listenReason (err, path) {
  if (path !== null && err.code === 'EADDRINUSE') {
    if (!isSocket(path)) return 'a file that is not a socket is in the way'
    return 'address already in use (something listens on it)'
  }
  return reasonOf(err)
}

// A server made with noDelay sets TCP_NODELAY on every socket it accepts, a system call
// each (net.Server). Linux, macOS and FreeBSD give an accepted socket the listening
// socket's TCP_NODELAY: set once there, it spares that call per connection
// (bench/README.md, W2). Elsewhere, on a Unix socket, or a handle that is not the
// socket itself (a --workers worker's), each socket still gets it from the server.
const INHERITS_NODELAY = ['linux', 'darwin', 'freebsd'].includes(process.platform)

function noDelayOnce (server) {
  const handle = handleOf(server)
  if (!INHERITS_NODELAY || !server.noDelay || handle === null || typeof handle.setNoDelay !== 'function') return
  if (handle.setNoDelay(true) === 0) server.noDelay = false // (0: set; else an errno)
}

// The handle of a listening server, to send it to another process over IPC (the
// --workers primary holds no socket of its own: workers.js), and its descriptor, to
// hand it to a process started with it (cli/upgrade.js). Node has no public way to say
// either: the server's `_handle` it is, and its `fd` (-1 when not listening).
function handleOf (server) {
  return server._handle || null
}

function descriptorOf (server) {
  const handle = handleOf(server)
  return handle !== null && typeof handle.fd === 'number' ? handle.fd : -1
}

function boundAddress (server) {
  const address = server.address()
  if (typeof address === 'string') return `unix:${address}`
  return formatAddress(address.address, address.port)
}

module.exports = { listen, handleOf, descriptorOf }
