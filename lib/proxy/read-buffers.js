'use strict'

// Where lila's plain sockets read into (net.Socket's `onread` option): tcp.js's and
// http1/connection-pool.js's backend sockets, and client sockets (readFromNowInto,
// http1/ and http2/client-reads.js) alike: no buffer allocated per read (V8 counts
// each as external memory, and collects the more often), and none of the Readable
// machinery ('data' events, a buffer list, a tick per read).
//
// Small reads (an answer, a redis reply) land in one buffer every socket shares. The
// next read on any socket writes over it, so they are copied out before being handed
// on (`copied`): a write may wait in Node's queue or the kernel's. A read that fills a
// good part of it (BULK) is moving bulk (a download): that socket gets a buffer of its
// own (`takeOwn`), handed on without a copy. It is read into again (`readAgain`) only
// once no write holds what it read; else the socket lets it go with the write that
// holds it (`letGo`) and takes another, or goes back to the shared one, as does a
// socket whose reads turn small (not a pooled connection between answers, nor a tcp
// backend until its connection goes quiet: `keep`, tcp-reads.js). At most OWN_MAX
// buffers are bound to sockets at a time, for all sockets together (4 MiB); past that,
// bulk is copied too. Each reader holds an OwnBuffer, which makes that choice after
// every read; the reader says only whether what it read is free.
//
// Node calls the socket's `buffer()` right after its `callback()`: the socket that just
// read takes what its callback chose (`next`), every other socket the shared buffer. A
// socket made meanwhile asks at once, so a callback chooses (OwnBuffer's next) only
// after it has handed its read on: chosen before, a socket made while handling the
// read would take the buffer and two sockets would read into it.

const { Socket } = require('net')

const READ_SIZE = 64 * 1024
const BULK = 16 * 1024
const OWN_MAX = 64
const SPARE_MAX = 8 // buffers let go that no write holds, kept for the next bulk socket
const SHARED = Buffer.allocUnsafeSlow(READ_SIZE)
const reads = { own: 0, spare: [], next: SHARED }

function nextBuffer () {
  const next = reads.next
  reads.next = SHARED
  return next
}

// The `onread` option of a socket whose reads go to `callback(nread, buffer)` (`this`
// the socket); `buffer` is SHARED, or the socket's own.
function readsInto (callback) {
  return Object.freeze({ buffer: nextBuffer, callback })
}

// A read into the shared buffer, copied out. By fill, whose pattern is the shared
// buffer: one memcpy of its first `nread` bytes, where Node 20's copy of a part of a
// buffer makes a Uint8Array view of that part first (96 bytes a read).
function copied (nread) {
  return Buffer.allocUnsafe(nread).fill(SHARED, 0, nread)
}

// A buffer of its own for the socket that just read, which reads into it next; null at
// the cap (it stays on the shared buffer).
function takeOwn () {
  if (reads.own >= OWN_MAX) return null
  reads.own++
  reads.next = reads.spare.length > 0 ? reads.spare.pop() : Buffer.allocUnsafeSlow(READ_SIZE)
  return reads.next
}

// The socket that just read reads into its own `buffer` again.
function readAgain (buffer) {
  reads.next = buffer
}

// A socket's own buffer is no longer read into (back to the shared one, or closed).
// `free`: no write holds what was read into it, so another socket may have it.
function letGo (buffer, free) {
  reads.own--
  if (free && reads.spare.length < SPARE_MAX) reads.spare.push(buffer)
}

// Node takes `onread` only when it makes a socket; one a server accepted (a client's)
// is given it later through the fields the option sets (net.js's kBuffer, kBufferGen,
// kBufferCb, found by name on a socket) and its handle's useUserBuffer. Null where
// Node names them otherwise: such a socket keeps its 'data' events.
let onreadFields
function fieldsOfOnread () {
  if (onreadFields !== undefined) return onreadFields
  const probe = new Socket()
  const named = name => Object.getOwnPropertySymbols(probe).find(s => s.description === name)
  const fields = [named('kBuffer'), named('kBufferGen'), named('kBufferCb')]
  onreadFields = fields.includes(undefined) ? null : fields
  return onreadFields
}

// From the next read on, `socket` (connected, reading, its Readable buffer empty) reads
// as readsInto(callback) says. False where it cannot (TLS, another Node).
function readFromNowInto (socket, callback) {
  const fields = fieldsOfOnread()
  if (fields === null || !canBind(socket)) return false
  const [, kBufferGen, kBufferCb] = fields
  socket[kBufferGen] = nextBuffer
  socket[kBufferCb] = callback
  bind(socket, nextBuffer())
  return true
}

// From the next read on, `socket` (reading through readsInto or readFromNowInto, no read
// being handled) reads into the shared buffer, not the one it was to read into: for a
// socket that went quiet holding its own. Outside a read, Node takes a buffer only
// through useUserBuffer, which adds a listener of about 48 bytes to the socket's handle
// until it closes: a reader does this a bounded number of times. False where it cannot.
function readIntoShared (socket) {
  if (fieldsOfOnread() === null || !canBind(socket)) return false
  bind(socket, SHARED)
  return true
}

function canBind (socket) {
  const handle = socket._handle
  return !socket.encrypted && !!handle && typeof handle.useUserBuffer === 'function'
}

// The socket's next read goes into `buffer`: where Node's read takes it (its handle),
// and what it hands the callback with it (kBuffer).
function bind (socket, buffer) {
  socket[fieldsOfOnread()[0]] = buffer
  socket._handle.useUserBuffer(buffer)
}

// What a reading socket holds (a tcp session's backend, a pooled connection, a client
// reading through readFromNowInto): its own buffer while it moves bulk. `next` is asked
// once the read of `nread` bytes into `buffer` was handed on (`free`: nothing holds its
// bytes any more, or will by the socket's next read), and chooses the buffer the socket
// reads into next: its own again, a new one of its own, or the shared one.
class OwnBuffer {
  constructor () {
    this.own = null
  }

  next (nread, buffer, free) {
    const bulk = nread >= BULK
    if (bulk && free && buffer !== SHARED) return readAgain(buffer)
    this.letGo(free)
    if (bulk) this.own = takeOwn()
  }

  // The socket reads into its own buffer again after a read of any size that nothing
  // holds: it is to move bulk again (a pooled connection between two responses).
  keep () {
    readAgain(this.own)
  }

  // The socket no longer reads into its own buffer (`free`: nothing holds it).
  letGo (free) {
    if (this.own === null) return
    letGo(this.own, free)
    this.own = null
  }
}

module.exports = { readsInto, readFromNowInto, readIntoShared, copied, OwnBuffer, SHARED, BULK, OWN_MAX }
