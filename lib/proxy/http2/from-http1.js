'use strict'

const { STATUS_CODES } = require('http')
const { performance } = require('perf_hooks')
const { reasonOf } = require('../../errors')
const { HOP_BY_HOP } = require('../http1/rewrite')
const { reply, CONTINUE } = require('../http1/replies')
const { ChunkedReader } = require('../http1/chunked')
const { trimOws } = require('../http1/parse')
const { Attempt } = require('../../upstream/attempt')
const { injectFault } = require('../injected')
const { requestRecord } = require('../request-record')
const { StreamBody } = require('./request-body')
const { BUFFER_FIRST } = require('../http1/request-body')
const { Http2Leg } = require('./to-http2')
const { requestIdOf } = require('../request-id')
const { callType, deadlineFor } = require('../grpc')

const CLIENT_CLOSED = 499
const CRLF = '\r\n'
// Fields an HTTP/1.1 response gets from lila's framing, never from the backend's.
const FRAMING = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive'])
const NOT_TRAILERS = new Set(['content-length', 'host', 'trailer', 'te', 'transfer-encoding'])

// An HTTP/1.1 request to an HTTP/2 backend (--backend-protocol h2): what
// http1/exchange.js is for HTTP/1.1 backends, for an HttpSession (http1/session.js),
// whose interface it serves the same way (onClientData, onClientEnd, onClientClose,
// onClientDrain, onSweep, awaitingBackend). The client's body is read through its
// framing (Content-Length, or chunked: decoded, its trailers kept) into DATA; the
// backend side is an Http2Leg (to-http2.js) on a pooled session, balanced, retried and
// judged through an Attempt as any request; the backend's HTTP/2 response is written as
// an HTTP/1.1 one: a reason phrase, its Content-Length when it said one, else chunked
// (trailers included) for HTTP/1.1 clients and until the close for HTTP/1.0 ones.
// An upgrade (WebSocket) cannot be carried over HTTP/2 and is answered 502.
class Http1ToHttp2 {
  constructor (session, head, headBytes) {
    this.session = session
    this.listener = session.listener
    this.head = head
    this.clientAddress = session.clientAddress
    this.path = head.path
    this.stickTo = session.listener.protocol.sticky.keys(head) // ctx for --sticky (upstream.js)
    const { idHeader } = this.listener.protocol.rewrite
    this.requestId = idHeader === null ? null : requestIdOf(head, idHeader) // --request-id
    this.headBytes = headBytes
    this.grpc = callType(head, this.listener.protocol.grpc) // a gRPC call: its content-type
    this.deadline = null // the call's grpc-timeout (grpc.js Deadline), once started
    const endStream = !head.chunked && head.bodyLength === 0
    const bodyHead = { method: head.method, contentLength: head.chunked ? -1 : head.bodyLength, endStream }
    this.body = new StreamBody(bodyHead, this.grpc !== null)
    this.chunkedIn = head.chunked ? new ChunkedReader(400, { keepTrailers: true }) : null
    this.left = head.chunked ? 0 : head.bodyLength
    this.clientTrailers = null
    this.reading = !endStream
    this.buffering = false // reading a small body before taking a backend (see start)
    this.continued = false // lila answered the client's Expect: 100-continue itself
    this.quietTicks = 0 // listener sweeps without a body byte from the client (--body-timeout)
    this.sendData = (b, s, e) => this.bodyData(b.subarray(s, e))
    this.shadow = null // its copy for --mirror (proxy/mirror.js), or null

    this.route = this.listener.routeFor(head) // null: no route matches (404)
    this.attempt = new Attempt((this.route || this.listener.own).upstream, this, this, { perRequest: true })
    this.leg = null
    this.lastStatus = 502

    this.responseStarted = false
    this.responseStatus = 0
    this.backendAnswered = false
    this.chunkedOut = false // the response goes chunked to the client
    this.clientKeepAlive = false
    this.bytesOut = 0
    this.done = false
    this.replied = 0
    this.openedAt = performance.now()
  }

  get wantsClientData () {
    return this.reading
  }

  get bytesIn () {
    return this.headBytes + this.body.received
  }

