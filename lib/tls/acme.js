'use strict'

// An ACME client (RFC 8555), the part a server needs: an account for its key, an order
// for some names, their authorizations proven by HTTP-01 or TLS-ALPN-01 (RFC 8737), the
// certificate downloaded, and the renewal information a server may offer (ARI, RFC
// 9773). Requests go over Node's https, trusting the system's CAs and --acme-ca; every
// POST is a JWS (wire/jose.js) with a fresh nonce, and a badNonce is retried with the
// one the error brought. What goes wrong is an AcmeError whose one-line message names
// what the server answered (its problem document's type and detail) or why it could
// not be reached, and when the server said to come back (retryAfter, ms).
//
//   const client = new AcmeClient({ directoryUrl, ca, accountKey, email })
//   const { cert, key } = await obtainCertificate(client, names, { types, present, remove })

const https = require('https')
const tls = require('tls')
const crypto = require('crypto')
const net = require('net')
const jose = require('../wire/jose')
const x509 = require('../wire/x509')
const { AcmeError, reasonOf } = require('../errors')
const VERSION = require('../version')

const REQUEST_TIMEOUT_MS = 30000
const POLL_LIMIT_MS = 120000 // an authorization or an order that stays pending this long: give up
const MAX_BODY = 1024 * 1024
const PROBLEM = 'urn:ietf:params:acme:error:'

class AcmeClient {
  // `ca`: PEM of CAs to trust beyond the system's (--acme-ca), or null. `kid`: the
  // account's URL if known (saved from an earlier start).
  constructor ({ directoryUrl, ca = null, accountKey, email = null, kid = null, sleep = defaultSleep }) {
    this.directoryUrl = directoryUrl
    this.agent = new https.Agent({
      keepAlive: true,
      maxSockets: 4,
      ca: ca === null ? undefined : [...tls.rootCertificates, ca]
    })
    this.accountKey = accountKey
    this.jwk = jose.jwkOf(accountKey)
    this.thumbprint = jose.thumbprint(this.jwk)
    this.email = email
    this.kid = kid
    this.nonces = []
    this.dir = null
    this.sleep = sleep
  }

  close () {
    this.agent.destroy()
  }

  // The directory: the URLs of the server's resources (RFC 8555 7.1.1).
  async directory () {
    if (this.dir !== null) return this.dir
    const res = await this.fetch('GET', this.directoryUrl)
    const dir = res.json()
    if (typeof dir.newOrder !== 'string' || typeof dir.newAccount !== 'string' || typeof dir.newNonce !== 'string') {
      throw new AcmeError(`${this.directoryUrl} is not an ACME directory (no newOrder, newAccount, newNonce)`)
    }
    this.dir = dir
    return dir
  }

  // The account for our key: made, or found again (a server answers newAccount for a
  // known key with the account it has). -> its URL, the "kid" of later requests.
  async account () {
    if (this.kid !== null) return this.kid
    const dir = await this.directory()
    const payload = { termsOfServiceAgreed: true }
    if (this.email !== null) payload.contact = [`mailto:${this.email}`]
    const res = await this.post(dir.newAccount, payload, { jwk: true })
    const kid = res.headers.location
    if (typeof kid !== 'string') throw new AcmeError('the ACME server made an account but gave no URL for it')
    this.kid = kid
    return kid
  }

  async newNonce () {
    if (this.nonces.length > 0) return this.nonces.pop()
    const dir = await this.directory()
    const res = await this.fetch('HEAD', dir.newNonce)
    const nonce = res.headers['replay-nonce']
    if (typeof nonce !== 'string') throw new AcmeError('the ACME server gave no nonce')
    return nonce
  }

  // A signed POST (payload null: POST-as-GET). A badNonce is tried again, with the
  // nonce the error came with, up to three times.
  async post (url, payload, { jwk = false, accept = 'application/json' } = {}) {
    for (let tries = 1; ; tries++) {
      const header = { nonce: await this.newNonce(), url }
      if (jwk) header.jwk = this.jwk
      else header.kid = await this.account()
      const body = JSON.stringify(jose.sign(this.accountKey, header, payload))
      try {
        return await this.fetch('POST', url, body, accept)
      } catch (err) {
        if (!(err instanceof AcmeError) || err.type !== `${PROBLEM}badNonce` || tries === 3) throw err
      }
    }
  }

  // POST-as-GET a resource: its JSON.
  async get (url) {
    return (await this.post(url, null)).json()
  }

