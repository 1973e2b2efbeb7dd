'use strict'

const { performance } = require('perf_hooks')

// A response from an HTTP/2 backend held whole until its stream's end is known, so
// that a backend that dies before it leaves the client nothing started: the request is
// sent again elsewhere (http2/leg.js, which holds only what it could send again).
// Node's http2 server answers `res.end('hi')` in two writes, HEADERS and DATA, then
// END_STREAM a turn of its event loop later (measured under h2load: usually within a
// millisecond, up to 56 ms with the machine's two cores busy); a backend killed in
// between leaves the stream open with its head and body in, and the response can no
// longer be told complete. A held response goes to the client at its end, or once it
// passes HOLD_BYTES or HOLD_MS (a stream, or a slow answer, is then passed on as it
// comes, its first byte that much later).
const HOLD_MS = 100
const HOLD_BYTES = 16 * 1024

// The legs holding a response, oldest first (they all hold for HOLD_MS, so insertion
// order is expiry order), each with when it began; and one timer for them all, armed
// for the oldest.
const holding = new Map()
let timer = null

// `leg` holds its response from now: leg.release() once HOLD_MS passed, unless let go.
function hold (leg) {
  holding.set(leg, performance.now())
  if (timer === null) arm(HOLD_MS)
}

function letGo (leg) {
  holding.delete(leg)
}

// Not a reason to keep the process alive: a held response has its backend's socket.
function arm (ms) {
  timer = setTimeout(expire, ms)
  timer.unref()
}

function expire () {
  timer = null
  const now = performance.now()
  for (const [leg, at] of holding) {
    const due = at + HOLD_MS
    if (due > now) {
      arm(Math.max(1, Math.ceil(due - now)))
      return
    }
    holding.delete(leg)
    leg.release()
  }
}

module.exports = { hold, letGo, HOLD_BYTES }
