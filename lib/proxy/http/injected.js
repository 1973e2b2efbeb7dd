'use strict'

// A fault injected on the backend an HTTP request is seated on (upstream/attempt.js,
// upstream/fault.js), whatever HTTP its client speaks: with `reset`, the client is
// reset (`resetClient`: its connection, or an HTTP/2 stream) and nothing is blamed;
// else lila answers `status` as that backend's answer, which the attempt judges (and
// may retry elsewhere, as it would the backend's own).
function injectFault (exchange, { status = 0, reset = false }, resetClient) {
  if (reset) {
    exchange.releaseLease()
    return resetClient()
  }
  exchange.lastStatus = status
  const { attempt, body, bytesIn } = exchange
  if (attempt.answered(status, { replayable: body.canRepeat(), bytesIn })) return
  exchange.releaseLease()
  exchange.answer(status, `a fault injected on backend ${attempt.backend.address}`, { quiet: true })
}

module.exports = { injectFault }
