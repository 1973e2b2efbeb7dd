'use strict'

// The exporter's POSTs (exporter.js): HTTP/1.1 over one connection of lila's own, kept
// alive from export to export, one request at a time. Node's http client cost an
// export about twice what its bytes do (bench/ab.js: --otlp sampling every request
// 0.95x with this beside it), and the exporter needs little of it: a POST of known
// length, the answer's status and Retry-After, its body skipped whatever its framing.
//
//   const conn = new PostConnection(url, { headers, timeout })   url: a URL (http, https)
//   conn.post(payload) -> Promise<{ status, error, retryAfter }>
//       status 0 and `error` (words, or a code such as ECONNREFUSED) when no answer came;
//       retryAfter: the answer's Retry-After in ms, or -1
//   conn.close()

const net = require('net')
const tls = require('tls')

const CRLF_CRLF = Buffer.from('\r\n\r\n')
// Fields this connection writes itself, whatever the headers given say.
const OWN = new Set(['host', 'content-length', 'connection', 'transfer-encoding', 'keep-alive', 'te', 'upgrade'])
const MAX_HEAD = 65536 // an answer's head past this is no answer lila reads

class PostConnection {
  // headers: { name: value } sent with every POST, checked already
  // (config/otel-environment.js); timeout: ms an answer may take.
  constructor (url, { headers, timeout }) {
    this.secure = url.protocol === 'https:'
    this.host = url.hostname.replace(/^\[|\]$/g, '')
    this.port = url.port === '' ? (this.secure ? 443 : 80) : Number(url.port)
    this.timeout = timeout
    let head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`
    for (const [name, value] of Object.entries(headers)) {
      if (!OWN.has(name.toLowerCase())) head += `${name}: ${value}\r\n`
    }
    this.head = head // then Content-Length and the blank line, per POST
    this.socket = null // the connection kept alive, or null
    this.answer = null // the POST under way: an Answer
  }

  post (payload) {
    if (this.socket !== null && this.socket.destroyed) this.socket = null
    return new Promise(resolve => this.send(payload, resolve, this.socket !== null))
  }

  // `reused`: on a connection kept from an earlier POST, which the collector may have
  // closed meanwhile: failing before a byte of answer, the POST goes once more on a
  // fresh one.
  send (payload, resolve, reused) {
    const socket = this.socket || this.connect()
    const answer = this.answer = new Answer(socket, result => {
      clearTimeout(timer)
      this.answer = null
      // An answer before the whole payload went (a refusal that did not read it): the
      // connection is not reused, and the payload's bytes (the caller's to reuse once
      // answered: wire/otlp.js take) are never read again.
      if (socket.writableLength > 0) result.keep = false
      if (!result.keep && this.socket === socket) this.drop()
      if (result.status === 0 && reused && !answer.heard && !answer.timedOut) return this.send(payload, resolve, false)
      resolve(result)
    })
    const timer = setTimeout(() => {
      answer.timedOut = true
      answer.fail(`no answer within ${this.timeout} ms`)
    }, this.timeout)
    socket.cork()
    socket.write(`${this.head}Content-Length: ${payload.length}\r\n\r\n`, 'latin1')
    socket.write(payload)
    socket.uncork()
  }

  connect () {
    const { host, port } = this
    const socket = this.secure
      ? tls.connect({ host, port, servername: net.isIP(host) === 0 ? host : undefined, ALPNProtocols: ['http/1.1'] })
      : net.connect({ host, port })
    socket.setNoDelay(true)
    // What the socket says goes to the answer it carries (none while idle).
    const carried = () => this.answer !== null && this.answer.socket === socket
    socket.on('data', chunk => { if (carried()) this.answer.data(chunk) })
    socket.on('error', err => { if (carried()) this.answer.fail(err.code || err.message) })
    socket.on('close', () => {
      if (this.socket === socket) this.socket = null
      if (carried()) this.answer.closed()
    })
    this.socket = socket
    return socket
  }

  drop () {
    const { socket } = this
    this.socket = null
    if (socket !== null) socket.destroy()
  }

  close () {
    if (this.answer !== null) this.answer.fail('closed')
    this.drop()
  }
}

// One POST's answer as it comes: its head (1xx heads skipped), then its body skipped
// by its length, its chunks, or to the connection's end.
class Answer {
  constructor (socket, done) {
    this.socket = socket
    this.done = done
    this.heard = false // a byte of the answer came
    this.timedOut = false
    this.settled = false
    this.buf = null // what of the head has come
    this.status = 0
    this.retryAfter = -1
    this.keep = true // the connection may carry the next POST
    this.left = -1 // body bytes to skip; -1: none known
    this.chunked = null // a chunked body's reader, or null
    this.toClose = false // the body ends with the connection
  }

  data (chunk) {
    if (this.settled) return
    this.heard = true
    if (this.status === 0 || this.buf !== null) return this.headData(chunk)
    this.bodyData(chunk, 0)
  }

  headData (chunk) {
    const buf = this.buf = this.buf === null ? chunk : Buffer.concat([this.buf, chunk])
    const end = buf.indexOf(CRLF_CRLF)
    if (end < 0) {
      if (buf.length > MAX_HEAD) this.fail('an answer whose head is too long')
      return
    }
    this.buf = null
    const lines = buf.toString('latin1', 0, end).split('\r\n')
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0])
    if (status === null) return this.fail('an answer that is not HTTP/1.1')
    const code = Number(status[1])
    if (code < 200) return end + 4 < buf.length ? this.headData(buf.subarray(end + 4)) : undefined // 1xx
    this.status = code
    this.keep = lines[0].startsWith('HTTP/1.1')
    let length = -1
    for (let i = 1; i < lines.length; i++) {
      const colon = lines[i].indexOf(':')
      if (colon < 0) continue
      const name = lines[i].slice(0, colon).trim().toLowerCase()
      const value = lines[i].slice(colon + 1).trim()
      if (name === 'content-length') length = Number(value)
      else if (name === 'transfer-encoding') this.chunked = /chunked\s*$/i.test(value) ? new ChunkSkipper() : null
      else if (name === 'connection') this.keep = !/\bclose\b/i.test(value) && (this.keep || /keep-alive/i.test(value))
      else if (name === 'retry-after') this.retryAfter = retryAfterOf(value)
    }
    if (this.chunked === null) {
      if (length >= 0 && Number.isSafeInteger(length)) this.left = length
      else if (code === 204 || code === 304) this.left = 0
      else {
        this.toClose = true
        this.keep = false
      }
    }
    this.bodyData(buf, end + 4)
  }

  bodyData (buf, at) {
    if (this.chunked !== null) {
      const over = this.chunked.skip(buf, at)
      if (over === -2) return this.fail('an answer with broken chunks')
      if (over >= 0) this.finish()
      return
    }
    if (this.toClose) return
    this.left -= buf.length - at
    if (this.left <= 0) this.finish()
  }

  finish () {
    if (this.settled) return
    this.settled = true
    this.done({ status: this.status, error: null, retryAfter: this.retryAfter, keep: this.keep })
  }

  fail (reason) {
    if (this.settled) return
    this.settled = true
    this.done({ status: 0, error: reason, retryAfter: -1, keep: false })
  }

  // The connection ended: the end of a body framed by it, else no (whole) answer.
  closed () {
    if (this.status !== 0 && this.toClose) return this.finish()
    this.fail(this.heard ? 'the connection closed within the answer' : 'the connection closed without an answer')
  }
}

// A chunked body read past: chunk sizes, their data, the last chunk and its trailers.
class ChunkSkipper {
  constructor () {
    this.line = '' // a size or trailer line so far
    this.left = 0 // data bytes of the chunk (and its CRLF) to skip
    this.last = false // past the last chunk: trailer lines until an empty one
  }

  // -1: more to come; -2: broken; else the end of the body was reached.
  skip (buf, at) {
    let i = at
    while (i < buf.length) {
      if (this.left > 0) {
        const n = Math.min(this.left, buf.length - i)
        this.left -= n
        i += n
        continue
      }
      const c = buf[i++]
      if (c !== 10) {
        if (this.line.length > 4096) return -2
        this.line += String.fromCharCode(c)
        continue
      }
      const line = this.line.trim()
      this.line = ''
      if (this.last) {
        if (line === '') return i
        continue
      }
      const size = parseInt(line, 16) // chunk extensions after ';' are ignored by parseInt
      if (!Number.isInteger(size) || size < 0) return -2
      if (size === 0) this.last = true
      else this.left = size + 2 // the data and its CRLF
    }
    return -1
  }
}

// Retry-After: seconds, or an HTTP date; -1 when it cannot be read.
function retryAfterOf (value) {
  if (/^\d+$/.test(value)) return Number(value) * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? -1 : Math.max(0, at - Date.now())
}

module.exports = { PostConnection }