  start () {
    const { head } = this
    const refused = this.listener.protocol.refusal(this)
    if (refused !== null) return this.answer(...refused)
    if (head.isUpgrade) return this.answer(502, `an upgrade to ${head.upgrade} cannot be carried to an HTTP/2 backend`)
    this.deadline = deadlineFor(this)
    if (this.listener.mirror !== null) this.shadow = this.listener.mirror.start(head, this, !this.reading)
    // A small body is read whole first, as for HTTP/1.1 backends (http1/exchange.js
    // start): a client that sends it slowly holds no backend meanwhile. Only with a
    // Content-Length: a chunked body may be a stream answered as it goes.
    if (!this.reading || head.chunked || head.bodyLength > BUFFER_FIRST) return this.attempt.start()
    this.buffering = true
    if (head.expect === '100-continue' && head.version === 1) {
      this.continued = true // the backend is not sent the Expect (headers.js)
      this.session.write(CONTINUE, 'latin1')
    }
  }

  // The body is read, or more of it than is worth holding: now a backend.
  bodyBuffered () {
    this.buffering = false
    this.attempt.start()
  }

  // The attempt's owner (upstream/attempt.js).

  unserved (queueReason, exhausted) {
    const { attempt } = this
    if (attempt.attempts === 0) {
      this.listener.countUnserved()
      const detail = queueReason === null ? 'no backend available' : `no backend available (${queueReason})`
      return this.answer(503, detail, { retryAfter: 5, exhausted })
    }
    this.answer(this.lastStatus, attempt.failure)
  }

  seated (lease) {
    this.leg = new Http2Leg(this, lease.backend)
    this.leg.start()
  }

  // A fault injected on the backend seated (attempt.js), as Exchange.
  injected (fault) {
    injectFault(this, fault, () => {
      this.session.reset()
      this.finish(false)
    })
  }

  // The leg's owner (to-http2.js), as StreamExchange.

  upstreamFailed (reason, cause, { reused = false } = {}) {
    if (this.done) return
    const { attempt } = this
    const leg = this.leg
    this.leg = null
    leg.abandon()
    const backend = attempt.backend
    const status = cause === 'timeout' ? 504 : 502
    const { log } = this.listener
    if (this.responseStarted) {
      const request = `${this.head.method} ${this.path} from ${this.clientAddress}`
      log.warn(`${request}: backend ${backend.address} ${reason}; response cut`)
      attempt.blame(reason, cause)
      this.releaseLease()
      this.session.destroy()
      this.finish(false)
      return
    }
    const replayable = !leg.gotBytes && (cause === 'connect' ? this.body.kept : this.body.canReplay())
    if (reused && cause !== 'timeout' && replayable && attempt.retryFresh()) {
      log.debug(`${backend.address}: ${reason}; retrying on a fresh session`)
      this.leg = leg.again()
      return this.leg.start()
    }
    this.lastStatus = status
    const sent = cause !== 'connect'
    const retried = attempt.failed(reason, { cause, sent, replayable, bytesIn: this.bytesIn })
    if (retried) log.debug(`${backend.address} ${reason}; retrying ${this.head.method} ${this.path} elsewhere`)
    else this.answer(status, attempt.failure)
  }

  shortOf (err) {
    this.leg = null
    this.attempt.shortage(this.bytesIn)
    this.listener.short(err, 'cannot open a backend connection')
    this.answer(503, `lila is short of resources (${reasonOf(err)})`, { retryAfter: 5, quiet: true })
  }

  abandonUpstream () {
    const leg = this.leg
    this.leg = null
    if (leg !== null) leg.abandon()
    this.attempt.cancel()
  }

  releaseLease () {
    this.attempt.release(this.bytesIn, this.bytesOut)
  }

  legConnected () {
    this.body.sent()
    if (this.reading) this.session.resume()
  }

  legDrained () {
    if (this.reading) this.session.resume()
  }

  // The request body, through its HTTP/1.1 framing.

