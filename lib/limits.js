'use strict'

// Sizes and times lila sets for itself (no option changes them) that more than one
// module keeps to: each decision once, named for what it bounds. A bound only one
// module keeps stays there, beside the code it bounds.

// A connection lila is done with: its side is ended, and it waits this long for the
// peer to close its own (reading and dropping what still comes) before destroying it,
// so that the peer reads the last bytes before a reset could discard them.
// (proxy/http1/session.js after its last response; wire/h2/socket.js after a GOAWAY;
// proxy/http2/session.js for a stream answered before its request's body ended.)
const LINGER_MS = 2000

// What lila holds of what a client sent, to send it again to another backend if the
// one it went to fails first: a tcp client's bytes while a backend is connected
// (proxy/tcp.js: past this the client is paused) and, with --retry-on reset, until
// the backend's first byte (past this none are kept), an HTTP request's body
// (proxy/http/request-body.js: past this it can no longer be replayed; a body of a
// known length up to this is read whole first), and the copy --mirror sends.
const REPLAY_LIMIT = 64 * 1024

module.exports = { LINGER_MS, REPLAY_LIMIT }
