'use strict'

const { parseProxyHeader } = require('../wire/proxy-protocol')
const { setOrigin, carryOrigin } = require('./origin')
const { readClientHello, MAX_HELLO } = require('../wire/client-hello')
const { verdictOf, setClientCert } = require('./client-cert')

// What a connection goes through before a session serves it, when the listener asks
// for it: a PROXY protocol header (--accept-proxy), then the TLS handshake (TLS
// termination), both within `timeout`. The header comes first, in the clear, as
// HAProxy and cloud balancers send it.
//
//   startPrelude(raw, { acceptProxy, tls, ALPNProtocols, timeout, log, refused }, done) -> { destroy }
//
// done(socket) with what the session should read: the raw socket, or the TLSSocket over
// it; the client's address from the header is set on it (origin.js originOf). A
// connection that fails the prelude is closed here, with a debug line, and done is
// never called.
// `tls` is a ListenerTls (tls.js). With --tls-client-ca the client is asked for a
// certificate: what was verified rides on the socket (client-cert.js), and a client
// refused for it is told to `refused(reason, detail)` (edge/stats.js: client-cert-none,
// client-cert-untrusted; detail: the peer, and the verification's code).
// While an ACME TLS-ALPN-01 validation is under way (tls.challenges), the ClientHello
// is read first: one that offers acme-tls/1 for a name being validated gets the
// challenge's certificate and is closed; any other goes on as usual.
function startPrelude (raw, {
  acceptProxy, tls: secure, ALPNProtocols = undefined, timeout, log, refused = () => {}
}, done) {
  let current = raw // the socket to destroy if it all ends early
  let finished = false
  const peer = raw.remoteAddress === undefined ? 'unix:' : `${raw.remoteAddress}:${raw.remotePort}`
  const fail = reason => {
    if (finished) return
    finished = true
    clearTimeout(timer)
    log.debug(`client ${peer} closed: ${reason}`)
    current.destroy()
  }
  const late = () => acceptProxy && current === raw
    ? 'no PROXY protocol header in time'
    : 'TLS handshake not done in time'
  const timer = setTimeout(() => fail(late()), timeout)
  const onError = err => fail(err.message)
  const onClose = () => fail('closed during the prelude')
  raw.on('error', onError)
  raw.on('close', onClose)

  const afterHeader = origin => {
    if (finished) return
    if (secure === null) return succeed(raw, origin)
    if (secure.challenges && secure.challenges.alpn.size > 0) return readHello(origin)
    handshake(origin, null)
  }

  const handshake = (origin, challenge) => {
    const socket = new (require('tls').TLSSocket)(raw, challenge !== null
      ? { isServer: true, secureContext: challenge, ALPNProtocols: ['acme-tls/1'] }
      : {
          isServer: true,
          secureContext: secure.context,
          SNICallback: secure.SNICallback,
          ALPNProtocols,
          requestCert: secure.requestCert,
          rejectUnauthorized: secure.rejectUnauthorized
        })
    current = socket
    const onTlsError = err => {
      if (err.code === 'ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE') refused('client-cert-none', peer)
      fail(`TLS: ${err.code || err.message}`)
    }
    socket.on('error', onTlsError)
    socket.once('secure', () => {
      if (finished) return
      socket.off('error', onTlsError)
      if (challenge !== null) {
        log.info(`ACME: answered a TLS-ALPN-01 validation from ${peer}`)
        finished = true
        clearTimeout(timer)
        socket.on('error', () => {})
        return socket.end()
      }
      if (secure.requestCert) {
        const verdict = verdictOf(socket)
        if (verdict.refused !== null && secure.rejectUnauthorized) {
          const { reason, code } = verdict.refused
          refused(reason, code === null ? peer : `${peer} (${code})`)
          return fail(`TLS: client certificate refused: ${code || 'none'}`)
        }
        setClientCert(socket, verdict)
      }
      succeed(socket, origin)
    })
  }

  // The ClientHello, read and put back: does it ask for an ACME challenge?
  const readHello = origin => {
    let buf = null
    const onData = chunk => {
      buf = buf === null ? chunk : Buffer.concat([buf, chunk])
      let hello = null
      try {
        hello = readClientHello(buf)
      } catch {
        hello = false // not TLS: the handshake will say so
      }
      if (hello === null && buf.length < MAX_HELLO) return
      raw.off('data', onData)
      raw.pause()
      raw.unshift(buf) // Node's TLSSocket takes what is buffered first
      handshake(origin, hello ? secure.challenges.alpnContext(hello) : null)
    }
    raw.on('data', onData)
    raw.resume()
  }

  const succeed = (socket, origin) => {
    finished = true
    clearTimeout(timer)
    raw.off('error', onError)
    raw.off('close', onClose)
    if (socket !== raw) raw.on('error', () => {}) // the TLSSocket reports what matters
    if (origin !== null) setOrigin(socket, origin)
    else if (socket !== raw) carryOrigin(raw, socket)
    done(socket)
  }

  if (acceptProxy) readProxyHeader(raw, afterHeader, fail)
  else afterHeader(null)
  return { destroy: () => fail('the listener is closing') }
}

// Read a PROXY header off the front of `socket`: onHeader({ source, destination }) or
// onHeader(null) for a header that names no client (LOCAL, UNKNOWN); what follows the
// header is put back for the next reader, and the socket is left paused.
function readProxyHeader (socket, onHeader, onError) {
  let buf = null
  const onData = chunk => {
    buf = buf === null ? chunk : Buffer.concat([buf, chunk])
    let header
    try {
      header = parseProxyHeader(buf)
    } catch (err) {
      socket.off('data', onData)
      return onError(err.message)
    }
    if (header === null) return
    socket.off('data', onData)
    socket.pause()
    if (header.length < buf.length) socket.unshift(buf.subarray(header.length))
    onHeader(header.local ? null : { source: header.source, destination: header.destination })
  }
  socket.on('data', onData)
  socket.resume()
}

// A listener's connections in their prelude, at most `max` at once (a client past
// that is closed): each handed to `ready` once through, every one closed with the
// listener.
class Preludes {
  constructor (max) {
    this.max = max
    this.open = new Set()
  }

  start (client, options, ready) {
    if (this.open.size >= this.max) return client.destroy()
    const prelude = startPrelude(client, options, socket => {
      this.open.delete(prelude)
      ready(socket)
    })
    this.open.add(prelude)
    client.once('close', () => this.open.delete(prelude))
  }

  destroy () {
    for (const prelude of [...this.open]) prelude.destroy()
  }
}

module.exports = { startPrelude, Preludes }
