'use strict'

const tls = require('tls')
const { parseProxyHeader } = require('./proxy-protocol')
const { setOrigin, carryOrigin } = require('./bind')

// What a connection goes through before a session serves it, when the listener asks
// for it: a PROXY protocol header (--accept-proxy), then the TLS handshake (TLS
// termination), both within `timeout`. The header comes first, in the clear, as
// HAProxy and cloud balancers send it.
//
//   startPrelude(raw, { acceptProxy, tls, ALPNProtocols, timeout, log }, done) -> { destroy }
//
// done(socket) with what the session should read: the raw socket, or the TLSSocket over
// it; the client's address from the header is set on it (listen.js originOf). A
// connection that fails the prelude is closed here, with a debug line, and done is
// never called.
function startPrelude (raw, { acceptProxy, tls: secure, ALPNProtocols = undefined, timeout, log }, done) {
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
    const socket = new tls.TLSSocket(raw, {
      isServer: true,
      secureContext: secure.context,
      SNICallback: secure.SNICallback,
      ALPNProtocols
    })
    current = socket
    const onTlsError = err => fail(`TLS: ${err.code || err.message}`)
    socket.on('error', onTlsError)
    socket.once('secure', () => {
      if (finished) return
      socket.off('error', onTlsError)
      // Done, as tls.Server says on its sockets: Node's http2 waits for a socket that
      // is still "secureConnecting" to connect, which a server's never does.
      socket.secureConnecting = false
      succeed(socket, origin)
    })
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

module.exports = { startPrelude }
