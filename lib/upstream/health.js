'use strict'

const http = require('http')
const { dial, readyEvent, backendReason } = require('./dial')
const { formatProxyHeader } = require('../wire/proxy-protocol')
const VERSION = require('../version')
const { isOutOfDescriptors, reportOutOfDescriptors } = require('../descriptors')

// Active health checks: every watched backend is probed every `interval`, each probe
// given up after `timeout`. A probe is started only when the previous one of the same
// backend has finished, so slow probes never pile up; the next one starts `interval`
// after the previous one started (or at once, if that one took longer). Each result
// goes to the Backend (checkPassed / checkFailed), whose state machine applies rise and
// fall. Probes are not traffic: they take no lease and count nowhere but in the state.
// A probe lila could not make for want of file descriptors says nothing of the backend:
// it counts neither way, and is reported (the listeners say it, and stop accepting).
//
// check: { type: 'tcp' } connects and closes; { type: 'http', path } sends
// `GET path` with Node's http client (https with --backend-tls, `tls` being its
// tls.connect options), or lila's own HTTP/2 codec for HTTP/2 backends (`http2`: h2c,
// or h2 by ALPN), and passes on a 2xx or 3xx status; { type: 'grpc', service } calls the
// standard gRPC health service over HTTP/2 (probeGrpc). `host` is the Host header
// (:authority) (--check-host); by default the backend as it was given (localhost for a
// Unix socket).
class HealthChecker {
  constructor (options) {
    this.configure(options)
    this.watched = new Map() // Backend -> { timer, first }: the next probe, the first one's promise
  }

  // New settings (a reload): probes under way finish as they began; the next ones use
  // these.
  configure ({ check, interval, timeout, host = null, tls = null, proxyProtocol = null, http2 = false }) {
    const preface = tls !== null && proxyProtocol !== null
      ? formatProxyHeader(proxyProtocol, { source: null, destination: null })
      : null
    this.check = { ...check, host, tls, preface, http2 }
    this.interval = interval
    this.timeout = timeout
  }

  // Start probing `backend`; the first probe goes at once. Resolves when that first
  // probe is done, so the caller knows the backend's state (also when it was already
  // watched: the same first probe).
  watch (backend) {
    const watched = this.watched.get(backend)
    if (watched) return watched.first
    const entry = { timer: null, first: null }
    this.watched.set(backend, entry)
    entry.first = new Promise(resolve => this.run(backend, entry, resolve))
    return entry.first
  }

  run (backend, entry, onDone = null) {
    entry.timer = null
    const startedAt = Date.now()
    probe(backend, this.check, this.timeout, (ok, reason) => {
      if (this.watched.get(backend) === entry) {
        if (ok === null) {
          reportOutOfDescriptors(`health check of ${backend.address} not made, not counted`, 'health check')
        } else if (ok) {
          backend.checkPassed(reason)
        } else {
          backend.checkFailed(reason)
        }
        const wait = Math.max(0, this.interval - (Date.now() - startedAt))
        entry.timer = setTimeout(() => this.run(backend, entry), wait)
        entry.timer.unref()
      }
      if (onDone !== null) onDone()
    })
  }

  unwatch (backend) {
    const entry = this.watched.get(backend)
    if (!entry) return
    clearTimeout(entry.timer)
    this.watched.delete(backend)
  }

  close () {
    for (const backend of [...this.watched.keys()]) this.unwatch(backend)
  }
}

// One probe of one backend; done(ok, reason) exactly once, within `timeout`; ok null
// when lila could not make it (out of file descriptors). A probe
// that got its answer closes politely (FIN, then reads what is left), as a well-behaved
// client would, so backends do not log resets; what lingers is cut after `timeout`.
function probe (backend, check, timeout, done) {
  let finished = false
  let stop = null
  let what = describe(check) // what is under way, for a timeout: a tcp probe moves on to the handshake
  const timer = setTimeout(() => finish(false, `${what} timed out`), timeout)
  function finish (ok, reason) {
    if (finished) return
    finished = true
    clearTimeout(timer)
    stop(ok)
    done(ok, reason)
  }
  const run = check.type === 'grpc'
    ? probeGrpc
    : check.type !== 'http' ? probeTcp : check.http2 ? probeHttp2 : probeHttp
  stop = run(backend, check, timeout, finish, next => { what = next })
}

