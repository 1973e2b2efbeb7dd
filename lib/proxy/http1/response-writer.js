'use strict'

const { responseHead, trailerLines, ROOM_LIMIT } = require('./heads')
const { Fields, responseFields, trailerFields } = require('../message/rewrite')
const { reply, CONTINUE } = require('./replies')

// Body bytes up to this many are copied behind a head into one write (writeAfter).
const JOIN_LIMIT = 16 * 1024
const LAST_CHUNK = '0\r\n\r\n'

// How the client's copy of a final response head is framed (heads.js responseHead's
// `how`): one object per combination, so that a response allocates none.
// HEAD_FRAMING[chunked*4 | close*2 | keepAlive10].
const HEAD_FRAMING = []
for (let i = 0; i < 8; i++) {
  HEAD_FRAMING.push(Object.freeze({ chunked: (i & 4) !== 0, close: (i & 2) !== 0, keepAlive10: (i & 1) !== 0 }))
}
const UPGRADE = { upgrade: true } // responseHead's `how` for a 101
const INTERIM = HEAD_FRAMING[0] // a 1xx: its fields alone

// The fields of the head being written (message/rewrite.js): one array for every
// connection, as a head is written at once.
const FIELDS = new Fields()

// How a response body reaches the client (`framing`).
const LENGTH = 0 // as it comes: its length was said, or it has none
const CHUNKS = 1 // lila frames each piece in a chunk (a body of unknown length)
const UNTIL_CLOSE = 2 // as it comes, the connection's close ends it

// What an HTTP/1.1 client connection (session.js) is written: the response to the
// exchange being served (its head framed for this client, held until the first body
// bytes join it in one write; its body as it comes, or in chunks of lila's; its end),
// 1xx heads, a 101's head, and lila's own answers. `client` is the socket; the session
// reads `keepAlive` once a response is done.
class ResponseWriter {
  constructor (client, listener) {
    this.client = client
    this.listener = listener
    this.heldHead = null // the response's head (a Buffer), until the body bytes read with it join it
    this.headSize = 0 // its bytes; those after are room for the body (respond)
    this.framing = LENGTH
    this.keepAlive = false // the connection may serve another request after it
  }

  // Lila's 100 Continue, to an HTTP/1.1 client only.
  sendContinue (x) {
    if (x.head.version !== 1) return false
    this.client.write(CONTINUE, 'latin1')
    return true
  }

  // 1xx heads go on as they are, less hop-by-hop fields; never to HTTP/1.0.
  interim (x, res) {
    if (x.head.version !== 1) return
    responseFields(res, false, null, x, null, FIELDS)
    this.client.write(responseHead(res, FIELDS, INTERIM, -1))
  }

  // The final head: framed for this client (the backend's chunks as they are, a length,
  // chunks of lila's, or the connection's close), with `cookie` (--sticky), held until
  // the first body piece joins it (send, flushHead). `closing`: the connection serves no
  // further request. Returns its size.
  respond (x, res, how, cookie, closing) {
    const { head } = x
    const status = res.status
    let length = res.contentLength
    let chunked = false
    let room = 0
    this.framing = LENGTH
    if (how.framed) {
      chunked = true
    } else if (head.method === 'HEAD' || status === 204 || status === 304) {
      // no body, whatever its length says
    } else if (how.bodyless) {
      if (length === -1) length = 0
    } else if (length === -1) {
      if (head.version === 1 && !how.untilClose) {
        this.framing = CHUNKS
        chunked = true
      } else {
        this.framing = UNTIL_CLOSE
      }
    } else if (length <= ROOM_LIMIT) {
      room = length
    }
    // After a declined upgrade, what the client sent next may be meant as the new
    // protocol or as HTTP; rather than guess, the connection ends with this response.
    this.keepAlive = head.keepAlive && !closing && !head.asksUpgrade && this.framing !== UNTIL_CLOSE && x.body.done
    const headFraming = HEAD_FRAMING[(chunked ? 4 : 0) | (this.keepAlive ? 0 : 2) | (head.version === 0 ? 1 : 0)]
    // The Trailer field stays when its trailers can follow: in lila's chunks.
    responseFields(res, chunked, this.listener.protocol.rewrite.response, x, cookie, FIELDS)
    const bytes = responseHead(res, FIELDS, headFraming, length, room)
    this.heldHead = bytes
    this.headSize = bytes.length - room
    return this.headSize
  }

