'use strict'

const { HeadReader, NOT_HTTP } = require('./head-reader')
const { MAX_HEAD } = require('../message/grammar')
const { NO_BODY } = require('./body-reader')
const { readsAfter } = require('./client-reads')
const { matchPreface, HTTP2, MAYBE } = require('../../wire/h2/preface')

const HEADS = new HeadReader() // one for every connection: a head is read at once

// The requests an HTTP/1.1 client connection sends, read one at a time: each head
// found in what arrived (head-reader.js, within --header-timeout), each body through
// its framing (body-reader.js), each request handed to an exchange the protocol makes
// (newExchange: http/exchange.js). What the last request leaves serves the next: its
// head's form to parse into, its exchange made new. Pipelined requests wait, unread
// past one head's worth, until the response before them is done.
//
// HttpSession (session.js) extends it, as a connection holds one object, not two
// (memory per idle client): the session writes the responses and decides what the
// connection does between requests (keep-alive, drain, shut); this side reads its
// closing, draining and clientAddress and calls its refuse, shut, toHttp2 and
// lastRequest. Each writes only its own fields: the session changes these through
// methods of this class (clearHeadTimer, dropUnread, endRequest, keepForNext, ...).
class RequestReader {
  constructor (listener, client) {
    this.listener = listener
    this.client = client
    this.buf = null // received, not yet consumed: a partial head or pipelined requests
    this.scanned = 0 // bytes of buf already searched for the end of a head (HEADS)
    this.exchange = null // the request being served
    this.spare = null // the last exchange, over and reusable: the next request's (keepForNext)
    this.headForm = null // the last request's head, read by nothing now: the next is parsed into it
    this.headTimer = null
    this.clientEnded = false
    this.bodyReader = NO_BODY // the body being read: one made for the first request with one
    // The first bytes may be the HTTP/2 preface (prior knowledge; over TLS, HTTP/2 is
    // agreed by ALPN only): until the first request.
    this.mayBeHttp2 = listener.protocol.startHttp2 !== undefined && !client.encrypted
  }

  // Bytes from the client (the session's onData): a tunnel's, the body's, or heads.
  read (chunk) {
    const x = this.exchange
    if (x !== null) {
      if (x.tunnel !== null) return x.tunnel.toBackend(chunk)
      if (this.bodyReader.active) return this.readBody(chunk, 0)
    }
    this.buf = this.buf === null ? chunk : Buffer.concat([this.buf, chunk])
    if (x === null) this.nextRequest()
    else if (this.buf.length > MAX_HEAD) this.client.pause() // pipelined: wait for the response
  }

  // Serve the requests at the front of `buf` while their heads are all there (one at a
  // time: the next waits for the response before it).
  nextRequest () {
    while (this.buf !== null && this.exchange === null && !this.closing) {
      let buf = this.buf
      if (this.mayBeHttp2 && buf[0] === 0x50) { // "P"
        const preface = matchPreface(buf)
        if (preface === HTTP2) return this.toHttp2(buf)
        if (preface === MAYBE) return this.waitForHead()
      }
      const head = HEADS.read(buf, this.scanned, this.clientEnded, this.mayBeHttp2, this.headForm)
      const { start, end, status, detail } = HEADS
      this.scanned = HEADS.scanned
      if (head === null) {
        if (status === NOT_HTTP) return this.notHttp()
        if (status !== 0) return this.refuse(status, detail)
        if (start === buf.length) {
          this.buf = null
          break
        }
        if (start > 0) this.buf = buf.subarray(start)
        return this.waitForHead()
      }
      this.clearHeadTimer()
      this.buf = this.headForm = null
      this.mayBeHttp2 = false
      if (this.draining) this.lastRequest()
      const x = this.listener.protocol.newExchange(this, head, end - start, null, this.spare)
      this.spare = null
      this.exchange = x
      readsAfter(this, head) // a long body, or a connection kept alive: into lila's buffers
      if (head.bodyLength !== 0) (this.bodyReader = this.bodyReader.own()).start(x) // a length, or chunked (-1)
      x.start()
      if (end < buf.length) {
        buf = buf.subarray(end)
        if (this.exchange === x && this.bodyReader.active) this.readBody(buf, 0)
        else this.unread(buf)
      }
      // The client already half-closed: a body not complete by now never will be.
      if (this.clientEnded && this.exchange === x) this.onEnd()
    }
    if (this.buf === null && this.exchange === null && this.clientEnded) this.shut()
  }

