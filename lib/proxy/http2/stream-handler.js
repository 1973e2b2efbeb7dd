'use strict'

const { trailersRefused } = require('./request')

// The stream handler every exchange shares (wire/h2/connection.js): `s.user` is the
// exchange; the request's DATA and trailers go to it, and the stream's end.
const STREAM = Object.freeze({
  onHead () {},
  onData (s, chunk, endStream) {
    const x = s.user
    x.client.bodyRead(x)
    if (chunk.length > 0) x.onBody(chunk)
    if (endStream) x.onBodyEnd(null)
  },
  onTrailers (s, fields) {
    const x = s.user
    x.client.touch()
    const refused = trailersRefused(fields)
    if (refused !== null) return x.clientBodyFailed(refused)
    x.onBodyEnd(fields)
  },
  onReset (s) { s.user.client.streamGone(s.user) },
  onDrain (s) { s.user.onClientDrain() }
})

module.exports = { STREAM }