  // One HTTP request: { status, headers, body, json() }. A problem document, any other
  // status of 400 or more, or a failure to connect is an AcmeError.
  fetch (method, url, body = null, accept = 'application/json') {
    return new Promise((resolve, reject) => {
      const headers = { 'user-agent': `lila/${VERSION}`, accept }
      if (body !== null) {
        headers['content-type'] = 'application/jose+json'
        headers['content-length'] = Buffer.byteLength(body)
      }
      let req
      try {
        req = https.request(url, { method, headers, agent: this.agent, timeout: REQUEST_TIMEOUT_MS })
      } catch (err) {
        return reject(new AcmeError(`cannot ask ${url}: ${err.message}`))
      }
      req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })))
      req.on('error', err => reject(new AcmeError(`cannot reach the ACME server at ${origin(url)}: ${words(err)}`)))
      req.on('response', res => {
        const chunks = []
        let size = 0
        res.on('data', chunk => {
          size += chunk.length
          if (size > MAX_BODY) req.destroy(new Error('answer too large'))
          else chunks.push(chunk)
        })
        res.on('error', err => reject(new AcmeError(`the ACME server at ${origin(url)} broke off: ${words(err)}`)))
        res.on('end', () => {
          const nonce = res.headers['replay-nonce']
          if (typeof nonce === 'string') this.nonces.push(nonce)
          const answer = {
            status: res.statusCode,
            headers: res.headers,
            body: Buffer.concat(chunks),
            json () {
              try {
                return JSON.parse(this.body)
              } catch {
                throw new AcmeError(`the ACME server answered ${url} with something other than JSON`)
              }
            }
          }
          if (res.statusCode < 400) return resolve(answer)
          reject(problemOf(answer, url))
        })
      })
      req.end(body === null ? undefined : body)
    })
  }

  // The server's renewal window for a certificate (ARI), when it offers any:
  // { start, end (ms), retryAfter (ms) } or null.
  async renewalInfo (certDer) {
    const dir = await this.directory()
    if (typeof dir.renewalInfo !== 'string') return null
    const res = await this.fetch('GET', `${dir.renewalInfo.replace(/\/$/, '')}/${certId(certDer)}`)
    const window = res.json().suggestedWindow || {}
    const start = Date.parse(window.start)
    const end = Date.parse(window.end)
    if (!Number.isFinite(start) || !Number.isFinite(end) || end < start) {
      throw new AcmeError('the ACME server\'s renewal information has no valid suggestedWindow')
    }
    return { start, end, retryAfter: retryAfterOf(res.headers['retry-after']) }
  }

  // Poll `url` (POST-as-GET) until its status is none of `waiting`: the resource.
  async poll (url, waiting, what) {
    const deadline = Date.now() + POLL_LIMIT_MS
    let delay = 500
    for (;;) {
      const res = await this.post(url, null)
      const resource = res.json()
      if (!waiting.includes(resource.status)) return resource
      if (Date.now() > deadline) throw new AcmeError(`${what} still ${resource.status} after ${POLL_LIMIT_MS / 1000}s`)
      const asked = retryAfterOf(res.headers['retry-after'])
      await this.sleep(Math.min(asked > 0 ? asked : delay, 10000))
      delay = Math.min(delay * 2, 5000)
    }
  }
}

// A problem document (RFC 7807) -> an AcmeError saying what the server answered.
function problemOf (answer, url) {
  let problem = null
  try {
    problem = JSON.parse(answer.body)
  } catch {}
  const retryAfter = retryAfterOf(answer.headers['retry-after'])
  if (problem === null || typeof problem !== 'object') {
    return new AcmeError(`the ACME server answered ${answer.status} to ${url}`, { status: answer.status, retryAfter })
  }
  const type = typeof problem.type === 'string' ? problem.type : null
  return new AcmeError(`the ACME server answered ${answer.status} ${problemWords(problem)}`, {
    type, status: answer.status, retryAfter
  })
}

// "rateLimited: too many certificates (5) already issued for this exact set of domains"
function problemWords (problem) {
  const type = typeof problem.type === 'string' ? problem.type.replace(PROBLEM, '') : 'error'
  const detail = typeof problem.detail === 'string' ? oneLine(problem.detail) : ''
  const sub = Array.isArray(problem.subproblems)
    ? problem.subproblems.map(p => `; ${p.identifier ? `${p.identifier.value}: ` : ''}${problemWords(p)}`).join('')
    : ''
  return `${type}${detail ? `: ${detail}` : ''}${sub}`
}

const oneLine = text => String(text).replace(/\s+/g, ' ').trim().slice(0, 300)
const origin = url => { try { return new URL(url).origin } catch { return url } }
const words = err => err.code && err.code.startsWith('ERR_') ? err.message : reasonOf(err)
const defaultSleep = ms => new Promise(resolve => setTimeout(resolve, ms).unref())

// Retry-After: seconds or an HTTP date -> ms from now (0: none).
function retryAfterOf (value) {
  if (typeof value !== 'string') return 0
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000
  const at = Date.parse(value)
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : 0
}

