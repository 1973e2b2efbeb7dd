'use strict'

const fs = require('fs')
const net = require('net')

// The file of a Unix socket listener. Node (libuv) removes the path a server was bound
// to when the server closes, which in an upgrade would take the path from under the new
// lila: it listens on the same socket, handed over, and the old one closes its copy. So
// lila binds a temporary name beside the path, links the path to the socket and removes
// the temporary name (the close then removes nothing), and removes the path itself
// when the listener stops for good (forget).
//
//   temporaryName(path)          the name to bind, or null when it would be too long for
//                                a socket address (then the path is bound as it is)
//   place(temporary, path)       link `path` to the socket bound at `temporary` (workers
//                                of one primary may all place it at once); a stale
//                                socket at `path` (nothing accepts on it) is replaced;
//                                rejects with an Error whose `reason` says why not
//   own(server, path)            this server's socket is the one at `path`: forget() removes it
//   forget(server)               remove the path if it is still this server's socket
//   removeStaleSocket(path)      -> true when nothing is in the way any more

// The longest path a socket address holds here (sun_path less its ending zero byte).
const MAX_PATH = 107
const owned = new WeakMap() // server -> { path, ino }

// Workers of --workers bind through their primary (cluster), which shares one socket
// per name: they must all bind the same temporary name, the primary's.
function temporaryName (path) {
  const owner = require('cluster').isWorker ? process.ppid : process.pid
  const name = `${path}.${owner}.new`
  return Buffer.byteLength(name) > MAX_PATH ? null : name
}

async function place (temporary, path) {
  // The socket's own inode, taken before anything: workers of one primary place the
  // same socket at once, and one may link it and remove the temporary name while
  // another is still here. The path holding this inode is placed, whoever linked it.
  const ino = inode(temporary)
  const placed = () => ino !== null && inode(path) === ino
  try {
    try {
      fs.linkSync(temporary, path)
    } catch (err) {
      if (placed()) return
      if (err.code === 'ENOENT' && isSocket(path)) return // another worker of this primary placed it
      if (err.code !== 'EEXIST') throw err
      if (!isSocket(path)) throw reasoned('a file that is not a socket is in the way')
      if (!await removeStaleSocket(path)) {
        if (placed()) return // another worker replaced the stale file while this one probed
        throw reasoned('address already in use (something listens on it)')
      }
      try {
        fs.linkSync(temporary, path)
      } catch (err) {
        if (!placed()) throw err
      }
    }
  } finally {
    try { fs.unlinkSync(temporary) } catch {}
  }
}

function reasoned (reason) {
  return Object.assign(new Error(reason), { reason })
}

function own (server, path) {
  try {
    owned.set(server, { path, ino: fs.lstatSync(path).ino })
  } catch {}
}

function forget (server) {
  const file = owned.get(server)
  if (file === undefined) return
  owned.delete(server)
  try {
    if (fs.lstatSync(file.path).ino === file.ino) fs.unlinkSync(file.path)
  } catch {} // gone already
}

// Remove the socket file at `path` if nothing accepts connections on it (what a process
// that died leaves behind). Resolves true when it was removed (or is gone), false when
// it is in use or is not a socket.
function removeStaleSocket (path) {
  if (!isSocket(path)) return Promise.resolve(!fs.existsSync(path))
  const probed = inode(path) // removed only if the file is still the one probed
  return new Promise(resolve => {
    const probe = net.connect({ path })
    probe.once('connect', () => {
      probe.destroy()
      resolve(false)
    })
    probe.once('error', err => {
      if (err.code !== 'ECONNREFUSED') return resolve(err.code === 'ENOENT')
      if (inode(path) !== probed) return resolve(false) // replaced meanwhile
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

function inode (path) {
  try {
    return fs.lstatSync(path).ino
  } catch {
    return null
  }
}

module.exports = { temporaryName, place, own, forget, removeStaleSocket, isSocket }