  // Body bytes from buf[start] for the exchange (body-reader.js); what follows its end
  // is the next request's.
  readBody (buf, start) {
    const x = this.exchange
    const reader = this.bodyReader
    const end = reader.read(x, buf, start)
    if (end === -1 || this.exchange !== x) return
    const { trailers } = reader
    reader.stop()
    if (end < buf.length) this.unread(buf.subarray(end))
    x.onBodyEnd(trailers)
  }

  // A head (or the HTTP/2 preface) has started to arrive: it has --header-timeout.
  waitForHead () {
    if (this.headTimer === null) {
      this.headTimer = setTimeout(() => this.onHeadTimeout(), this.listener.config.headerTimeout)
    }
  }

  onHeadTimeout () {
    this.headTimer = null
    if (this.exchange === null) this.refuse(408, 'request head not received in time')
  }

  // No head is waited for any more (one came, or none will).
  clearHeadTimer () {
    if (this.headTimer === null) return
    clearTimeout(this.headTimer)
    this.headTimer = null
  }

  // Bytes taken off the front of the stream but not consumed go back in front of
  // what arrived since.
  unread (bytes) {
    this.buf = this.buf === null ? bytes : Buffer.concat([bytes, this.buf])
  }

  // The bytes read past the request head that no exchange took yet: for a tunnel
  // (tunnel.js), the client's first bytes in the new protocol.
  takeBuffered () {
    const buf = this.buf
    this.buf = null
    return buf
  }

  // Nothing more is read: what is unread goes (a refused request, a handed-over connection).
  dropUnread () {
    this.buf = null
  }

  // The connection's first line is no HTTP/1.x request line (one ends in HTTP/x.y), and
  // its client may have meant HTTP/2 by prior knowledge: an invalid connection preface,
  // a connection error (RFC 9113 3.4) that has the connection closed, not answered in a
  // protocol the client may not speak.
  notHttp () {
    this.listener.log.debug(`client ${this.clientAddress}: neither HTTP/1.x nor the HTTP/2 preface; closed`)
    this.buf = null
    this.shut()
  }

  // The request's body broke its framing (400), or stopped coming (408): answered, and
  // the connection closed (the rest of the body cannot be told from the next request).
  refuseBody (x, status, detail) {
    this.bodyReader.stop()
    return this.refuse(status, detail, { grpc: x.grpc, page: x.errorPage(status) })
  }

  // The client half-closed: in a tunnel, that passes on; in the middle of a request
  // body, the request can never be completed.
  onEnd () {
    this.clientEnded = true
    const x = this.exchange
    if (x === null) return this.shut()
    if (x.tunnel !== null) x.tunnel.clientEnded()
    else if (this.bodyReader.active) x.clientBodyFailed('connection closed in the middle of the request body')
  }

  // Exchange `x` is over (`ok`: its response is complete, or lila answered). Its head is
  // the next one's form unless a copy for --mirror or a --otlp span may read it later.
  // Returns whether its body was still being read: it never will be now.
  endRequest (x, ok) {
    this.exchange = null
    if (ok && x.shadow === null && x.trace === null) this.headForm = x.head
    const reading = this.bodyReader.active
    this.bodyReader.stop()
    return reading
  }

  // `x`, over, made new serves the next request read from now on (not one read before:
  // its callers are still on the stack).
  keepForNext (x) {
    if (x.reusable) this.spare = x.shelve()
  }

  // The connection went quiet: the last request's exchange and head form go (memory per
  // idle client).
  wentQuiet () {
    this.spare = this.headForm = null
  }

  // The connection closed: no head is waited for, and no exchange kept. Returns the
  // exchange being served, or null.
  letGo () {
    this.clearHeadTimer()
    const x = this.exchange
    this.exchange = this.spare = null
    return x
  }
}

module.exports = { RequestReader }
