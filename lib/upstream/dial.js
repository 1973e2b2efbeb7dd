'use strict'

const net = require('net')
const tls = require('tls')

// A connection to a backend: plain TCP, or TLS with --backend-tls (`tlsOptions` from
// tls.js loadBackendTls; null for plain TCP). The certificate is checked against the
// name the backend was given by (and sent as SNI), or its IP address for an IP literal.
// Callers wait for readyEvent(socket): the TCP connect, or for TLS the end of the
// handshake, so that a backend whose certificate is refused fails like one that
// refuses the connect, before any byte of the client's was sent, and is retried.
// `preface` (a PROXY protocol header) goes first, in the clear, before any TLS; then a
// failed connect may be reported twice (by the TCP socket and by TLS over it): callers
// ignore the events of a socket they are done with.
function dial (backend, tlsOptions, { allowHalfOpen = false, preface = null } = {}) {
  const raw = tlsOptions === null || preface !== null
    ? net.connect({ host: backend.host, port: backend.port, allowHalfOpen, noDelay: true })
    : null
  if (preface !== null) raw.write(preface) // sent as soon as the connect completes
  if (tlsOptions === null) return raw
  const socket = tls.connect({
    ...(raw === null ? { port: backend.port } : { socket: raw }),
    host: backend.host, // to connect to, or (with a socket) to check the certificate against
    servername: backend.name || undefined, // SNI takes names only
    allowHalfOpen,
    ...tlsOptions
  })
  if (raw === null) socket.setNoDelay(true)
  return socket
}

function readyEvent (socket) {
  return socket.encrypted ? 'secureConnect' : 'connect'
}

// A reset where a reset can be sent: a TLS socket has no TCP handle of its own to reset.
function resetOrDestroy (socket) {
  if (socket.encrypted) socket.destroy()
  else socket.resetAndDestroy()
}

module.exports = { dial, readyEvent, resetOrDestroy }
