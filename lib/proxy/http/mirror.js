'use strict'

const http = require('http')
const { performance } = require('perf_hooks')
const { Fields, FIELD, requestFields } = require('../message/rewrite')
const { ChunkedReader } = require('../http1/chunked')
const { REPLAY_LIMIT } = require('../../limits')
const { backendReason } = require('../../upstream/dial')
const { Comparison, BodyDigest } = require('./mirror-compare')

// A request whose body is larger than this is not mirrored (counted too-large): a copy
// goes whole once the client's body is in, and lila holds no more of a body than a
// replay may (request-body.js).
const MAX_BODY = REPLAY_LIMIT
// Copies sent and not yet answered, at most: past this a slow or dead mirror's copies
// are dropped (counted), never queued.
const MAX_IN_FLIGHT = 64
// Every copy says it is one, so that the mirror can tell it from real traffic (and, say,
// charge no card and send no e-mail).
const MARK = ['X-Lila-Mirror', '1']
// Fields of the primary's head a copy goes without: it is sent whole, with its length,
// and its connection is Node's (TE is a connection option).
const NOT_COPIED = new Set(['content-length', 'expect', 'te'])
const EMPTY = Buffer.alloc(0)

// A shadow's states: reading the client's body, sent (or answered), or not mirrored.
const BUFFERING = 0
const SENT = 1
const GONE = 2

// --mirror: a copy of each request of an HTTP listener (or of `percent` % of them) sent
// to a shadow backend, whose answer is read and dropped, or, with --compare, compared
// with the primary's (mirror-compare.js). The client's request never waits for the
// mirror, nor is its answer changed by it: a copy is its own request, over Node's HTTP
// client with a keep-alive agent of its own, sent once the client's body is in.
//
// The exchange (exchange.js) holds the listener's Mirror or null, and with one calls
// start() once the request is to be served, then tells the Shadow it returns (if any)
// the body and its end, and the primary's answer: primaryStatus, primaryBody,
// primaryDone.
//   new Mirror(target, settings, { log, random })   target: config's `mirror`
//   mirror.configure(target, settings)              a reload kept the same address
//   mirror.start(head, ctx, bodyDone)               -> a Shadow, or null: not mirrored
//     (ctx: the request's exchange: its clientAddress and requestId, for
//     message/rewrite.js)
//   mirror.snapshot(), mirror.close()
class Mirror {
  constructor (target, settings, { log, random = Math.random }) {
    this.address = target.address
    this.connectTo = target.path !== null ? { socketPath: target.path } : { host: target.host, port: target.port }
    this.hostHeader = target.path !== null ? 'localhost' : target.address // for a head without Host
    this.log = log
    this.random = random
    this.agent = new http.Agent({ keepAlive: true, maxSockets: MAX_IN_FLIGHT })
    this.inFlight = 0
    this.outcomes = { sent: 0, dropped: 0, 'too-large': 0, failed: 0 }
    this.failing = 0 // copies failed in a row: the first is said, and the mirror's return
    this.comparison = null // a Comparison with --compare
    this.configure(target, settings)
  }

  // settings: { compare, timeout (ms a copy may wait for its answer; 0: no limit),
  // rewrite (the listener's message/rewrite.js settings: the head is the primary's) }.
  configure ({ percent }, { compare, timeout, rewrite }) {
    this.percent = percent
    this.timeout = timeout
    this.rewrite = rewrite
    if (!compare) this.comparison = null
    else if (this.comparison === null) this.comparison = new Comparison(this.log)
  }

  // A request to be served (`head` as http1/parse.js or http2/request.js gives it);
  // `bodyDone`: it has no body to come; `span`: the copy's own (--otlp), ended when it
  // is answered or fails. A Shadow to tell the rest, or null.
  start (head, ctx, bodyDone, span = null) {
    if (head.isUpgrade) return null // a WebSocket is not copied
    if (this.percent < 100 && this.random() * 100 >= this.percent) return null
    if (head.contentLength > MAX_BODY) {
      this.outcomes['too-large']++
      return null
    }
    const shadow = new Shadow(this, head, ctx, span)
    if (bodyDone) shadow.end()
    return shadow.state === GONE ? null : shadow
  }

  // The copy of `shadow`'s request, with `body` (a Buffer, or null: none). False when
  // dropped: MAX_IN_FLIGHT copies wait for the mirror already.
  send (shadow, body) {
    if (this.inFlight >= MAX_IN_FLIGHT) {
      this.outcomes.dropped++
      return false
    }
    const { head } = shadow
    const headers = copiedFields(head, shadow.ctx, this.hostHeader, this.rewrite, shadow.span)
    if (body !== null) headers.push('Content-Length', String(body.length))
    headers.push(...MARK)
    let req
    try {
      req = http.request({
        ...this.connectTo, agent: this.agent, method: head.method, path: head.target, headers, setHost: false
      })
    } catch (err) {
      this.settled(shadow, null, err)
      return false
    }
    this.inFlight++
    const comparing = shadow.comparison !== null
    let answer = null
    let failure = null
    req.on('response', res => {
      const digest = comparing ? new BodyDigest() : null
      if (digest === null) res.resume()
      else res.on('data', chunk => digest.update(chunk))
      res.on('end', () => { answer = { status: res.statusCode, digest, ms: performance.now() - shadow.startedAt } })
    })
    req.on('error', err => { failure = err })
    req.on('close', () => {
      this.inFlight--
      this.settled(shadow, answer, failure)
    })
    if (this.timeout > 0) req.setTimeout(this.timeout, () => req.destroy(new Error('timed out')))
    req.end(body === null ? undefined : body)
    return true
  }