// Out of descriptors: the error itself, or (HTTP/2) a stream cancelled because its
// session's socket could not be made.
function ranOut (err) {
  return isOutOfDescriptors(err) || (err != null && isOutOfDescriptors(err.cause))
}

function describe (check) {
  if (check.type === 'grpc') return 'grpc health check'
  return check.type === 'http' ? `http ${check.path}` : 'tcp connect'
}

// With TLS, a failure once the TCP connect is done is the handshake's.
function probeTcp (backend, { tls = null, preface = null }, timeout, finish, doing) {
  const socket = dial(backend, tls, { preface })
  let connected = false
  socket.unref()
  if (tls !== null) {
    socket.once('connect', () => {
      connected = true
      doing('tls handshake')
    })
  }
  socket.on(readyEvent(socket), () => finish(true, tls === null ? 'tcp connect ok' : 'tls handshake ok'))
  socket.on('error', err => {
    if (isOutOfDescriptors(err)) return finish(null, 'out of file descriptors')
    finish(false, connected ? `tls handshake: ${backendReason(err, tls)}` : `tcp ${backendReason(err, tls)}`)
  })
  return ok => {
    if (!ok) return socket.destroy()
    socket.setTimeout(timeout, () => socket.destroy())
    socket.resume()
    socket.end()
  }
}

function probeHttp (backend, { path, host: hostHeader, tls = null }, timeout, finish) {
  const host = hostHeader || backend.hostHeader
  let answered = false
  const req = http.request({
    // The connection traffic would make: the certificate is checked against the
    // backend's name or IP address (never the Host header), with the same options.
    createConnection: () => dial(backend, tls),
    path,
    method: 'GET',
    headers: { host, 'user-agent': `lila/${VERSION} health check`, connection: 'close' }
  })
  req.on('socket', socket => socket.unref())
  req.on('response', res => {
    answered = true
    res.on('error', () => {})
    res.resume()
    const status = res.statusCode
    finish(status >= 200 && status < 400, `http ${path} ${status}`)
  })
  req.on('error', err => {
    if (isOutOfDescriptors(err)) return finish(null, 'out of file descriptors')
    finish(false, `http ${path} ${backendReason(err, tls)}`)
  })
  req.end()
  return () => {
    if (!answered) return req.destroy()
    req.setTimeout(timeout, () => req.destroy())
  }
}

// One request on an HTTP/2 session of its own (h2c, or h2 by ALPN with --backend-tls),
// on lila's own codec (wire/h2), closed after: the probes of HTTP/2 backends.
// `answer(head, body, trailers)` once the response is whole (body up to MAX_ANSWER),
// `fail(reason)` otherwise (words after "http PATH " or "grpc "), or `short()` when lila
// could not make it (out of descriptors). Returns its stop().
const MAX_ANSWER = 1024

