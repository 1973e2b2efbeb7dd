'use strict'

// --otlp for a tcp listener: each client connection one SERVER span, made whole when
// the connection ends (nothing is kept while it runs): the client, the backend it went
// to and after how many attempts, the bytes each way; an error when no backend took
// it. Sampled by --trace-sample: a connection carries no traceparent.

const { epochOf } = require('../telemetry/span')

function traceConnection (tracer, session) {
  const span = tracer.serverSpan(undefined, undefined, 'tcp', epochOf(session.openedAt))
  if (!span.recording) return
  const { client, attempt } = session
  span.set('network.transport', 'tcp')
  span.set('network.peer.address', session.clientAddress)
  span.set('lila.listener', session.listener.name)
  span.set('lila.attempts', attempt.attempts)
  if (session.backendAddress !== null) span.set('lila.backend', session.backendAddress)
  span.set('lila.bytes_in', client.bytesRead)
  span.set('lila.bytes_out', client.bytesWritten)
  if (!session.piping) span.fail(attempt.attempts > 0 ? attempt.failure : 'no backend available')
  span.finish()
}

module.exports = { traceConnection }
