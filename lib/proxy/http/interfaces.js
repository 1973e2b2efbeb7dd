'use strict'

// What the exchange knows of protocols is two interfaces, each served by a codec; as
// lists, so that a third codec (or a test's double) knows what to provide, and
// test/exchange-interfaces.test.js holds every session and leg to them:
//
// - its `client`, the session the request came on (http1/session.js: one HTTP/1.1
//   connection, or http2/session.js: HTTP/2, where `stream` is the request's stream).
//   The session has the protocol make the exchange (newExchange(session, head,
//   headBytes, stream, spare): `spare`, an HTTP/1.1 session's last exchange when it is
//   `reusable`, made new), calls `start`, then hands it the body as pieces (onBody,
//   onBodyEnd with the trailers, clientBodyFailed) and what its client does
//   (onClientDrain, onClientClose, onSweep, awaitingBackend), and asks for the page of
//   an answer of its own (errorPage); it hears back, with the
//   exchange as the first argument, CLIENT_SESSION's methods.
// - its `leg` on the backend seated (http1/leg.js over a pooled HTTP/1.1 connection,
//   http2/leg.js as a stream of a pooled HTTP/2 session), made as
//   `new protocol.Leg(exchange, backend, fresh)`, or for the exchange's next request
//   by `renew(backend)` once its response completed: LEG's methods and properties. A
//   leg reports with LEG_REPORTS.
const CLIENT_SESSION = Object.freeze({
  methods: Object.freeze([
    'sendContinue', 'interim', 'respond', 'flushHead', 'send', 'finishResponse', 'tunnelHead', 'answer',
    'refuseBody', 'pauseBody', 'resumeBody', 'bodyPaused', 'cut', 'reset', 'takesChunked', 'holdsWrites', 'touch',
    'exchangeDone'
  ]),
  // listener, clientAddress: the connection's; socket: the client's (a TLSSocket's
  // certificate, client-cert.js); chunkedPieces: its body's pieces carry HTTP/1.1
  // chunked framing; holdsHead: a response head waits for the body bytes read with it
  properties: Object.freeze(['listener', 'clientAddress', 'socket', 'chunkedPieces', 'holdsHead'])
})
const LEG = Object.freeze({
  methods: Object.freeze(['start', 'write', 'end', 'pause', 'resume', 'abandon', 'again', 'renew', 'onSweep',
    'holdsBody']),
  // connected: it can take the body now; gotBytes: some of the response came (no replay)
  properties: Object.freeze(['connected', 'gotBytes'])
})
const LEG_REPORTS = Object.freeze([
  'legConnected', 'legDrained', 'interim', 'answered', 'respond', 'toClient', 'flushHead', 'responseDone',
  'upstreamFailed', 'shortOf', 'startTunnel', 'tunnelClosed'
])
const SESSION_REPORTS = Object.freeze([
  'start', 'onBody', 'onBodyEnd', 'clientBodyFailed', 'onClientDrain', 'onClientClose', 'onSweep', 'awaitingBackend',
  'errorPage'
])

module.exports = { CLIENT_SESSION, LEG, LEG_REPORTS, SESSION_REPORTS }