  onClientData (buf, start) {
    this.quietTicks = 0
    let end = buf.length
    let ended
    try {
      if (this.chunkedIn !== null) {
        const bodyEnd = this.chunkedIn.read(buf, start, end, this.sendData)
        ended = bodyEnd !== -1
        if (ended) end = bodyEnd
      } else {
        if (end - start > this.left) end = start + this.left
        this.left -= end - start
        if (end > start) this.bodyData(buf.subarray(start, end))
        ended = this.left === 0
      }
    } catch (err) {
      if (err.status === undefined) throw err
      return this.clientBodyFailed(err.message)
    }
    if (this.shadow !== null && end > start) this.shadow.body(buf.subarray(start, end)) // framed as it came
    if (this.done || !ended) return
    this.endBody()
    this.session.bodyDone(end < buf.length ? buf.subarray(end) : null)
  }

  bodyData (piece) {
    if (this.done) return
    const holdingEnough = this.body.add(piece)
    const { leg } = this
    if (leg === null || !leg.connected) {
      // Still reading a small body, connecting or queued: held, and the client paused
      // once holding enough.
      if (holdingEnough) this.session.pause()
      return
    }
    this.body.sent()
    if (!leg.write(piece)) this.session.pause()
  }

  endBody () {
    this.reading = false
    this.body.end()
    if (this.shadow !== null) this.shadow.end()
    if (this.chunkedIn !== null) this.clientTrailers = trailerList(this.chunkedIn.trailers)
    if (this.buffering) return this.bodyBuffered() // the leg ends it once connected
    const { leg } = this
    if (leg !== null && leg.connected) leg.end()
  }

  // The client's body broke its framing (400), or stopped coming (408). Its backend
  // stream, if any, is reset: it holds part of a request.
  clientBodyFailed (detail, status = 400) {
    this.reading = false
    this.buffering = false
    this.abandonUpstream()
    if (this.responseStarted) {
      this.releaseLease()
      this.session.destroy()
      return this.finish(false)
    }
    this.releaseLease()
    this.replied = status
    this.session.refuse(status, detail, { grpc: this.grpc })
    this.finish(false)
  }

  onClientEnd () {
    if (this.reading) this.clientBodyFailed('connection closed in the middle of the request body')
  }

  onClientDrain () {
    if (this.leg !== null) this.leg.resume()
  }

  onClientClose () {
    if (this.done) return
    this.abandonUpstream()
    this.releaseLease()
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    this.logged()
  }

  awaitingBackend () {
    return !this.reading && !this.responseStarted
  }

  // The listener's sweep: the backend silent for --timeout (the leg's), or a request
  // body that sent nothing for --body-timeout (not while lila holds the client paused):
  // 408, as http1/exchange.js.
  onSweep (silentLimit, bodyLimit) {
    if (this.reading && !this.session.paused) {
      // A client still sending its body on its own time: its silence, not the backend's.
      if (++this.quietTicks < bodyLimit) return
      return this.clientBodyFailed('request body timed out: no byte of it within --body-timeout', 408)
    }
    if (this.leg !== null) this.leg.onSweep(silentLimit)
  }

  // The response, as HTTP/1.1.

  interim (headers) {
    if (this.head.version !== 1 || this.done) return
    const status = headers[':status']
    this.session.write(`HTTP/1.1 ${status} ${STATUS_CODES[status] || ''}\r\n${fieldLines(headers, null)}\r\n`, 'latin1')
  }

  answered (status, latencyMs) {
    const leg = this.leg
    const how = { replayable: this.body.canRepeat(), bytesIn: this.bytesIn, latencyMs }
    this.lastStatus = status
    if (!this.attempt.answered(status, how)) return false
    leg.abandon()
    return true
  }

