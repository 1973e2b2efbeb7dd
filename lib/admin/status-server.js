'use strict'

const http = require('http')
const net = require('net')
const crypto = require('crypto')
const { listen, descriptorOf } = require('../net/bind')
const { RuntimeError, UsageError, ControlError, reasonOf } = require('../errors')
const { specAddress } = require('../address')
const { renderPage } = require('./status-page')
const { History } = require('./history')
const { renderMetrics, CONTENT_TYPE: METRICS_TYPE } = require('./metrics')
const { processStats } = require('./process-stats')
const { silentLogger, throttled } = require('../log')
const { BasicAuth } = require('../proxy/edge/basic-auth')
const VERSION = require('../version')

// The admin listener (--status-port): read-only pages for people and scrapers, and
// POST endpoints that change backends at run time. It knows the balancer only through
// what it is given, so the same server works over one process or, in the cluster
// primary, over snapshots gathered from workers:
//
//   new StatusServer({ stats, control, parseBackend, parseFault, host, port, token, passwords, log,
//                      historyEvery })   (createStatusServer(options), the API's name for it)
//     stats()    -> a snapshot as a Balancer's stats() returns it (or a promise of one)
//     control    -> { drain, enable, disable, weight, add, remove } as control.js makes
//                   them: each takes a plain request object and returns a promise of
//                   { message }, or rejects with a ControlError carrying the status
//     parseBackend(text) -> spec, or throws a UsageError: the command line's backend
//                   syntax (config/parsers.js), given so that the admin side imports
//                   no parser of its own
//     parseFault(pairs, subject) -> a fault's settings, or throws a UsageError: the
//                   query of POST /backends/ADDRESS/fault (parseFaultSettings)
//     passwords  -> --status-basic-auth: an htpasswd file (proxy/edge/passwords.js
//                   parsePasswords), or null
//   .listen(given) -> promise of the page's URL; logs "status on http://HOST:PORT/status";
//                  from then on a History (history.js) samples stats() for the charts.
//                  `given`: a socket the process was given to listen on (bind.js), or null
//   .setPasswords(passwords)  the file read again (a reload)
//   .close({ handOver }) -> promise; open admin connections are cut (handing over to
//                  another process: the requests under way finish first)
//   .descriptor -> the listening socket's, to hand it over (-1 when not listening)
//
// With --status-basic-auth every request, pages and changes alike, needs a user of the
// file (401 otherwise, its password checked once and remembered as edge/basic-auth.js
// does); a user who got in may make changes, as a --status-token would let them.
// Changes (POST, DELETE) are refused with 403 unless a --status-token was given and
// the request carries it (Authorization: Bearer TOKEN), or no token was given and the
// listener is bound to loopback. Requests from a web page elsewhere are refused
// either way (Origin), and on loopback without a token the Host must name loopback
// too, so a page on another site cannot drive lila through the browser.

const ACTIONS = ['drain', 'enable', 'disable', 'weight', 'fault']
const REALM = 'lila status'
const MAX_BODY = 4096
const READ = 'GET, HEAD'

