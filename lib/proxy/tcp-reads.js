'use strict'

const { OwnBuffer, readIntoShared, SHARED } = require('./read-buffers')

// Which buffer a tcp session's plain backend socket reads into next (tcp.js READ). As
// every reader's (read-buffers.js): the shared one, copied out, until a bulk read; then
// one of its own, read into again while nothing holds what it read. Unlike other
// readers, it keeps that buffer across small reads too: an answer's last read is small,
// and a socket that let its buffer go there read the next answer's first 64 KiB into
// the shared one, a copy and a new 64 KiB buffer (external memory, for the collector)
// per answer on a kept-open connection (bench/README.md, tcp 1 MiB). Kept so, a
// connection would hold 64 KiB while idle: once it goes quiet (a listener sweep without
// a byte either way), the socket reads into the shared buffer again. That costs a
// listener on its handle (readIntoShared), so it is done once per connection: after it,
// the connection lets its buffer go at a small read, as other readers do.
class BackendReads extends OwnBuffer {
  constructor () {
    super()
    this.keepsSmall = true // until it went quiet holding its own buffer
  }

  // `nread` bytes read into `buffer` were handed on; `free`: nothing holds them, or will
  // by the socket's next read.
  after (nread, buffer, free) {
    if (free && buffer !== SHARED && this.keepsSmall) return this.keep()
    this.next(nread, buffer, free)
  }

  // The connection went quiet: `socket` no longer holds a buffer of its own (`free`:
  // nothing holds what was read into it).
  quiet (socket, free) {
    if (this.own === null || !this.keepsSmall || !readIntoShared(socket)) return
    this.keepsSmall = false
    this.letGo(free)
  }
}

module.exports = { BackendReads }
