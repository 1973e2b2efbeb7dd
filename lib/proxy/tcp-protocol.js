'use strict'

const { TcpSession } = require('./tcp')

// TCP as a Listener's protocol (listener.js): TcpSessions, and nothing of its own to
// configure, sweep or clean up but the connect timeout. One per listener.
function createTcpProtocol () {
  return {
    name: 'tcp',
    newSession (listener, client) { return new TcpSession(listener, client) },
    alpn: undefined,
    limitsRequests: false, // --rate-limit counts connections
    reconfigure (config, listener) {},
    timeouts (config) { return [config.connectTimeout] },
    sweep (listener) {},
    drained () {},
    snapshot () { return null },
    snapshotBackend (backend) { return backend.snapshot() }
  }
}

module.exports = { createTcpProtocol }