class StatusServer {
  constructor ({
    stats, control, parseBackend, parseFault = noFaults, host = '127.0.0.1', port, token = null, passwords = null,
    log = silentLogger, version = VERSION, now = Date.now, historyEvery = undefined
  }) {
    Object.assign(this, { stats, control, parseBackend, parseFault, host, port, log, version, now })
    this.history = new History({ stats, every: historyEvery, now })
    this.tokenDigest = token === null ? null : digest(token)
    this.auth = null // --status-basic-auth's BasicAuth, or null
    this.setPasswords(passwords)
    this.sayRefused = throttled(message => log.info(message))
    this.loopback = false // bound to a loopback address: changes need no token there
    this.url = null // once listening
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(err => {
        log.error(`status: ${req.method} ${req.url}: ${err && err.message}`)
        if (!res.headersSent) send(res, 500, `internal error: ${err && err.message}`)
        else res.destroy()
      })
    })
    this.server.requestTimeout = 10000
    this.server.headersTimeout = 10000
  }

  // The file read again (a reload), or null.
  setPasswords (file) {
    this.auth = file === null ? null : new BasicAuth(file, { realm: REALM })
  }

  async handle (req, res) {
    const { auth, stats, control, parseBackend, parseFault, version, now, history } = this
    let target
    try {
      target = new URL(req.url, 'http://status.invalid')
    } catch {
      return send(res, 400, `invalid request target ${JSON.stringify(req.url)}`)
    }
    const path = target.pathname
    const query = target.searchParams
    if (auth !== null) {
      let verdict = auth.check(req.headers.authorization)
      if (typeof verdict !== 'string') verdict = await verdict
      if (verdict === 'busy') {
        return send(res, 503, 'too many password checks under way; try again', { 'Retry-After': '1' }, true)
      }
      if (verdict !== 'ok') {
        if (verdict === 'bad') this.sayRefused(`status: refused ${req.socket.remoteAddress}: wrong user or password`)
        return send(res, 401, 'this admin listener needs a user of its --status-basic-auth file', {
          'WWW-Authenticate': auth.challenge
        }, true)
      }
    }

    if (path === '/' || path === '/status' || path === '/status.json' || path === '/metrics') {
      if (req.method !== 'GET' && req.method !== 'HEAD') return notAllowed(res, req.method, path, READ)
      if (path === '/') return send(res, 302, 'see /status', { Location: '/status' })
      const snapshot = await stats()
      if (path === '/status') {
        return send(res, 200, renderPage(snapshot, { version, now: now(), history: history.series() }), {
          'Content-Type': 'text/html; charset=utf-8',
          'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'"
        })
      }
      if (path === '/metrics') {
        const metrics = renderMetrics(snapshot, { version, process: processStats() })
        return send(res, 200, metrics, { 'Content-Type': METRICS_TYPE })
      }
      const json = JSON.stringify({ version, time: now(), ...snapshot }, null, 2) + '\n'
      return send(res, 200, json, { 'Content-Type': 'application/json' })
    }

    // lila run: POST /app/restart[?listener=NAME], a rolling restart of the app
    if (path === '/app/restart') {
      return this.change(req, res, path, 'POST', query, listener => control.restartApp({ listener }))
    }
    if (path === '/maintenance' || path === '/canary') return this.changePool(req, res, path, query)

    // /backends, /backends/ADDRESS, /backends/ADDRESS/ACTION
    const parts = path.split('/')
    if (
      parts[1] !== 'backends' ||
      parts.length > 4 ||
      (parts.length === 4 && !ACTIONS.includes(parts[3])) ||
      (parts.length >= 3 && parts[2] === '')
    ) {
      const expected = '/status, /status.json, /metrics, /maintenance, /canary or ' +
        `/backends/ADDRESS/{${ACTIONS.join(',')}}`
      return send(res, 404, `no such page ${JSON.stringify(path)}: expected ${expected}`, {}, true)
    }
    const allowed = parts[3] === 'fault' ? 'POST, DELETE' : parts.length === 2 || parts.length === 4 ? 'POST' : 'DELETE'
    return this.change(req, res, path, allowed, query, async (listener, route) => {
      if (parts.length === 2) {
        const text = query.get('address') || await readAddress(req)
        return control.add({ spec: backendSpec(parseBackend, text, 'backend'), listener, route })
      }
      let address
      try {
        address = decodeURIComponent(parts[2])
      } catch {
        throw new ControlError(400, `invalid backend address ${JSON.stringify(parts[2])}: expected host:port`)
      }
      const backend = normalise(parseBackend, address)
      if (parts.length === 3) return control.remove({ backend, listener, route })
      if (parts[3] === 'fault' && req.method === 'DELETE') return control.clearFault({ backend, listener, route })
      if (parts[3] === 'fault') {
        return control.fault({ backend, listener, route, fault: faultOf(parseFault, query, target.search) })
      }
      if (parts[3] === 'weight') {
        return control.weight({ backend, listener, route, value: weightOf(query.get('value')) })
      }
      return control[parts[3]]({ backend, listener, route })
    })
  }

  // POST and DELETE /maintenance (?listener=, ?route=, ?page=FILE), POST /canary
  // (?share=PCT, ?listener=, ?route=): what a pool answers, not a backend.
  changePool (req, res, path, query) {
    const { control } = this
    const allowed = path === '/maintenance' ? 'POST, DELETE' : 'POST'
    return this.change(req, res, path, allowed, query, (listener, route) => {
      if (path === '/canary') return control.canary({ listener, route, share: shareOf(query.get('share')) })
      if (req.method === 'DELETE') return control.endMaintenance({ listener, route })
      return control.maintenance({ listener, route, page: query.get('page') || null })
    })
  }

  // A change: its method allowed and its asker (refuse), then `perform(listener, route)`
  // (?listener=, ?route=); answered its line, or a ControlError's status and line.
  async change (req, res, path, allowed, query, perform) {
    if (!allowed.split(', ').includes(req.method)) return notAllowed(res, req.method, path, allowed)
    const refusal = this.refuse(req)
    if (refusal !== null) return send(res, 403, refusal, {}, true)
    let result
    try {
      result = await perform(query.get('listener'), query.get('route') || undefined)
    } catch (err) {
      if (err instanceof ControlError) return send(res, err.status, err.message, {}, true)
      throw err
    }
    send(res, 200, result.message, {}, true)
  }

  // null when the request may change things, else why not.
  refuse (req) {
    const origin = req.headers.origin
    if (origin !== undefined && origin !== `http://${req.headers.host}`) {
      return `refused: a change requested from the web page of ${origin}`
    }
    if (this.auth !== null) return null // a user of --status-basic-auth's file: in
    if (this.tokenDigest !== null) {
      const match = /^Bearer +(\S+) *$/i.exec(req.headers.authorization || '')
      if (match === null) return 'refused: changes need the --status-token, sent as "Authorization: Bearer TOKEN"'
      if (!crypto.timingSafeEqual(digest(match[1]), this.tokenDigest)) {
        return 'refused: wrong token in the Authorization header'
      }
      return null
    }
    if (!this.loopback) {
      return `refused: changes need --status-token when the status listener is not on loopback (it is on ${this.url})`
    }
    if (!isLoopbackHost(req.headers.host || '')) {
      return `refused: Host ${JSON.stringify(req.headers.host || '')} is not a loopback name`
    }
    return null
  }

  async listen (given = null) {
    const { server, host, port, log } = this
    let address
    try {
      address = await listen(server, { host, port }, given)
    } catch (err) {
      // "cannot listen on 127.0.0.1:9000 (--status-port): address already in use"
      if (!(err instanceof RuntimeError)) throw err
      throw new RuntimeError(err.message.replace(/^(cannot listen on \S+):/, '$1 (--status-port):'), err.cause)
    }
    // Later errors (accept failing for lack of file descriptors) are said; the server
    // keeps listening.
    const say = throttled(message => log.error(message))
    server.on('error', err => say(`status listener: accept failed: ${reasonOf(err)}`))
    this.loopback = isLoopbackAddress(server.address().address)
    this.url = `http://${address}/status`
    log.always(`status on ${this.url}`) // at every level: scripts read the port from it
    this.history.start()
    return this.url
  }

  close ({ handOver = false } = {}) {
    this.history.stop()
    return new Promise(resolve => {
      this.server.close(() => resolve())
      if (handOver) this.server.closeIdleConnections()
      else this.server.closeAllConnections()
    })
  }

  get descriptor () {
    return descriptorOf(this.server)
  }
}

