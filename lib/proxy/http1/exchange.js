'use strict'

const { performance } = require('perf_hooks')
const { reasonOf, isLocalShortage } = require('../../errors')
const { view } = require('./parse')
const { requestHead } = require('./rewrite')
const { reply, CONTINUE } = require('./replies')
const { RequestBody, BUFFER_FIRST } = require('./request-body')
const { Response } = require('./response')
const { Tunnel } = require('./tunnel')
const { Attempt } = require('../../upstream/attempt')
const { injectFault } = require('../injected')
const { requestRecord } = require('../request-record')
const { backendReason } = require('../../upstream/dial')
const { requestIdOf } = require('../request-id')
const { callType, deadlineFor } = require('../grpc')

// The access log's status when the client went away before any of its response
// (nginx's "client closed request").
const CLIENT_CLOSED = 499

// One request and its response: pick a backend, take a pooled connection, send the
// rewritten head and stream the body, stream the response back. A failure before the
// backend answered is retried where that is safe (see upstreamFailed) on a fresh connection
// or another backend; otherwise answered 502/503/504. After the response started, a
// failure cuts the client's connection: a truncated response must not look complete.
//
// The coordinator: the request body is read by a RequestBody (request-body.js), the
// response by a Response (response.js), a 101's raw bytes pass through a Tunnel
// (tunnel.js); the client's connection is its HttpSession's (session.js), the backend's
// a pooled connection (connection-pool.js) whose socket events come here.
class Exchange {
  constructor (session, head, headBytes) {
    this.session = session
    this.listener = session.listener
    this.head = head
    this.clientAddress = session.clientAddress // ctx for ip-hash
    this.path = head.path // ctx for uri-hash
    this.stickTo = session.listener.protocol.sticky.keys(head) // ctx for --sticky (upstream.js)
    const { idHeader } = this.listener.protocol.rewrite
    this.requestId = idHeader === null ? null : requestIdOf(head, idHeader) // --request-id
    this.headBytes = headBytes
    this.grpc = callType(head, this.listener.protocol.grpc) // a gRPC call: its content-type
    this.deadline = null // the call's grpc-timeout (grpc.js Deadline), once started
    this.body = new RequestBody(head, this.grpc !== null)
    this.response = new Response(this, session, head)
    this.tunnel = null // a Tunnel, once the backend switched protocols
    this.reading = !this.body.done // the client's bytes are this exchange's (see wantsClientData)
    this.buffering = false // reading a small body before taking a backend (see start)
    this.continued = false // lila answered the client's Expect: 100-continue itself
    this.quietTicks = 0 // listener sweeps without a body byte from the client (--body-timeout)
    this.shadow = null // its copy for --mirror (proxy/mirror.js), or null

    // Where it goes.
    this.route = this.listener.routeFor(head) // null: no route matches (404)
    this.attempt = new Attempt((this.route || this.listener.own).upstream, this, this, { perRequest: true })
    this.sentAt = 0 // when the head went to the backend: latency for least-time
    this.lastStatus = 502 // what the last failure answers when no backend is left
    this.silentTicks = 0 // listener sweeps without a byte from the backend (--timeout)
    this.conn = null // the backend connection, once ready
    this.dialing = null // a backend connection being opened for it (see connect)
    this.upstreamHead = null

    // What the client got.
    this.responseStarted = false // some byte of the final response reached the client
    this.heldHead = null // the response head, until the body bytes read with it join it
    this.clientKeepAlive = false
    this.bytesOut = 0
    this.done = false
    this.replied = 0 // the status lila answered itself, if it did
    this.openedAt = performance.now() // for the request-time histogram and the access log
  }

  // Are the client's next bytes this exchange's (its request body, or a tunnel's), not
  // the session's (the next request)?
  get wantsClientData () {
    return this.reading
  }

  get bytesIn () {
    return this.headBytes + this.body.received
  }

  // A small body is read whole before a backend is taken, as nginx does: a client that
  // sends it slowly then holds nothing but its own connection, never a backend's. Only
  // one whose Content-Length says it is small: a chunked body may be a stream the
  // client interleaves with the response, which waiting for its end would deadlock, and
  // a larger one streams to the backend as it comes. A client that waits for 100
  // Continue before sending gets it from lila.
  start () {
    const { head, body } = this
    const refused = this.listener.protocol.refusal(this)
    if (refused !== null) return this.answer(...refused)
    this.deadline = deadlineFor(this)
    if (this.listener.mirror !== null) this.shadow = this.listener.mirror.start(head, this, body.done)
    if (body.done || head.asksUpgrade || !body.fitsIn(BUFFER_FIRST)) return this.attempt.start()
    this.buffering = true
    if (head.expect === '100-continue' && head.version === 1) {
      this.continued = true
      this.sendHead(CONTINUE)
    }
  }

