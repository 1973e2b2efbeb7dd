'use strict'

// How a response's body is to reach the client, as a leg tells the exchange with the
// final head (exchange.respond's `how`) and the exchange tells the client's codec:
//   bodyless    none follows the head
//   framed      its pieces carry HTTP/1.1 chunked framing (an HTTP/1.1 backend's,
//               passed as it is to a client that takes it)
//   untilClose  its end is the backend's close
// One frozen object per combination, so that a response allocates none.
const KINDS = []
for (let i = 0; i < 8; i++) {
  KINDS.push(Object.freeze({ bodyless: (i & 4) !== 0, framed: (i & 2) !== 0, untilClose: (i & 1) !== 0 }))
}

function responseBody (bodyless, framed, untilClose) {
  return KINDS[(bodyless ? 4 : 0) | (framed ? 2 : 0) | (untilClose ? 1 : 0)]
}

module.exports = { responseBody }