const createStatusServer = options => new StatusServer(options)

function send (res, status, body, headers = {}, line = false) {
  const text = line ? `${body}\n` : body
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    ...headers
  })
  res.end(text)
}

function notAllowed (res, method, path, allow) {
  const message = `method ${method} not allowed on ${path}: expected ${allow.replace(', ', ' or ')}`
  send(res, 405, message, { Allow: allow }, true)
}

// The body of POST /backends: "host:port[,weight=N]..." as plain text, or a form field
// address=...; at most 4 KiB.
function readAddress (req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    req.on('data', chunk => {
      size += chunk.length
      if (size <= MAX_BODY) chunks.push(chunk)
      else reject(new ControlError(413, `request body over ${MAX_BODY} bytes: expected one backend`))
    })
    req.on('error', reject)
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8').trim()
      const form = /^address=/.test(text) ? new URLSearchParams(text).get('address') : text
      resolve(form)
    })
  })
}

// The backend syntax of the command line -> spec; bad input -> 400 with lila's message.
function backendSpec (parseBackend, text, what) {
  if (!text) throw new ControlError(400, `no ${what} given: expected host:port[,weight=N]... in the body or ?address=`)
  try {
    return parseBackend(text)
  } catch (err) {
    if (err instanceof UsageError) throw new ControlError(400, err.message)
    throw err
  }
}