  // The body is read, or more of it than is worth holding: now a backend.
  bodyBuffered () {
    this.buffering = false
    this.attempt.start()
  }

  // The attempt (lib/upstream/attempt.js) decides where the request goes, how often it
  // is tried and whom a failure blames; the exchange connects, and says what failed.

  // Nothing could take the request: 503 if nothing was tried, else the failure seen.
  unserved (queueReason, exhausted) {
    const { attempt } = this
    if (attempt.attempts === 0) {
      this.listener.countUnserved()
      const detail = queueReason === null ? 'no backend available' : `no backend available (${queueReason})`
      return this.answer(503, detail, { retryAfter: 5, exhausted })
    }
    this.answer(this.lastStatus, attempt.failure)
  }

  // A slot on a backend: take a connection to it. A retry reads a new response.
  seated (lease) {
    this.upstreamHead = null
    if (this.attempt.attempts > 1) this.response = new Response(this, this.session, this.head)
    this.connect(this.listener.protocol.poolFor(lease.backend))
  }

  // A fault injected on the backend seated (attempt.js): lila answers `status` as that
  // backend's answer (which the attempt judges, and may retry elsewhere), or resets the
  // client's connection.
  injected (fault) {
    injectFault(this, fault, () => {
      this.session.reset()
      this.finish(false)
    })
  }

  // A connection from `pool`: one idle is ready at once (onUpstreamConnect); a new one
  // is kept in `dialing` until then, so that a request given up meanwhile closes it
  // rather than have it sent later for nobody.
  connect (pool, options) {
    const conn = pool.acquire(this, options)
    if (this.conn !== conn) this.dialing = conn
  }

  // The backend connection failed: `cause` says how (see Backend.failed); 'connect'
  // means before the request went out. Before any response byte, the attempt retries
  // where safe; after the response started, the client is cut so that it cannot
  // mistake the rest for complete.
  upstreamFailed (reason, cause, conn = this.conn) {
    if (this.done) return
    const { attempt } = this
    const backend = attempt.backend
    const status = cause === 'timeout' ? 504 : 502
    if (conn !== null) conn.destroy()
    this.conn = null
    this.dialing = null
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
    // Safe to send again: nothing of the response came back, and the body allows it
    // (request-body.js: all of it held; not sent at all ('connect'), or idempotent, or
    // none of it sent yet).
    const replayable = !this.response.gotBytes && (cause === 'connect' ? this.body.kept : this.body.canReplay())
    // A pooled connection the backend had closed (the keep-alive race): once more on a
    // fresh connection to the same backend.
    if (conn !== null && conn.reused && cause !== 'timeout' && replayable && attempt.retryFresh()) {
      log.debug(`${backend.address}: reused connection ${reason}; retrying on a fresh one`)
      return this.connect(conn.pool, { fresh: true })
    }
    this.lastStatus = status
    const sent = cause !== 'connect'
    const retried = attempt.failed(reason, { cause, sent, replayable, bytesIn: this.bytesIn })
    if (retried) log.debug(`${backend.address} ${reason}; retrying ${this.head.method} ${this.path} elsewhere`)
    else this.answer(status, attempt.failure)
  }

  // lila itself could not open a backend connection (out of descriptors): the backend
  // is not blamed, and another would fare no better: 503, to try again later.
  shortOf (conn, err) {
    conn.destroy()
    this.conn = null
    this.dialing = null
    this.attempt.shortage(this.bytesIn)
    this.listener.short(err, 'cannot open a backend connection')
    this.answer(503, `lila is short of resources (${reasonOf(err)})`, { retryAfter: 5, quiet: true })
  }

  // The request will not be sent: a connection being connected for it is dropped with
  // it, and its slot or place in the queue let go.
  abandonUpstream () {
    const conn = this.conn || this.dialing
    this.conn = null
    this.dialing = null
    if (conn !== null) conn.destroy()
    this.attempt.cancel()
  }

  releaseLease () {
    this.attempt.release(this.bytesIn, this.bytesOut)
  }

  // A connection to the backend is ready (pooled and idle, or newly connected).
  onUpstreamConnect (conn) {
    if (!conn.ready) return // its ready event comes later
    this.dialing = null
    this.conn = conn
    this.silentTicks = 0
    if (this.upstreamHead === null) {
      const { rewrite } = this.listener.protocol
      this.upstreamHead = requestHead(this.head, this, this.attempt.backend.hostHeader, rewrite,
        { continued: this.continued })
    }
    this.sentAt = performance.now()
    const socket = conn.socket
    const body = this.body
    const corked = body.heldBytes > 0 // the head and the body held so far in one system call
    if (corked) socket.cork()
    socket.write(this.upstreamHead, 'latin1')
    body.replay(socket)
    if (corked) socket.uncork()
    if (this.reading) this.session.resume()
  }

