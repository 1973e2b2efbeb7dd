'use strict'

const { readFromNowInto, copied, OwnBuffer, SHARED } = require('../read-buffers')
// A body longer than this streams through (shorter ones are held whole: request-body.js).
const { REPLAY_LIMIT } = require('../../limits')

const READS = Symbol('lila.clientReads')

// A plain client connection that sends a long request body, or that is to stay open
// for another request, reads from then on into read-buffers.js's buffers as backend
// sockets do, not into a new 64 KiB buffer each read: a 256 KiB POST made four, and V8
// counts each as external memory (scavenges "for external memory pressure" and the
// malloc churn behind them were a third of lila's CPU on such bodies); and a
// keep-alive request's read through Node's Readable made about 700 bytes of garbage
// (the buffer and its ArrayBuffer, and maybeReadMore's tick, whose queue's run makes
// a Map) where a copy out of the shared buffer makes one Buffer. Each read goes to the
// session as a 'data' event would (onData). A bulk read's buffer is read into again
// only once nothing holds what it read (holdsRead); else it stays with what holds it
// and the socket takes another. Not before the first request's head is read: the
// connection may still turn out to be HTTP/2's (prior knowledge), which reads by
// 'data' events.
class ClientReads extends OwnBuffer {
  constructor (session) {
    super()
    this.session = session
  }
}

// The session read `head`: a long body, or a connection kept alive for more requests
// (not one asking to become a tunnel), switches its socket's reads. Not while the
// socket is paused or holds unread chunks: they would come out of order.
function readsAfter (session, head) {
  const long = head.chunked || head.bodyLength > REPLAY_LIMIT
  if (!long && (!head.keepAlive || head.asksUpgrade)) return
  const socket = session.client
  if (socket[READS] !== undefined || socket.isPaused() || socket.readableLength > 0) return
  const reads = new ClientReads(session)
  socket[READS] = readFromNowInto(socket, onRead) ? reads : null
}

// The client's connection closed (session-events.js, after the session's onClose): its
// buffer goes back to the count, not to the spares, as a write may still hold it. A
// handler of the socket's own, not a closure per connection: memory per idle client.
function closed (socket) {
  const reads = socket[READS]
  if (reads !== undefined && reads !== null) reads.letGo(false)
}

function onRead (nread, buffer) {
  const reads = this[READS]
  const session = reads.session
  if (buffer === SHARED) {
    // The next buffer is chosen after the read is handed on: a backend socket made
    // while handling it takes whatever is next at once (read-buffers.js).
    session.onData(copied(nread))
    return reads.next(nread, buffer, true)
  }
  const before = session.exchange
  session.onData(buffer.subarray(0, nread))
  reads.next(nread, buffer, !holdsRead(session, before) && !holdsRead(session, session.exchange))
}

// Does anything still hold bytes of the session's last read: its unread bytes, or
// exchange `x`'s body (held for a replay, copied for a shadow, or in its leg's writes)?
function holdsRead (session, x) {
  if (session.buf !== null) return true
  if (x === null) return false
  if (x.tunnel !== null || x.shadow !== null) return true
  if (x.body.kept && x.body.heldBytes > 0) return true
  return x.leg === null || x.leg.holdsBody()
}

module.exports = { readsAfter, onRead, closed, ClientReads, READS }