// "127.0.0.1:80", ":80", "[::1]:80" or "unix:/run/app.sock" (its slashes written %2F in a
// path) -> the address as backends show it. Settings
// (",weight=2") have no place in a path.
function normalise (parseBackend, text) {
  if (text.includes(',')) {
    throw new ControlError(400, `invalid backend address ${JSON.stringify(text)}: expected host:port without settings`)
  }
  const spec = backendSpec(parseBackend, text, 'backend address')
  return specAddress(spec)
}

function weightOf (text) {
  if (text === null || !/^\d+$/.test(text) || Number(text) > 1000) {
    const given = JSON.stringify(text === null ? '' : text)
    throw new ControlError(400, `invalid weight ${given}: expected ?value=N with N a whole number from 0 to 1000`)
  }
  return Number(text)
}

// ?share=10 or 10% (POST /canary) -> 10; 0 to 100, decimals allowed.
function shareOf (text) {
  const match = text === null ? null : /^(\d{1,3}(?:\.\d+)?)%?$/.exec(text)
  if (match === null || Number(match[1]) > 100) {
    const given = JSON.stringify(text === null ? '' : text)
    throw new ControlError(400, `invalid share ${given}: expected ?share=PCT with PCT from 0 to 100, e.g. 20`)
  }
  return Number(match[1])
}

// The query of POST /backends/ADDRESS/fault (?error=503&for=10s; ?listener= aside) ->
// a fault's settings; bad ones -> 400 with the parser's message.
function faultOf (parseFault, query, search) {
  const pairs = [...query].filter(([key]) => key !== 'listener')
  try {
    return parseFault(pairs, `the query ${JSON.stringify(search)}`)
  } catch (err) {
    if (err instanceof UsageError) throw new ControlError(400, err.message)
    throw err
  }
}

function noFaults () {
  throw new UsageError('faults are not available here')
}

function digest (text) {
  return crypto.createHash('sha256').update(String(text)).digest()
}

function isLoopbackAddress (address) {
  if (address.startsWith('::ffff:')) address = address.slice(7)
  return address === '::1' || (net.isIPv4(address) && address.startsWith('127.'))
}

// A Host header naming this machine's loopback: localhost, 127.x.y.z or [::1], with a port.
function isLoopbackHost (hostHeader) {
  const host = hostHeader.startsWith('[') ? hostHeader.slice(1, hostHeader.indexOf(']')) : hostHeader.split(':')[0]
  return host.toLowerCase() === 'localhost' || isLoopbackAddress(host)
}

module.exports = { createStatusServer, isLoopbackHost }