  // Bytes from the client while this exchange reads them: request body, or (tunnel)
  // anything.
  onClientData (buf, start) {
    if (this.tunnel !== null) return this.tunnel.toBackend(view(buf, start, buf.length))
    const body = this.body
    this.quietTicks = 0
    let end
    try {
      end = body.read(buf, start)
    } catch (err) {
      return this.clientBodyFailed(err.message)
    }
    if (body.done) this.reading = false
    if (end > start) this.sendBody(view(buf, start, end))
    if (body.done && this.shadow !== null) this.shadow.end()
    if (body.done) this.session.bodyDone(end < buf.length ? buf.subarray(end) : null)
  }

  sendBody (piece) {
    if (this.shadow !== null) this.shadow.body(piece)
    const holdingEnough = this.body.keep(piece)
    if (this.conn === null) {
      // Still reading a small body, or connecting: hold it, and stop reading once holding
      // enough.
      if (this.buffering && (this.body.done || holdingEnough)) this.bodyBuffered()
      if (holdingEnough) this.session.pause()
      return
    }
    this.body.sent()
    this.toUpstream(piece)
  }

  toUpstream (piece) {
    this.silentTicks = 0 // a backend still being sent the request is not silent
    if (!this.conn.socket.write(piece)) this.session.pause()
  }

  onUpstreamDrain () {
    if (this.reading) this.session.resume()
  }

  onClientDrain () {
    if (this.conn !== null) this.conn.socket.resume()
  }

  // The client's request body broke its chunked framing (400), or stopped coming (408).
  // The backend connection, if any, goes with it: it holds part of a request.
  clientBodyFailed (detail, status = 400) {
    this.reading = false
    this.buffering = false
    this.abandonUpstream()
    if (this.responseStarted) return this.session.destroy()
    this.releaseLease()
    this.replied = status
    this.session.refuse(status, detail, { grpc: this.grpc })
    this.finish(false)
  }

  // The client half-closed: in a tunnel, pass it on; in the middle of a request body,
  // the request can never be completed.
  onClientEnd () {
    if (this.tunnel !== null) this.tunnel.clientEnded()
    else if (this.reading) this.clientBodyFailed('connection closed in the middle of the request body')
  }

  awaitingBackend () {
    return this.tunnel === null && this.body.done && !this.responseStarted
  }

  // The listener's sweep: a backend silent for `silentLimit` sweeps (--timeout) timed
  // out. Not in a tunnel (idle both ways is --idle-timeout's), not while lila holds
  // the backend's socket paused for a client that does not read, and not while the
  // client is still sending its body on its own time: those silences are the client's,
  // left to --idle-timeout and --body-timeout. A client whose request body sends nothing
  // for `bodyLimit` sweeps (--body-timeout) is answered 408; not while lila holds it
  // paused (a backend slow to take the body, or none yet: then the backend's silence
  // counts).
  onSweep (silentLimit, bodyLimit) {
    if (this.reading && this.tunnel === null && !this.session.paused) {
      if (++this.quietTicks < bodyLimit) return
      return this.clientBodyFailed('request body timed out: no byte of it within --body-timeout', 408)
    }
    const conn = this.conn
    if (conn === null || this.tunnel !== null || conn.socket.isPaused()) return
    if (++this.silentTicks >= silentLimit) this.onUpstreamTimeout(conn)
  }

  // Does this exchange still hold bytes of the backend's last read (connection-pool.js
  // READ)? Its write to the client waits, or a response head is still arriving.
  holdsRead () {
    return this.session.client.writableLength !== 0 || this.response.partial !== null
  }

  onUpstreamData (conn, chunk) {
    this.session.touch()
    this.silentTicks = 0
    if (this.tunnel !== null) return this.toClient(chunk)
    this.response.read(chunk)
  }

