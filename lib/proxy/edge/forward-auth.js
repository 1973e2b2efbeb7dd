'use strict'

// --forward-auth URL: before a request goes to a backend, lila asks an auth service (a
// GET to URL, with the client's headers and X-Forwarded-Method, -Proto, -Host, -Uri and
// -For, never the body), as nginx's auth_request, Traefik's forwardAuth and Caddy's
// forward_auth do. A 2xx lets the request through, with the headers --forward-auth-copy
// names taken from its answer; any other answer goes back to the client as it came
// (status, Location, WWW-Authenticate, Set-Cookie, Content-Type, body); a service that
// is down, slower than --forward-auth-timeout or answers what cannot be read is a 503
// with a line saying why, never a pass. With --forward-auth-cache, a 2xx is remembered
// per Cookie and Authorization for that long.
//
// Node's http and https clients, with a keep-alive Agent per URL, as the mirror's
// (http/mirror.js): the question is a plain GET to one service, off the balancing path
// (no backend's counts, health or queue), and lila's own pools are made for Backends
// and the exchange's legs. One AuthService per URL lives on the listener across
// reloads (AuthServices), so its connections and cache survive them.
//
//   service.ask(head, proto, clientAddress) -> a Grant, a Refusal, or a Promise of one
//     Grant    { pass: Map lower-case name -> value }: the headers to copy
//     Refusal  { status, fields: [[name, value]], reason, detail, page } (rules.js's
//              shape; `page` the body as edge/error-pages.js Pages are: type, render)

const http = require('http')
const crypto = require('crypto')

// Of the auth service's answer to anything but a 2xx, what goes back to the client.
const PASSED_ON = ['location', 'www-authenticate', 'set-cookie']
// A refusal's body is held whole before it goes back: at most this much.
const MAX_BODY = 64 * 1024
// Remembered 2xx answers, at most (the oldest go first).
const MAX_CACHED = 10000
// Connections to one auth service, at most; more requests wait for one (their timeout runs).
const MAX_SOCKETS = 256
// The client's fields that are not the auth service's: the connection's, the body's
// (there is none), and those lila sets itself.
const NOT_SENT = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'content-length', 'expect', 'host', 'x-forwarded-method', 'x-forwarded-proto', 'x-forwarded-host',
  'x-forwarded-uri', 'x-forwarded-for'
])
const NO_GRANT = Object.freeze({ pass: new Map() })

