'use strict'

const { performance } = require('perf_hooks')
const { reasonOf, isLocalShortage, HttpError } = require('../../errors')
const { findHeadEnd, parseResponseHead, parseKeepAlive, MAX_HEAD } = require('./parse')
const { ChunkedReader } = require('./chunked')
const { requestHead, responseHead, interimHead, viaLoops } = require('./rewrite')
const { idleFromHint } = require('./connection-pool')
const { reply } = require('./replies')
const { Attempt } = require('../../upstream/attempt')

// RFC 9110 9.2.2: a request with one of these methods may be sent again.
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'])
// Request body bytes kept for a replay on another connection. Past this, the request
// can no longer be replayed and what was sent is let go.
const REPLAY_LIMIT = 64 * 1024

// buf[start, end), without a new view when that is all of it.
function view (buf, start, end) {
  return start === 0 && end === buf.length ? buf : buf.subarray(start, end)
}

// One request and its response: pick a backend, take a pooled connection, send the
// rewritten head and stream the body, stream the response back. A failure before the
// backend answered is retried where that is safe (see canReplay) on a fresh connection
// or another backend; otherwise answered 502/503/504. After the response started, a
// failure cuts the client's connection: a truncated response must not look complete.
class Exchange {
  constructor (session, head, headBytes) {
    this.session = session
    this.listener = session.listener
    this.head = head
    this.clientAddress = session.clientAddress // ctx for ip-hash
    this.path = head.path // ctx for uri-hash

    // The request body, as framed by the client.
    this.chunked = head.chunked ? new ChunkedReader(400) : null
    this.bodyLeft = head.bodyLength // bytes still to come, for a Content-Length body
    this.requestDone = !head.chunked && head.bodyLength === 0
    this.wantsClientData = !this.requestDone
    this.body = [] // body chunks received: sent, or waiting for a connection; null once past REPLAY_LIMIT
    this.bodyBytes = 0
    this.bodyStarted = false // some body byte was written to a backend
    this.bytesIn = headBytes

    // Where it goes.
    this.attempt = new Attempt(this.listener.upstream, this, this, this.listener.config.retries)
    this.sentAt = 0 // when the head went to the backend: latency for least-time
    this.lastStatus = 502 // what the last failure answers if nothing else will
    this.silentTicks = 0 // listener sweeps without a byte from the backend (--timeout)
    this.conn = null
    this.upstreamHead = null

    // The response.
    this.resBuf = null // a response head still arriving
    this.res = null // the final response head, once parsed
    this.resReader = null // ChunkedReader for a chunked response
    this.resLeft = 0 // bytes still to come, for a Content-Length response
    this.resUntilClose = false
    this.decode = false // strip chunked framing: an HTTP/1.0 client
    this.sendDecoded = null // then, the ChunkedReader's onData: the data to the client
    this.gotResponseBytes = false
    this.responseStarted = false // some byte of the final response reached the client
    this.clientKeepAlive = false
    this.reusable = true // the backend connection can serve another request afterwards
    this.bytesOut = 0
    this.tunnel = false
    this.done = false
    this.replied = 0 // the status lila answered itself, if it did
    this.openedAt = this.listener.accessLog === null ? 0 : performance.now() // for the access log only
  }

  start () {
    const { head, listener } = this
    if (viaLoops(head, listener.via)) return this.answer(508, `request already passed through this lila (Via: ${listener.via})`)
    this.attempt.start()
  }

  // Nothing could take the request (attempt.js): 503 if nothing was tried, else the
  // failure seen.
  unserved (queueReason) {
    const { attempt } = this
    if (attempt.attempts === 0) {
      this.listener.unserved++
      const detail = queueReason === null ? 'no backend available' : `no backend available (${queueReason})`
      return this.answer(503, detail, { retryAfter: 5 })
    }
    this.answer(this.lastStatus, `backend ${attempt.lastBackend} ${attempt.lastReason}`)
  }

  // A slot on a backend (attempt.js): take a connection to it.
  seated (lease) {
    this.upstreamHead = null
    this.listener.poolFor(lease.backend).acquire(this)
  }

  // A connection to the backend is ready (pooled and idle, or newly connected).
  onUpstreamConnect (conn) {
    if (!conn.ready) return // its ready event comes later
    this.conn = conn
    this.silentTicks = 0
    if (this.upstreamHead === null) {
      this.upstreamHead = requestHead(this.head, this.clientAddress, this.attempt.backend.address, this.listener.rewrite)
    }
    this.sentAt = performance.now()
    const socket = conn.socket
    socket.cork()
    socket.write(this.upstreamHead, 'latin1')
    if (this.body !== null) {
      for (const chunk of this.body) socket.write(chunk)
      this.bodyStarted = this.bodyBytes > 0
    }
    socket.uncork()
    if (this.body !== null && this.bodyBytes > REPLAY_LIMIT) this.body = null
    if (this.session.client.isPaused() && this.wantsClientData) this.session.client.resume()
  }