  // A copy is over: answered (`answer`), or failed. The first failure in a row is said,
  // and the first answer after failures.
  settled (shadow, answer, failure) {
    if (shadow.span !== null) spanSettled(shadow.span, answer, failure)
    if (answer === null) {
      this.outcomes.failed++
      if (this.failing++ === 0) {
        const why = failure === null ? 'closed the connection without answering' : backendReason(failure)
        this.log.warn(`mirror ${this.address} failed: ${why} (clients are not affected)`)
      }
      return
    }
    this.outcomes.sent++
    if (this.failing > 0) {
      const failed = `${this.failing} ${this.failing === 1 ? 'copy' : 'copies'} failed`
      this.log.info(`mirror ${this.address} answers again (${failed})`)
      this.failing = 0
    }
    shadow.answered(answer)
  }

  tooLarge () {
    this.outcomes['too-large']++
  }

  snapshot () {
    return {
      address: this.address,
      percent: this.percent,
      inFlight: this.inFlight,
      maxInFlight: MAX_IN_FLIGHT,
      requests: { ...this.outcomes }, // by outcome
      compare: this.comparison === null ? null : this.comparison.snapshot()
    }
  }

  // No more copies: the agent's connections are closed (a copy still out fails).
  close () {
    this.agent.destroy()
  }
}

// One request's copy: its body gathered (data only: an HTTP/1.1 chunked body is decoded
// here, as it comes framed), then sent whole; with --compare, the primary's answer and
// the mirror's, compared once both are complete.
class Shadow {
  constructor (mirror, head, ctx, span) {
    this.mirror = mirror
    this.head = head
    this.span = span
    this.ctx = ctx // the exchange: clientAddress, requestId
    this.startedAt = performance.now()
    this.state = BUFFERING
    this.hasBody = head.chunked || head.contentLength !== -1
    this.pieces = null // the body so far
    this.bytes = 0
    // A body whose pieces carry the client's chunked framing (request-body.js `framed`)
    // is taken apart here; others come as their bytes alone.
    this.dechunk = ctx.body.framed === true ? new ChunkedReader(400) : null
    this.keepData = this.dechunk === null ? null : (buf, start, end) => this.keep(buf.subarray(start, end))
    this.comparison = mirror.comparison
    this.primary = null // with --compare, the primary's answer: { status, digest, ms, done }
    this.answer = null // and the mirror's: { status, digest, ms }
  }

  // A piece of the client's body, as the exchange read it.
  body (chunk) {
    if (this.state !== BUFFERING) return
    if (this.dechunk === null) return this.keep(chunk)
    try {
      this.dechunk.read(chunk, 0, chunk.length, this.keepData)
    } catch {
      this.state = GONE // malformed: the exchange refuses the request too
      this.pieces = null
    }
  }

  keep (piece) {
    if (this.state !== BUFFERING) return
    this.bytes += piece.length
    if (this.bytes > MAX_BODY) {
      this.state = GONE
      this.pieces = null
      return this.mirror.tooLarge()
    }
    (this.pieces ||= []).push(piece)
  }

  // The client's body is in: the copy goes.
  end () {
    if (this.state !== BUFFERING) return
    const { pieces } = this
    const body = !this.hasBody
      ? null
      : pieces === null ? EMPTY : pieces.length === 1 ? pieces[0] : Buffer.concat(pieces)
    this.pieces = null
    this.state = this.mirror.send(this, body) ? SENT : GONE
  }

  // The primary's answer, as the client gets it: its status (`chunked`: its body comes
  // with HTTP/1.1 chunked framing), the body's pieces, its end.
  primaryStatus (status, chunked = false) {
    if (this.comparison === null || this.state === GONE) return
    this.primary = { status, digest: new BodyDigest(chunked), ms: 0, done: false }
  }

  primaryBody (chunk) {
    if (this.primary !== null) this.primary.digest.update(chunk)
  }

  primaryDone () {
    const { primary } = this
    if (primary === null || primary.done) return
    primary.ms = performance.now() - this.startedAt
    primary.done = true
    this.compare()
  }

  // The mirror's answer is complete.
  answered (answer) {
    this.answer = answer
    this.compare()
  }

  compare () {
    const { primary, answer } = this
    if (primary === null || !primary.done || answer === null || this.comparison === null) return
    this.comparison.record(this.head.method, this.head.path, primary, answer)
    this.comparison = null // once
  }
}

// A copy's span (--otlp) ends with its answer's status, or why it failed.
function spanSettled (span, answer, failure) {
  if (answer !== null) span.set('http.response.status_code', answer.status)
  if (answer === null) span.fail(failure === null ? 'closed the connection without answering' : backendReason(failure))
  else if (answer.status >= 400) span.fail(`answered ${answer.status}`)
  span.finish()
}

// The fields message/rewrite.js decides for the primary, as Node's list of fields for
// the copy: one source for what a backend is sent (X-Forwarded-*, Via, Host; with
// --otlp, the traceparent of the copy's own span).
function copiedFields (head, ctx, hostHeader, rewrite, span) {
  const fields = new Fields()
  requestFields(head, ctx, hostHeader, rewrite, null, span, fields)
  const { list } = fields
  const out = []
  for (let i = 0; i < fields.length; i += FIELD) {
    if (!NOT_COPIED.has(list[i + 1])) out.push(list[i], list[i + 2])
  }
  return out
}

module.exports = { Mirror }
