'use strict'

// What a Listener (listener.js) knows of protocols is two interfaces; as lists, so that
// a third protocol (or a test's double) knows what to provide, and
// test/listener-interfaces.test.js holds lila's protocols and sessions to them.
//
// PROTOCOL, an object made for one listener (tcp-protocol.js createTcpProtocol,
// http/protocol.js createHttpProtocol):
//   name                          'tcp', 'http': what snapshots and log lines say
//   newSession(listener, client)  a Session (below) for a client connection, chosen
//                                 by the protocol before it runs (HTTP: by ALPN)
//   alpn                          what TLS offers clients to speak (undefined: nothing)
//   limitsRequests                true: --rate-limit counts requests (the protocol asks
//                                 listener.rateLimited()), not connections
//   reconfigure(config, listener) settings derived from the config: at the start and on
//                                 every reload (after the listener took the new ones)
//   timeouts(config)              the ms the protocol's own timeouts need sweeps for
//   sweep(listener)               those timeouts, run with every sweep (sweep.js)
//   drained()                     clean-up once every session is gone after close()
//   snapshot()                    what the listener's snapshot adds, or null
//   snapshotBackend(backend)      a backend as stats() shows it (balancer.js)
//
// SESSION: made by `newSession(listener, client)`, then `start()` (or
// `turnAway(refusal)` when a per-client limit refuses the client: close it, or answer
// 429), it serves one client connection and calls `listener.sessionDone(session)`
// exactly once when it is over. `destroy()`; `drain(graceMs)`: a graceful close (end
// once what is in flight is done, cutting nothing a client may be sending; HTTP/1.1
// between requests waits up to graceMs for one); `onIdleSweep(idleLimit)`: one sweep
// passed, and a session that saw no byte move for `idleLimit` sweeps (--idle-timeout)
// closes itself (sweep.js). A session may hand its connection on to a session of
// another kind (listener.handOver): an HTTP/1.1 session whose client speaks HTTP/2.
const PROTOCOL = Object.freeze({
  methods: Object.freeze(['newSession', 'reconfigure', 'timeouts', 'sweep', 'drained', 'snapshot', 'snapshotBackend']),
  properties: Object.freeze(['name', 'alpn', 'limitsRequests'])
})
const SESSION = Object.freeze({
  methods: Object.freeze(['start', 'turnAway', 'destroy', 'drain', 'onIdleSweep']),
  properties: Object.freeze([])
})

module.exports = { PROTOCOL, SESSION }