  // Bytes from the client while this exchange reads them: request body, or (tunnel)
  // anything.
  onClientData (buf, start) {
    if (this.tunnel) return this.toUpstream(view(buf, start, buf.length))
    let end = buf.length
    let rest = null
    if (this.chunked !== null) {
      let bodyEnd
      try {
        bodyEnd = this.chunked.read(buf, start, end)
      } catch (err) {
        return this.clientBodyFailed(err.message)
      }
      if (bodyEnd !== -1) {
        if (bodyEnd < end) rest = buf.subarray(bodyEnd)
        end = bodyEnd
        this.requestDone = true
      }
    } else {
      if (end - start > this.bodyLeft) {
        rest = buf.subarray(start + this.bodyLeft)
        end = start + this.bodyLeft
      }
      this.bodyLeft -= end - start
      if (this.bodyLeft === 0) this.requestDone = true
    }
    const piece = view(buf, start, end)
    this.bytesIn += piece.length
    if (this.requestDone) this.wantsClientData = false
    if (piece.length > 0) this.sendBody(piece)
    if (this.requestDone) this.session.bodyDone(rest)
  }

  sendBody (piece) {
    if (this.body !== null) {
      this.body.push(piece)
      this.bodyBytes += piece.length
    }
    const conn = this.conn
    if (conn === null) {
      // Still connecting: hold it, and stop reading once holding enough.
      if (this.bodyBytes > REPLAY_LIMIT) this.session.client.pause()
      return
    }
    this.bodyStarted = true
    if (this.body !== null && this.bodyBytes > REPLAY_LIMIT) this.body = null
    this.toUpstream(piece)
  }

  toUpstream (piece) {
    this.silentTicks = 0 // a backend still being sent the request is not silent
    if (!this.conn.socket.write(piece)) this.session.client.pause()
  }

  onUpstreamDrain () {
    if (this.wantsClientData) this.session.client.resume()
  }

  onClientDrain () {
    if (this.conn !== null) this.conn.socket.resume()
  }

  // The client's request body broke its chunked framing.
  clientBodyFailed (detail) {
    this.wantsClientData = false
    this.abandonUpstream()
    if (this.responseStarted) return this.session.destroy()
    this.releaseLease()
    this.replied = 400
    this.session.refuse(400, detail)
    this.finish(false)
  }

  // The client half-closed: in a tunnel, pass it on; in the middle of a request body,
  // the request can never be completed.
  onClientEnd () {
    if (this.tunnel) {
      if (this.conn !== null) this.conn.socket.end()
    } else if (this.wantsClientData) {
      this.clientBodyFailed('connection closed in the middle of the request body')
    }
  }

  awaitingBackend () {
    return !this.tunnel && this.requestDone && !this.responseStarted
  }

  onUpstreamData (conn, chunk) {
    this.session.idleTicks = 0
    this.silentTicks = 0
    if (this.tunnel) return this.toClient(chunk)
    this.gotResponseBytes = true
    if (this.res === null) return this.readResponseHead(chunk)
    this.forwardResponseBody(chunk, 0)
  }

  readResponseHead (chunk) {
    let buf = this.resBuf === null ? chunk : Buffer.concat([this.resBuf, chunk])
    this.resBuf = null
    let start = 0
    for (;;) {
      const end = findHeadEnd(buf, start)
      if (end === -1) {
        if (buf.length - start > MAX_HEAD) return this.upstreamFailed('sent a response head over 16 KiB', 502)
        this.resBuf = view(buf, start, buf.length)
        return
      }
      let res
      try {
        res = parseResponseHead(buf, start, end, this.head.method)
      } catch (err) {
        if (!(err instanceof HttpError)) throw err
        return this.upstreamFailed(`sent an invalid response (${err.message})`, 502)
      }
      if (res.status === 101) {
        if (!this.head.isUpgrade) return this.upstreamFailed('switched protocols unasked', 502)
        return this.startTunnel(res, buf, end)
      }
      if (res.status < 200) {
        // 100 Continue, 103 Early Hints: pass on (never to HTTP/1.0) and read on.
        if (this.head.version === 1) this.session.client.write(interimHead(res), 'latin1')
        start = end
        continue
      }
      this.startResponse(res, buf, end)
      return
    }
  }