  // The head leaves now if it still waits for body bytes.
  flushHead () {
    const head = this.heldHead
    if (head === null) return
    this.heldHead = null
    this.client.write(this.headOnly(head))
  }

  headOnly (head) {
    return head.length === this.headSize ? head : head.subarray(0, this.headSize)
  }

  // A piece of the response's body; false when the client's socket is full.
  send (piece) {
    const head = this.heldHead
    const { client } = this
    if (this.framing === CHUNKS) {
      const size = `${piece.length.toString(16)}\r\n`
      if (head !== null) this.heldHead = null
      client.cork()
      if (head !== null) client.write(this.headOnly(head))
      client.write(size, 'latin1')
      client.write(piece)
      const flowing = client.write('\r\n', 'latin1')
      client.uncork()
      return flowing
    }
    if (head === null) return client.write(piece)
    this.heldHead = null
    return this.writeAfter(head, piece)
  }

  // The response's body is complete: its last chunk and trailers, when lila frames it.
  // Returns the bytes that took.
  finish (trailers) {
    const head = this.heldHead
    const { client } = this
    this.heldHead = null
    if (this.framing !== CHUNKS) {
      if (head !== null) client.write(this.headOnly(head))
      return 0
    }
    const end = trailers === null ? LAST_CHUNK : `0\r\n${trailerLinesOf(trailers)}\r\n`
    if (head === null) {
      client.write(end, 'latin1')
      return end.length
    }
    client.cork()
    client.write(this.headOnly(head))
    client.write(end, 'latin1')
    client.uncork()
    return end.length
  }

  // A 101's head, as the backend's (with `cookie`).
  tunnelHead (x, res, cookie) {
    responseFields(res, false, this.listener.protocol.rewrite.response, x, cookie, FIELDS)
    const bytes = responseHead(res, FIELDS, UPGRADE)
    this.client.write(bytes)
    return bytes.length
  }

  // lila's own answer; returns its size. The connection stays when the request (and its
  // body) was read whole and it is not `closing`.
  // `more`: answerOf's { retryAfter, exhausted, fields, exact, page }.
  answer (x, status, detail, more, closing) {
    const { head } = x
    this.keepAlive = head.keepAlive && x.body.done && !closing
    const rules = this.listener.protocol.rewrite.response
    const options = { ...more, close: !this.keepAlive, head: head.method === 'HEAD', grpc: x.grpc, rules, ctx: x }
    const bytes = reply(status, detail, options)
    this.heldHead = null
    this.client.write(bytes)
    return bytes.length
  }

  // lila's answer to a request it cannot serve, the connection's last. Returns its size.
  refusal (status, detail, retryAfter, grpc, page) {
    const bytes = reply(status, detail, { close: true, retryAfter, grpc, page })
    this.client.write(bytes)
    return bytes.length
  }

  // The client asked for this response to be the connection's last (Connection: close,
  // or HTTP/1.0 without keep-alive) and sent its request whole, and in the clear the
  // kernel has all of the response: a client keeping to RFC 9112 9.6 sends nothing
  // more, so the session closes the connection now (with nothing unread), as nginx
  // does: the kernel sends the response, then FIN; no shutdown, no wait for the
  // client's FIN, no linger (bench/README.md, W2). TLS ends with its close_notify.
  lastAsked (x) {
    return !x.head.keepAlive && x.body.done && x.tunnel === null && !this.client.encrypted &&
      this.client.writableLength === 0
  }

  // The exchange is over: nothing of its response is left to write.
  done () {
    this.heldHead = null
  }

  // A head (its Buffer, from respond) and the bytes after it, in one system call. A
  // small piece is copied behind the head into one Buffer (the room respond left, when
  // the piece is the whole body): one plain write, cheaper in Node than a corked writev
  // of the two (a chunk array).
  writeAfter (head, piece) {
    const { client } = this
    const size = this.headSize
    if (piece.length === head.length - size) {
      piece.copy(head, size)
      return client.write(head)
    }
    if (piece.length > JOIN_LIMIT) {
      client.cork()
      client.write(this.headOnly(head))
      const flowing = client.write(piece)
      client.uncork()
      return flowing
    }
    const bytes = Buffer.allocUnsafe(size + piece.length)
    head.copy(bytes, 0, 0, size)
    piece.copy(bytes, size)
    return client.write(bytes)
  }
}

// Trailer fields as they go on (message/rewrite.js), as HTTP/1.1 lines.
function trailerLinesOf (fields) {
  trailerFields(fields, FIELDS)
  return trailerLines(FIELDS)
}

module.exports = { ResponseWriter }