// ARI's certificate identifier: base64url(authority key ID) "." base64url(serial).
function certId (certDer) {
  const { authorityKeyId, serial } = x509.certificateFacts(certDer)
  if (authorityKeyId === null) throw new AcmeError('the certificate has no authority key identifier: no ARI for it')
  return `${jose.base64url(authorityKeyId)}.${jose.base64url(serial)}`
}

// An identifier as ACME names it: a DNS name, or an IP address (RFC 8738).
const identifierOf = name => net.isIP(name) ? { type: 'ip', value: name } : { type: 'dns', value: name }

// The name a TLS-ALPN-01 validation asks for (SNI) for an identifier: a DNS name as it
// is, an IP address as its reverse-DNS name (RFC 8738 6).
function validationName (identifier) {
  if (identifier.type !== 'ip') return identifier.value.toLowerCase()
  if (net.isIPv4(identifier.value)) return `${identifier.value.split('.').reverse().join('.')}.in-addr.arpa`
  const hex = x509.ipv6Hex(identifier.value)
  return `${[...hex].reverse().join('.')}.ip6.arpa`
}

// A certificate for `names`, the whole way: account, order, authorizations, CSR with a
// new key, download. `types`: the challenge types to use, the first the server offers
// wins; `present(challenge)` makes lila answer one ({ type, identifier, name, token,
// keyAuthorization }) and resolves once it does (every worker); `remove(challenge)` stops.
// `replaces`: the ARI certID of the certificate this one renews, or null.
// -> { cert (PEM chain), key (PEM) }
async function obtainCertificate (client, names, { types, present, remove, replaces = null, log = null }) {
  const dir = await client.directory()
  await client.account()
  const payload = { identifiers: names.map(identifierOf) }
  if (replaces !== null && typeof dir.renewalInfo === 'string') payload.replaces = replaces
  const created = await client.post(dir.newOrder, payload)
  const orderUrl = created.headers.location
  let order = created.json()
  if (typeof orderUrl !== 'string') throw new AcmeError('the ACME server made an order but gave no URL for it')
  for (const url of order.authorizations || []) {
    const authz = await client.get(url)
    if (authz.status === 'valid') continue
    if (authz.status !== 'pending') {
      throw new AcmeError(`the authorization for ${authz.identifier && authz.identifier.value} is ${authz.status}`)
    }
    await authorize(client, url, authz, { types, present, remove, log })
  }
  order = await client.poll(orderUrl, ['pending'], 'the order')
  if (order.status !== 'ready') throw new AcmeError(`the order is ${order.status}${problemAfter(order.error)}`)
  const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const csr = x509.certificateRequest({ names, key: privateKey })
  await client.post(order.finalize, { csr: jose.base64url(csr) })
  order = await client.poll(orderUrl, ['ready', 'processing'], 'the order')
  if (order.status !== 'valid' || typeof order.certificate !== 'string') {
    throw new AcmeError(`the order is ${order.status} after finalizing${problemAfter(order.error)}`)
  }
  const res = await client.post(order.certificate, null, { accept: 'application/pem-certificate-chain' })
  const cert = res.body.toString('utf8')
  if (x509.fromPem(cert).length === 0) throw new AcmeError('the ACME server\'s certificate is not PEM')
  return { cert, key: privateKey.export({ type: 'pkcs8', format: 'pem' }) }
}

async function authorize (client, url, authz, { types, present, remove, log }) {
  const offered = authz.challenges || []
  const type = types.find(t => offered.some(c => c.type === t))
  const name = authz.identifier.value
  if (type === undefined) {
    throw new AcmeError(`the ACME server offers ${offered.map(c => c.type).join(', ') || 'no challenge'} ` +
      `for ${name}, and lila can answer ${types.join(' or ')} here`)
  }
  const challenge = offered.find(c => c.type === type)
  const keyAuthorization = jose.keyAuthorization(challenge.token, client.jwk)
  const solving = {
    type, identifier: authz.identifier, name: validationName(authz.identifier), token: challenge.token, keyAuthorization
  }
  await present(solving)
  try {
    if (log !== null) log(`ACME: answering ${type} for ${name}`)
    await client.post(challenge.url, {})
    const done = await client.poll(url, ['pending'], `the authorization for ${name}`)
    if (done.status !== 'valid') {
      const failed = (done.challenges || []).find(c => c.type === type)
      throw new AcmeError(`${type} for ${name} failed${problemAfter(failed && failed.error)}`, {
        type: failed && failed.error && failed.error.type
      })
    }
  } finally {
    await remove(solving)
  }
}

const problemAfter = problem => problem && typeof problem === 'object' ? `: ${problemWords(problem)}` : ''

module.exports = { AcmeClient, obtainCertificate, certId }