  // The final response head is in; `buf` from `end` on is the start of its body.
  startResponse (res, buf, end) {
    const { head, session } = this
    this.res = res
    this.attempt.succeeded(performance.now() - this.sentAt)
    if (res.chunked) {
      this.resReader = new ChunkedReader(502)
      this.decode = head.version === 0
      if (this.decode) this.sendDecoded = (b, s, e) => this.toClient(b.subarray(s, e))
    } else if (res.bodyLength === -1) {
      this.resUntilClose = true
      this.reusable = false
    } else {
      this.resLeft = res.bodyLength
    }
    if (res.keepAliveHint !== null) this.takeKeepAliveHint(res.keepAliveHint)
    this.conn.requestsLeft--
    if (!res.keepAlive) this.reusable = false

    // After a declined upgrade, what the client sent next may be meant as the new
    // protocol or as HTTP; rather than guess, the connection ends with this response.
    this.clientKeepAlive = head.keepAlive && !session.closing && !head.asksUpgrade &&
      !this.resUntilClose && !this.decode && this.requestDone
    const text = responseHead(res, {
      chunked: res.chunked && !this.decode,
      close: !this.clientKeepAlive,
      keepAlive10: head.version === 0
    })
    this.responseStarted = true
    this.bytesOut += text.length
    if (this.resReader === null && this.resLeft === 0 && !this.resUntilClose) {
      session.client.write(text, 'latin1')
      if (end < buf.length) this.reusable = false // bytes after a complete response
      return this.responseDone()
    }
    // Head and the body bytes that came with it leave in one write (one syscall).
    session.client.cork()
    session.client.write(text, 'latin1')
    if (end < buf.length) this.forwardResponseBody(buf, end)
    session.client.uncork()
  }

  // "Keep-Alive: timeout=5, max=100": how long and how often the connection may serve.
  takeKeepAliveHint (value) {
    const hint = parseKeepAlive(value)
    if (hint.timeout !== -1) this.conn.idleMs = idleFromHint(hint.timeout)
    if (hint.max !== -1) this.conn.requestsLeft = hint.max
  }

  forwardResponseBody (buf, start) {
    let end = buf.length
    if (this.resReader !== null) {
      let bodyEnd
      try {
        bodyEnd = this.resReader.read(buf, start, end, this.sendDecoded)
      } catch (err) {
        return this.upstreamFailed(err.message, 502)
      }
      if (bodyEnd !== -1) {
        if (bodyEnd < end) this.reusable = false // bytes after the response: not a clean connection
        end = bodyEnd
      }
      if (!this.decode) this.toClient(view(buf, start, end))
      if (bodyEnd !== -1) this.responseDone()
      return
    }
    if (this.resUntilClose) return this.toClient(view(buf, start, end))
    if (end - start > this.resLeft) {
      this.reusable = false
      end = start + this.resLeft
    }
    this.resLeft -= end - start
    this.toClient(view(buf, start, end))
    if (this.resLeft === 0) this.responseDone()
  }

  toClient (piece) {
    this.bytesOut += piece.length
    if (!this.session.client.write(piece) && this.conn !== null) this.conn.socket.pause()
  }

  responseDone () {
    const conn = this.conn
    this.conn = null
    if (this.reusable && this.requestDone) conn.pool.release(conn)
    else conn.destroy()
    this.releaseLease()
    this.finish(this.clientKeepAlive)
  }

  // 101 Switching Protocols: from here on, bytes flow raw both ways until either side
  // closes; the backend connection is no longer HTTP and never goes back to the pool.
  startTunnel (res, buf, end) {
    const { session } = this
    this.attempt.succeeded()
    this.tunnel = true
    this.responseStarted = true
    this.wantsClientData = true
    this.conn.socket.setTimeout(0) // idleness is the listener's sweep, as for the client
    const text = responseHead(res, { upgrade: true })
    this.bytesOut += text.length
    session.client.write(text, 'latin1')
    if (end < buf.length) this.toClient(buf.subarray(end))
    // What the client sent after its request head waited in the session.
    if (session.buf !== null) {
      const early = session.buf
      session.buf = null
      this.toUpstream(early)
    }
  }

  onUpstreamEnd (conn) {
    if (this.tunnel) return this.session.client.end()
    if (this.resUntilClose && this.res !== null) {
      this.reusable = false
      this.responseDone()
    }
  }

