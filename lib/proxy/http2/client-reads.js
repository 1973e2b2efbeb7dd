'use strict'

const { readFromNowInto, copied, OwnBuffer, SHARED, BULK } = require('../read-buffers')

const READS = Symbol('lila.h2ClientReads')

// An HTTP/2 client connection in the clear reads into read-buffers.js's buffers, as
// backend sockets and long HTTP/1.1 bodies do (http1/client-reads.js), not into a new
// buffer each read: V8 counts each as external memory and scavenges for it (a fifth of
// lila's CPU on 256 KiB POSTs from h2load, P2h2). A small read lands in the shared
// buffer and is copied out (the codec hands DATA on as views of what it was given); a
// bulk one gets the socket a buffer of its own, read into again only once no exchange
// fed from it still holds its bytes. Bytes held till an answer comes (small bodies
// kept whole for a replay: ten 4 KiB POSTs in one read, P1h2) would make every read
// take a new 64 KiB buffer of its own; such a socket's reads are copied out instead,
// each into a buffer of its length. The codec itself keeps nothing of a read (a frame
// cut short is copied: wire/h2/inbound.js).
class ClientReads extends OwnBuffer {
  constructor (session) {
    super()
    this.session = session
    this.fed = null // during a bulk read, `list`: the exchanges its DATA went to
    this.list = []
  }
}

// From now on, the session's socket reads as above; false where it cannot (TLS, bytes
// already waiting in its Readable buffer, another Node): its 'data' events go on.
function readInto (session) {
  const socket = session.socket
  if (socket[READS] !== undefined || socket.readableLength > 0) return false
  if (!readFromNowInto(socket, onRead)) return false
  socket[READS] = new ClientReads(session)
  socket.once('close', onClose) // a write may still hold the buffer
  return true
}

// The exchange `x` was given DATA of the read under way: noted if it is a bulk one.
function fed (socket, x) {
  const reads = socket[READS]
  if (reads !== undefined && reads.fed !== null) reads.fed.push(x)
}

function onRead (nread, buffer) {
  const reads = this[READS]
  const conn = reads.session.conn
  const own = buffer !== SHARED
  // Whatever happens in receive() (a backend socket made takes the next buffer there
  // is), this socket's next buffer is chosen after it.
  if (!own && nread < BULK) {
    conn.receive(copied(nread))
    return reads.next(nread, buffer, true)
  }
  reads.fed = reads.list
  conn.receive(own ? buffer.subarray(0, nread) : copied(nread))
  const hold = holdOf(reads.list)
  reads.fed = null
  reads.list.length = 0
  if (hold === TILL_ANSWER) return reads.letGo(false) // the next read is copied out
  reads.next(nread, buffer, hold === FREE)
}

function onClose () {
  this[READS].letGo(false)
}

// How long the bytes these exchanges were given stay held: TILL_ANSWER, a body kept
// whole for a replay; BRIEFLY, a body kept till it passes the replay limit, copied for
// a shadow, or in its leg's writes; FREE, not at all.
const FREE = 0
const BRIEFLY = 1
const TILL_ANSWER = 2
function holdOf (exchanges) {
  let hold = FREE
  for (let i = 0; i < exchanges.length; i++) {
    const x = exchanges[i]
    if (x.body.keptTillAnswer()) return TILL_ANSWER
    if (x.shadow !== null || (x.body.kept && x.body.heldBytes > 0)) hold = BRIEFLY
    else if (x.leg === null || x.leg.holdsBody()) hold = BRIEFLY
  }
  return hold
}

module.exports = { readInto, fed, onRead, ClientReads, READS }