// lila's HTTP/2 codec is required with the first HTTP/2 or gRPC probe: a lila with no
// such check never compiles it (start-up).
function h2Request (backend, tls, list, body, { answer, fail, short }) {
  const { Connection, CLOSED } = require('../wire/h2/connection')
  const { attach } = require('../wire/h2/socket')
  const { errorName } = require('../wire/h2/constants')
  const socket = dial(backend, tls === null ? null : { ...tls, ALPNProtocols: ['h2'] })
  socket.unref()
  let failure = null
  socket.on('error', err => { failure = err })
  if (tls !== null) {
    socket.once('secureConnect', () => {
      if (socket.alpnProtocol !== 'h2') fail('does not speak HTTP/2 over TLS (ALPN agreed on no h2)')
    })
  }
  const conn = new Connection(PROBES, 'client')
  attach(socket, conn)
  let head = null
  let size = 0
  const pieces = []
  const s = conn.request({
    onHead (s, h, endStream) {
      if (h.status < 200) return
      head = h
      if (endStream) answer(head, EMPTY, h.fields)
    },
    onData (s, chunk, endStream) {
      size += chunk.length
      if (size > MAX_ANSWER) return fail('answer too large for a health check')
      pieces.push(Buffer.from(chunk))
      if (endStream) answer(head, Buffer.concat(pieces), null)
    },
    onTrailers (s, fields) { answer(head, Buffer.concat(pieces), fields) },
    onReset (s, code) {
      if (code !== CLOSED) return fail(`stream reset (${errorName(code)})`)
      if (ranOut(failure)) return short()
      fail(failure === null ? 'closed the connection' : backendReason(failure, tls))
    },
    onDrain () {}
  }, list, body === null)
  if (body !== null) conn.write(s, body, true)
  return () => {
    conn.destroy()
    socket.destroy()
  }
}

// The probes' sessions' owner: they take no stream from a backend, and need nothing else.
const PROBES = {
  onStream (conn, s) { conn.reset(s) },
  onSettings () {},
  onGoaway () {},
  onStreamClosed () {},
  onPingAck () {},
  onClose () {}
}
const EMPTY = Buffer.alloc(0)

// The value of field `name` in a head's fields, or undefined.
function fieldOf (fields, name) {
  for (let i = 0; i < fields.length; i += 3) if (fields[i + 1] === name) return fields[i + 2]
  return undefined
}

// { type: 'http', path } over HTTP/2 (--backend-protocol h2): GET, healthy on 2xx or 3xx.
function probeHttp2 (backend, { path, host: hostHeader, tls = null }, timeout, finish) {
  const host = hostHeader || backend.hostHeader
  const list = [':method', 'GET', ':scheme', tls === null ? 'http' : 'https', ':authority', host, ':path', path,
    'user-agent', `lila/${VERSION} health check`]
  return h2Request(backend, tls, list, null, {
    answer: head => finish(head.status >= 200 && head.status < 400, `http ${path} ${head.status}`),
    fail: reason => finish(false, `http ${path} ${reason}`),
    short: () => finish(null, 'out of file descriptors')
  })
}

// { type: 'grpc', service }: the standard grpc.health.v1.Health/Check call over HTTP/2
// (h2c, or h2 by ALPN with --backend-tls), one session, one stream, closed after;
// healthy when it answers SERVING. The reason says what it answered: `grpc SERVING`,
// `grpc NOT_SERVING`, `grpc-status 12` (no health service), `grpc http 404`.
function probeGrpc (backend, { service, host: hostHeader, tls = null }, timeout, finish) {
  const { HEALTH_PATH, healthRequest, healthStatus } = require('../wire/grpc-health')
  const host = hostHeader || (backend.name === null ? backend.hostHeader : `${backend.name}:${backend.port}`)
  const list = [':method', 'POST', ':scheme', tls === null ? 'http' : 'https', ':authority', host,
    ':path', HEALTH_PATH, 'content-type', 'application/grpc', 'te', 'trailers',
    'user-agent', `lila/${VERSION} health check`]
  return h2Request(backend, tls, list, healthRequest(service), {
    // The status: in the trailers, or in the head of a trailers-only answer.
    answer (head, body, trailers) {
      if (head.status !== 200) return finish(false, `grpc http ${head.status}`)
      const code = trailers === null ? undefined : fieldOf(trailers, 'grpc-status')
      if (code === undefined) return finish(false, 'grpc answer without a grpc-status')
      if (code !== '0') return finish(false, `grpc-status ${code}`)
      const status = healthStatus(body)
      if (status === null) return finish(false, 'grpc answer that is not a HealthCheckResponse')
      finish(status === 'SERVING', `grpc ${status}`)
    },
    fail: reason => finish(false, `grpc ${reason}`),
    short: () => finish(null, 'out of file descriptors')
  })
}

module.exports = { HealthChecker, probe }