  onUpstreamClose (conn) {
    if (this.conn !== conn) return
    if (this.tunnel) {
      this.conn = null
      if (!this.session.client.destroyed) this.session.client.end()
      this.releaseLease()
      return
    }
    this.upstreamFailed(this.gotResponseBytes ? 'closed the connection mid-response' : 'closed the connection without answering', 502)
  }

  onUpstreamError (conn, err) {
    if (this.conn !== null && this.conn !== conn) return
    if (this.tunnel) return this.session.destroy()
    if (isLocalShortage(err) && !this.responseStarted) return this.shortOf(conn, err)
    this.upstreamFailed(reasonOf(err), 502, conn)
  }

  // lila itself could not open a backend connection (out of descriptors): the backend
  // is not blamed, and another would fare no better: 503, to try again later.
  shortOf (conn, err) {
    conn.destroy()
    this.conn = null
    this.attempt.shortage(this.bytesIn)
    this.listener.sayShortage(`cannot open a backend connection: ${reasonOf(err)}`)
    this.answer(503, `lila is short of resources (${reasonOf(err)})`, { retryAfter: 5, quiet: true })
  }

  onUpstreamTimeout (conn) {
    if (!conn.ready) return this.upstreamFailed('connect timed out', 502, conn)
    this.upstreamFailed('timed out', 504)
  }

  // The backend connection failed. Before any response byte, retry where safe; after
  // the response started, cut the client so it cannot mistake the rest for complete.
  upstreamFailed (reason, status, conn = this.conn) {
    if (this.done) return
    const { attempt } = this
    const backend = attempt.backend
    if (conn !== null) conn.destroy()
    this.conn = null
    const { log } = this.listener
    if (this.responseStarted) {
      log.warn(`${this.head.method} ${this.path} from ${this.clientAddress}: backend ${backend.address} ${reason}; response cut`)
      attempt.blame(reason)
      this.releaseLease()
      this.session.destroy()
      this.finish(false)
      return
    }
    // A pooled connection the backend had closed (the keep-alive race) is not the
    // backend failing: try once more on a fresh connection to the same backend.
    const replayable = this.canReplay()
    const stale = conn !== null && conn.reused && status === 502
    if (stale && replayable && attempt.retryFresh()) {
      log.debug(`${backend.address}: reused connection ${reason}; retrying on a fresh one`)
      return conn.pool.acquire(this, { fresh: true })
    }
    this.lastStatus = status
    if (replayable && status === 502) log.debug(`${backend.address} ${reason}; retrying ${this.head.method} ${this.path} elsewhere`)
    const retried = attempt.failed(reason, { replayable, slow: status === 504, bytesIn: this.bytesIn })
    if (!retried) this.answer(status, `backend ${backend.address} ${reason}`)
  }

  // Safe to send again: nothing of the response came back, all body bytes sent are
  // still held, and the method is idempotent or no body byte went out yet.
  canReplay () {
    return !this.gotResponseBytes && this.body !== null &&
      (IDEMPOTENT.has(this.head.method) || !this.bodyStarted)
  }

  // lila answers the request itself (error statuses).
  answer (status, detail, { retryAfter = 0, quiet = false } = {}) {
    const { session, head } = this
    if (status >= 500 && !quiet) this.listener.log.warn(`${status} for ${head.method} ${this.path} from ${this.clientAddress}: ${detail}`)
    const keepAlive = head.keepAlive && this.requestDone && !session.closing
    const bytes = reply(status, detail, { close: !keepAlive, retryAfter, head: head.method === 'HEAD' })
    this.bytesOut += bytes.length
    this.responseStarted = true
    this.replied = status
    session.client.write(bytes)
    this.finish(keepAlive)
  }

  abandonUpstream () {
    const conn = this.conn
    this.conn = null
    if (conn !== null) {
      conn.destroy()
    } else if (this.attempt.backend !== null) {
      this.listener.poolFor(this.attempt.backend).cancel(this)
    }
    this.attempt.cancel()
  }

  // The client went away: drop the backend connection (its response would have
  // nowhere to go) and release the count.
  onClientClose () {
    if (this.done) return
    this.abandonUpstream()
    this.releaseLease()
    this.done = true
    if (this.listener.accessLog !== null) this.listener.accessLog.http(this)
  }

  releaseLease () {
    this.attempt.release(this.bytesIn, this.bytesOut)
  }

  finish (keepAlive) {
    if (this.done) return
    this.done = true
    if (this.listener.accessLog !== null) this.listener.accessLog.http(this)
    this.session.exchangeDone(keepAlive)
  }
}

module.exports = { Exchange, IDEMPOTENT, REPLAY_LIMIT }