class AuthService {
  constructor (url, stats) {
    this.url = new URL(url)
    this.stats = stats
    const secure = this.url.protocol === 'https:'
    this.client = secure ? require('https') : http // https only when used (ARCHITECTURE.md)
    this.agent = new this.client.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS, scheduling: 'lifo' })
    this.timeout = 0
    this.copy = []
    this.cacheMs = 0
    this.cache = new Map() // HMAC of the credentials -> { grant, until }
    this.key = crypto.randomBytes(32)
  }

  // --forward-auth-timeout, --forward-auth-copy (lower-case names), --forward-auth-cache.
  configure ({ timeout, copy, cacheMs }) {
    if (copy.join() !== this.copy.join() || cacheMs === 0) this.cache.clear()
    this.timeout = timeout
    this.copy = copy
    this.cacheMs = cacheMs
  }

  ask (head, proto, clientAddress) {
    const key = this.cacheMs > 0 ? this.cacheKey(head.fields) : null
    if (key !== null) {
      const hit = this.cache.get(key)
      if (hit !== undefined && hit.until > Date.now()) {
        this.stats.forwardAuth('cached')
        return hit.grant
      }
      if (hit !== undefined) this.cache.delete(key)
    }
    this.stats.forwardAuth('asked')
    return new Promise(resolve => this.request(head, proto, clientAddress, resolve, key, false))
  }

  // One GET; `again`: the second, after a reused connection was found closed.
  request (head, proto, clientAddress, resolve, key, again) {
    const timer = setTimeout(() => req.destroy(new AuthTimeout()), this.timeout)
    let settled = false
    const settle = verdict => {
      clearTimeout(timer)
      if (settled) return
      settled = true
      resolve(verdict)
    }
    let req
    try {
      req = this.client.request(this.url, {
        method: 'GET', agent: this.agent, headers: this.headersFor(head, proto, clientAddress)
      })
    } catch (err) { // a header Node will not send
      return settle(this.failed(`could not be asked (${err.message})`))
    }
    req.on('response', res => this.answered(res, settle, key))
    req.on('error', err => {
      if (!again && !settled && req.reusedSocket && err.code === 'ECONNRESET') {
        settled = true
        clearTimeout(timer)
        return this.request(head, proto, clientAddress, resolve, key, true)
      }
      const why = err instanceof AuthTimeout
        ? `did not answer within --forward-auth-timeout (${this.timeout}ms)`
        : err.code === 'ECONNREFUSED' ? 'refused the connection' : `failed (${err.code || err.message})`
      settle(this.failed(why))
    })
    req.end()
  }

  answered (res, settle, key) {
    const status = res.statusCode
    if (status >= 200 && status < 300) {
      res.resume() // the body is not wanted; read off so that the connection serves again
      const grant = this.grantOf(res.headers)
      if (key !== null) this.remember(key, grant)
      this.stats.forwardAuth('allowed')
      return settle(grant)
    }
    const chunks = []
    let size = 0
    res.on('data', chunk => {
      size += chunk.length
      if (size <= MAX_BODY) chunks.push(chunk)
      else res.destroy(new Error(`a body over ${MAX_BODY} bytes`))
    })
    res.on('error', err => settle(this.failed(`answered ${status} with ${err.message}`)))
    res.on('end', () => settle(this.refusal(res, Buffer.concat(chunks))))
  }

  grantOf (headers) {
    if (this.copy.length === 0) return NO_GRANT
    const pass = new Map()
    for (const name of this.copy) {
      const value = headers[name]
      if (value !== undefined) pass.set(name, Array.isArray(value) ? value.join(', ') : value)
    }
    return { pass }
  }

  // The auth service's answer, for the client as it came.
  refusal (res, body) {
    const fields = []
    for (const name of PASSED_ON) {
      const value = res.headers[name]
      if (value === undefined) continue
      for (const v of Array.isArray(value) ? value : [value]) fields.push([name, v])
    }
    const type = res.headers['content-type'] === undefined ? null : res.headers['content-type']
    const detail = `the auth service answered ${res.statusCode}`
    return { status: res.statusCode, fields, reason: 'forward-auth', detail, page: { type, render: () => body } }
  }

  failed (why) {
    const detail = `the auth service ${this.url.href} ${why}`
    return { status: 503, fields: [], reason: 'forward-auth-failed', detail, page: undefined }
  }

  // The headers of the question: the client's (but for the connection's and the
  // body's), the auth service's Host, and where the request was going.
  headersFor (head, proto, clientAddress) {
    const out = ['Host', this.url.host]
    const { fields } = head
    for (let i = 0; i < fields.length; i += 3) {
      if (!NOT_SENT.has(fields[i + 1])) out.push(fields[i], fields[i + 2])
    }
    out.push('X-Forwarded-Method', head.method, 'X-Forwarded-Proto', proto,
      'X-Forwarded-Host', head.host || '', 'X-Forwarded-Uri', uriOf(head), 'X-Forwarded-For', clientAddress)
    return out
  }

  // A request's credentials as the cache knows them (an HMAC under a key of this
  // process, never in clear), or null: no Cookie and no Authorization, nothing to key on.
  cacheKey (fields) {
    let authorization = ''
    let cookie = ''
    for (let i = 1; i < fields.length; i += 3) {
      if (fields[i] === 'authorization') authorization += `${fields[i + 1]}\n`
      else if (fields[i] === 'cookie') cookie += `${fields[i + 1]}\n`
    }
    if (authorization === '' && cookie === '') return null
    return crypto.createHmac('sha256', this.key).update(authorization).update('\0').update(cookie).digest('base64')
  }

  remember (key, grant) {
    if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value)
    this.cache.set(key, { grant, until: Date.now() + this.cacheMs })
  }

  close () {
    this.agent.destroy()
    this.cache.clear()
  }
}

class AuthTimeout extends Error {}

// The request's path and query (its target in origin form: an absolute form's too).
function uriOf (head) {
  const { target } = head
  if (target.charCodeAt(0) === 47) return target // '/'
  const query = target.indexOf('?')
  return query === -1 ? head.path : head.path + target.slice(query)
}

// A listener's auth services, by URL, kept across reloads: one for each --forward-auth
// (the listener's, its routes').
class AuthServices {
  constructor (stats) {
    this.stats = stats
    this.byUrl = new Map()
  }

  // The services a config uses, configured; the others closed.
  configure (config) {
    const urls = new Set([config.forwardAuth, ...config.routes.map(route => route.forwardAuth)])
    urls.delete(null)
    for (const [url, service] of this.byUrl) {
      if (urls.has(url)) continue
      service.close()
      this.byUrl.delete(url)
    }
    const settings = {
      timeout: config.forwardAuthTimeout,
      copy: config.forwardAuthCopy.map(name => name.toLowerCase()),
      cacheMs: config.forwardAuthCache
    }
    for (const url of urls) {
      if (!this.byUrl.has(url)) this.byUrl.set(url, new AuthService(url, this.stats))
      this.byUrl.get(url).configure(settings)
    }
  }

  get (url) {
    return url === null ? null : this.byUrl.get(url)
  }

  close () {
    for (const service of this.byUrl.values()) service.close()
    this.byUrl.clear()
  }
}

module.exports = { AuthServices }
