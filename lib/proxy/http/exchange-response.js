'use strict'

const { reasonOf } = require('../../errors')
const { responsePlan, editedResponse, CompressedBody } = require('./edge-calls')
const { responseBody } = require('../message/response-body')

// What a compressed body is to the client's codec: lila frames it (respond's `how`).
const UNFRAMED = responseBody(false, false, false)

// The response half of an Exchange (exchange.js, which extends it): what its leg
// calls with the backend's answer (interfaces.js LEG's side), from the final head's
// verdict to the body's end or a tunnel, and on to the client's codec. The request's
// life, its fields and lila's own answers stay in exchange.js.
class ExchangeResponse {
  // A 1xx (100 Continue, 103 Early Hints) passed on.
  interim (res) {
    if (!this.done) this.client.interim(this, res)
  }

  // The backend's final head `res`, judged (forwarding.js): true when it is dropped, the
  // request retried elsewhere or answered with --intercept-errors' page. Kept, it is
  // shown to the rules at the edge, whose plan (compressing its body, say) the leg may
  // need to know before it reads on (`compressing`).
  answered (status, latencyMs, res) {
    if (this.forwarding.answered(status, latencyMs, res)) return true
    if (this.rules !== null) this.plan = responsePlan(this, status, res)
    return false
  }

  // --error-page's page for `status` on this request's pool (listener's, route's), or null.
  errorPage (status) {
    const { pages } = this.pool
    return pages === null ? null : pages.get(status) || null
  }

  // Could the request be sent again if its backend died before its answer's end?
  // Idempotent with its body held, or any held one with --retry-on reset (http2/leg.js
  // holds a small answer until its end when it could).
  get repeatable () {
    return this.body.canRepeat() || (this.body.kept && this.attempt.resendsAfter('reset'))
  }

  // Will the response's body go on compressed? Then the leg gives it unframed.
  get compressing () {
    return this.plan !== null && this.plan.encoding !== null
  }

  // The final head goes to the client (the leg's `how`, message/response-body.js:
  // { bodyless, framed: its body pieces carry HTTP/1.1 chunked framing, untilClose: its
  // end is the backend's close }). False when it cannot: the client left meanwhile.
  respond (res, how) {
    if (this.done) return false
    const { plan } = this
    let sent = res
    if (plan !== null && !how.bodyless) {
      sent = editedResponse(res, plan.fields, plan.encoding !== null)
      if (plan.encoding !== null) how = UNFRAMED // lila frames what it compresses
    }
    const size = this.client.respond(this, sent, how, this.cookies())
    if (size < 0) {
      this.onClientClose()
      return false
    }
    if (sent !== res && plan.encoding !== null) this.compressed = new CompressedBody(this, this.rules, plan.encoding)
    this.res = sent
    this.responseStarted = true
    this.bytesOut += size
    if (this.shadow !== null) this.shadow.primaryStatus(res.status, how.framed)
    return true
  }

  // The body bytes read with the head went (or there were none): the head leaves now if
  // it waited for them.
  flushHead () {
    if (!this.done) this.client.flushHead(this)
  }

  toClient (piece) {
    if (this.done) return
    if (this.shadow !== null) this.shadow.primaryBody(piece)
    if (this.compressed !== null) {
      if (!this.compressed.write(piece) && this.leg !== null) this.leg.pause()
      return
    }
    this.bytesOut += piece.length
    if (!this.client.send(this, piece) && this.leg !== null) this.leg.pause()
  }

  // The response is complete (the leg gave its connection back); `trailers`: fields as
  // in a head, or null. A compressed body ends when its last bytes are out.
  responseDone (trailers) {
    this.forwarding.legFinished()
    if (this.done) return
    if (this.shadow !== null) this.shadow.primaryDone()
    this.forwarding.release()
    if (this.compressed !== null) return this.compressed.end(trailers)
    this.compressedDone(trailers)
  }

  // A compressed body (edge-calls.js CompressedBody): its bytes to the client (false:
  // the client is full), the backend read on once the compressor drained, the end.
  sendCompressed (chunk) {
    if (this.done) return true
    this.bytesOut += chunk.length
    return this.client.send(this, chunk)
  }

  compressorDrained () {
    if (this.leg !== null) this.leg.resume()
  }

  // (Or the response's end, not compressed.)
  compressedDone (trailers) {
    if (this.done) return
    this.bytesOut += this.client.finishResponse(this, trailers)
    this.finish(true)
  }

  compressFailed (err) {
    if (this.done) return
    const request = `${this.head.method} ${this.path} from ${this.clientAddress}`
    this.listener.log.warn(`${request}: compressing failed (${reasonOf(err)}); response cut`)
    this.forwarding.drop()
    this.cutOff('lila')
  }

  // A 101 from an HTTP/1.1 backend (http1/leg.js): the connection becomes a Tunnel
  // (http1/tunnel.js), raw bytes both ways.
  startTunnel (tunnel, res) {
    this.attempt.succeeded()
    this.tunnel = tunnel
    this.responseStarted = true
    this.reading = true
    this.bytesOut += this.client.tunnelHead(this, res, this.cookies())
  }

  // The Set-Cookie values a backend's response gets: --sticky's and --canary's (null,
  // one, or a list of both).
  cookies () {
    const sticky = this.listener.protocol.sticky.cookieFor(this)
    return this.side === null ? sticky : this.canary.cookies(this.side, sticky)
  }

  // The tunnel's backend side closed.
  tunnelClosed () {
    this.forwarding.legDone()
    this.forwarding.release()
  }
}

module.exports = { ExchangeResponse }