  // The final response head is in (see Response); `buf` from `end` on is the start of
  // its body.
  startResponse (res, buf, end) {
    const { head, session, response, conn } = this
    // An answer the attempt retries elsewhere is dropped with its connection (its body
    // unread); the next backend's comes through seated().
    const how = { replayable: this.body.canRepeat(), bytesIn: this.bytesIn, latencyMs: performance.now() - this.sentAt }
    this.lastStatus = res.status // what the client gets if no other backend answers
    if (this.attempt.answered(res.status, how)) {
      if (this.conn === conn) this.conn = null
      conn.destroy()
      return
    }
    response.frame(res, this.conn, buf.length - end)
    if (this.shadow !== null) this.shadow.primaryStatus(res.status, res.chunked && !response.decode)
    // After a declined upgrade, what the client sent next may be meant as the new
    // protocol or as HTTP; rather than guess, the connection ends with this response.
    this.clientKeepAlive = head.keepAlive && !session.closing && !head.asksUpgrade &&
      !response.endsWithClose && this.body.done
    const text = this.listener.protocol.sticky.head(this, response.clientHead(this.clientKeepAlive))
    this.responseStarted = true
    if (response.bodyless) {
      this.sendHead(text)
      return this.responseDone()
    }
    // Head and the body bytes that came with it leave in one write (one syscall): the
    // head waits in `heldHead` for the first body piece (toClient).
    this.heldHead = text
    if (end < buf.length) response.forward(buf, end)
    if (this.heldHead !== null) {
      this.heldHead = null
      this.sendHead(text)
    }
  }

  sendHead (text) {
    this.bytesOut += text.length
    this.session.write(text, 'latin1')
  }

  toClient (piece) {
    this.bytesOut += piece.length
    if (this.shadow !== null) this.shadow.primaryBody(piece)
    const head = this.heldHead
    let flowing
    if (head === null) {
      flowing = this.session.write(piece)
    } else {
      this.heldHead = null
      this.bytesOut += head.length
      flowing = this.session.writeAfter(head, piece)
    }
    if (!flowing && this.conn !== null) this.conn.socket.pause()
  }

  responseDone () {
    const conn = this.conn
    this.conn = null
    if (this.response.reusable && this.body.done) conn.pool.release(conn)
    else conn.destroy()
    if (this.shadow !== null) this.shadow.primaryDone()
    this.releaseLease()
    this.finish(this.clientKeepAlive)
  }

  // A 101 (see Response): the connection becomes a Tunnel, reading the client's bytes.
  startTunnel (res, buf, end) {
    this.attempt.succeeded()
    this.tunnel = new Tunnel(this, this.session, this.conn)
    this.responseStarted = true
    this.reading = true
    this.tunnel.open(res, buf, end)
  }

  onUpstreamEnd (conn) {
    if (this.tunnel !== null) return this.tunnel.backendEnded()
    if (this.response.ended()) this.responseDone()
  }

  onUpstreamClose (conn) {
    if (this.conn !== conn) return
    if (this.tunnel !== null) {
      this.conn = null
      this.tunnel.backendClosed()
      this.releaseLease()
      return
    }
    const reason = this.response.gotBytes
      ? 'closed the connection mid-response'
      : 'closed the connection without answering'
    this.upstreamFailed(reason, 'closed')
  }

  onUpstreamError (conn, err) {
    if (this.conn !== null && this.conn !== conn) return
    if (this.tunnel !== null) return this.session.destroy()
    if (isLocalShortage(err) && !this.responseStarted) return this.shortOf(conn, err)
    this.upstreamFailed(backendReason(err, conn.pool.tls), conn.ready ? 'reset' : 'connect', conn)
  }

  onUpstreamTimeout (conn) {
    if (!conn.ready) return this.upstreamFailed('connect timed out', 'connect', conn)
    this.upstreamFailed('timed out', 'timeout')
  }

  // lila answers the request itself (error statuses).
  answer (status, detail, { retryAfter = 0, quiet = false, exhausted = false } = {}) {
    const { session, head } = this
    if (status >= 500 && !quiet) {
      this.listener.log.warn(`${status} for ${head.method} ${this.path} from ${this.clientAddress}: ${detail}`)
    }
    const keepAlive = head.keepAlive && this.body.done && !session.closing
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

  // The client went away: drop the backend connection (its response would have
  // nowhere to go) and release the count.
  onClientClose () {
    if (this.done) return
    this.abandonUpstream()
    this.releaseLease()
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    this.logged()
  }

  finish (keepAlive) {
    if (this.done) return
    this.done = true
    if (this.deadline !== null) this.deadline.clear()
    this.logged()
    this.session.exchangeDone(keepAlive)
  }

  // Once per exchange: counted (response-stats.js), and written to the access log.
  logged () {
    const { accessLog, protocol } = this.listener
    const ms = performance.now() - this.openedAt
    const answered = this.response.head !== null || this.tunnel !== null // by a backend, not lila
    protocol.stats.count(this.status, answered ? this.attempt.backend : null, ms)
    if (accessLog !== null) accessLog.log(requestRecord(this, ms))
  }

  // The status the client was answered: the backend's, lila's own, 101 for a tunnel,
  // or 499 when the client left before any of its response.
  get status () {
    if (this.response.head !== null) return this.response.head.status
    if (this.tunnel !== null) return 101
    return this.replied || CLIENT_CLOSED
  }
}

module.exports = { Exchange }