  respond (headers, { bodyless }) {
    const { head, session } = this
    this.listener.protocol.sticky.headers(this, headers) // --sticky's Set-Cookie
    const status = headers[':status']
    const length = headers['content-length']
    const noBody = head.method === 'HEAD' || status === 204 || status === 304
    let framing = ''
    let closeDelimited = false
    if (noBody) {
      if (length !== undefined) framing = `Content-Length: ${length}\r\n`
    } else if (bodyless) {
      framing = 'Content-Length: 0\r\n'
    } else if (length !== undefined) {
      framing = `Content-Length: ${length}\r\n`
    } else if (head.version === 1) {
      this.chunkedOut = true
      framing = 'Transfer-Encoding: chunked\r\n'
    } else {
      closeDelimited = true
    }
    this.clientKeepAlive = head.keepAlive && !session.closing && !this.reading && !closeDelimited
    if (!this.clientKeepAlive) framing += 'Connection: close\r\n'
    else if (head.version === 0) framing += 'Connection: keep-alive\r\n'
    const fields = fieldLines(headers, this.chunkedOut ? null : 'trailer')
    const text = `HTTP/1.1 ${status} ${STATUS_CODES[status] || ''}\r\n${fields}${framing}\r\n`
    this.responseStarted = true
    this.backendAnswered = true
    this.responseStatus = status
    if (this.shadow !== null) this.shadow.primaryStatus(status)
    this.bytesOut += text.length
    session.write(text, 'latin1')
    return true
  }

  toClient (piece) {
    if (this.done) return
    this.bytesOut += piece.length
    if (this.shadow !== null) this.shadow.primaryBody(piece)
    const { session } = this
    let flowing
    if (this.chunkedOut) {
      session.cork()
      session.write(`${piece.length.toString(16)}\r\n`, 'latin1')
      session.write(piece)
      flowing = session.write(CRLF, 'latin1')
      session.uncork()
    } else {
      flowing = session.write(piece)
    }
    if (!flowing && this.leg !== null) this.leg.pause()
  }

  responseDone (trailers) {
    this.leg = null
    if (this.shadow !== null) this.shadow.primaryDone()
    if (this.chunkedOut) {
      let out = '0\r\n'
      if (trailers !== null) out += fieldLines(trailers, null)
      this.session.write(`${out}\r\n`, 'latin1')
    }
    this.releaseLease()
    this.finish(this.clientKeepAlive)
  }

  answer (status, detail, { retryAfter = 0, quiet = false, exhausted = false } = {}) {
    const { session, head } = this
    if (status >= 500 && !quiet) {
      this.listener.log.warn(`${status} for ${head.method} ${this.path} from ${this.clientAddress}: ${detail}`)
    }
    const keepAlive = head.keepAlive && !this.reading && !session.closing
    const rules = this.listener.protocol.rewrite.response
    const options = {
      close: !keepAlive, retryAfter, head: head.method === 'HEAD', grpc: this.grpc, exhausted, rules, ctx: this
    }
    const bytes = reply(status, detail, options)
    this.bytesOut += bytes.length
    this.responseStarted = true
    this.replied = status
    session.write(bytes)
    this.finish(keepAlive)
  }

  finish (keepAlive) {
    if (this.done) return
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    this.logged()
    this.session.exchangeDone(keepAlive)
  }

  logged () {
    const { accessLog, protocol } = this.listener
    const ms = performance.now() - this.openedAt
    protocol.stats.count(this.status, this.backendAnswered ? this.attempt.backend : null, ms)
    if (accessLog !== null) accessLog.log(requestRecord(this, ms))
  }

  get status () {
    if (this.backendAnswered) return this.responseStatus
    return this.replied || CLIENT_CLOSED
  }
}

// An HTTP/2 header object's fields as HTTP/1.1 lines (pseudo-headers, framing and
// hop-by-hop fields left out; `also` one more name to leave out).
function fieldLines (headers, also) {
  let out = ''
  for (const name of Object.keys(headers)) {
    if (name.charCodeAt(0) === 58 || FRAMING.has(name) || HOP_BY_HOP.has(name) || name === also) continue
    const value = headers[name]
    if (Array.isArray(value)) for (const v of value) out += `${name}: ${v}\r\n`
    else out += `${name}: ${value}\r\n`
  }
  return out
}

// A chunked body's trailer section ("Name: value\r\n" lines, as ChunkedReader kept it)
// as [name, value, ...] for HTTP/2 trailers; null when there are none.
function trailerList (text) {
  if (text === null || text === '') return null
  const out = []
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const name = line.slice(0, colon).toLowerCase()
    if (NOT_TRAILERS.has(name) || HOP_BY_HOP.has(name)) continue
    out.push(name, trimOws(line, colon + 1))
  }
  return out.length === 0 ? null : out
}

module.exports = { Http1ToHttp2 }
