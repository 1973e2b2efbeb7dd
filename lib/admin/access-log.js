'use strict'

const { performance } = require('perf_hooks')

// The access log (--access-log): one line on stdout per client connection (tcp) or
// request (http), written when it ends. Listeners hold `accessLog` (null when off), and
// the two places where a connection or request ends call it only when it is not null,
// so an access log that is off costs one comparison: no string, no Date, no timer.
//
//   text: 2024-06-01T12:00:00.123Z 10.1.2.3 -> 10.0.0.1:80 "GET /a?b HTTP/1.1" 200 in=81 out=220 1.52ms
//         2024-06-01T12:00:00.123Z 10.1.2.3 -> 10.0.0.1:80 tcp in=2 out=20 35.10ms
//   json: {"time":"...","listener":"0.0.0.0:4444","protocol":"http","client":"10.1.2.3",
//          "backend":"10.0.0.1:80","method":"GET","target":"/a?b","version":"HTTP/1.1",
//          "status":200,"bytesIn":81,"bytesOut":220,"ms":1.52}
//
// The backend is "-" (json: null) when no backend took it. In http, status is what the
// client was answered (the backend's, or lila's own 502, 503, ...), 101 for an upgrade
// (logged when the tunnel closes) and 499 when the client went away before its response
// was complete and nothing of it had been sent. Lines are gathered and written once per
// turn of the event loop, so a busy listener costs one write per turn, not per line.

// Status when the client closed before any response (nginx's "client closed request").
const CLIENT_CLOSED = 499

function createAccessLog ({ format = 'text', stdout = process.stdout } = {}) {
  let pending = ''
  let scheduled = false

  function flush () {
    scheduled = false
    if (pending === '') return
    const text = pending
    pending = ''
    try {
      stdout.write(text)
    } catch {} // a closed stdout must not take the balancer down
  }

  function write (line) {
    pending += line
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }

  const json = format === 'json'

  return {
    // session: TcpSession (tcp.js), at its finish().
    tcp (session) {
      const { client, attempt } = session
      const backend = attempt.backend === null ? null : attempt.backend.address
      const ms = round(performance.now() - session.openedAt)
      const time = new Date().toISOString()
      if (json) {
        write(JSON.stringify({
          time, listener: session.listener.name, protocol: 'tcp', client: session.clientAddress, backend, bytesIn: client.bytesRead, bytesOut: client.bytesWritten, ms
        }) + '\n')
      } else {
        write(`${time} ${session.clientAddress} -> ${backend || '-'} tcp in=${client.bytesRead} out=${client.bytesWritten} ${ms.toFixed(2)}ms\n`)
      }
    },

    // exchange: Exchange (http/exchange.js), when it is done, whichever way.
    http (exchange) {
      const { head } = exchange
      const { attempt } = exchange
      const backend = attempt.backend !== null ? attempt.backend.address : attempt.lastBackend
      const status = exchange.res !== null ? exchange.res.status : exchange.tunnel ? 101 : exchange.replied || CLIENT_CLOSED
      const version = head.version === 1 ? 'HTTP/1.1' : 'HTTP/1.0'
      const ms = round(performance.now() - exchange.openedAt)
      const time = new Date().toISOString()
      if (json) {
        write(JSON.stringify({
          time,
          listener: exchange.listener.name,
          protocol: 'http',
          client: exchange.clientAddress,
          backend,
          method: head.method,
          target: head.target,
          version,
          status,
          bytesIn: exchange.bytesIn,
          bytesOut: exchange.bytesOut,
          ms
        }) + '\n')
      } else {
        const request = `${head.method} ${head.target} ${version}`.replace(/[\\"]/g, c => `\\${c}`)
        write(`${time} ${exchange.clientAddress} -> ${backend || '-'} "${request}" ${status} in=${exchange.bytesIn} out=${exchange.bytesOut} ${ms.toFixed(2)}ms\n`)
      }
    },

    flush
  }
}

function round (ms) {
  return Math.round(ms * 100) / 100
}

module.exports = { createAccessLog }
