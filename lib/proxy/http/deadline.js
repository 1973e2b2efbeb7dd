'use strict'

const { performance } = require('perf_hooks')
const { deadlineOf } = require('../message/grpc')

// A call's deadline, for its exchange (http/exchange.js), or null when it has none. While
// lila still holds the call (queued, connecting, or waiting for the backend's answer)
// the deadline passing ends it: the backend side is let go, blaming no one (the client
// chose the deadline), and the client answered 504, DEADLINE_EXCEEDED. Once the
// response started, the call is the client's and the backend's: gRPC clients enforce
// their own deadline. The backend is sent what is left of it (left(), as grpc-timeout:
// message/rewrite.js). The exchange clears it at its end.
//
// The calls with a deadline are watched by one timer, armed for the earliest of them:
// a call is an entry in a Set, and the timer, when it fires, ends those whose deadline
// passed and is armed again for the next. (A timer per call took 3% of lila's CPU per
// gRPC call under ghz, measured with --cpu-prof; most calls end long before their
// deadline, and most deadlines are alike, so the timer seldom moves.)
const watched = new Set()
let timer = null
let timerAt = Infinity

class Deadline {
  constructor (exchange, ms) {
    this.exchange = exchange
    this.at = performance.now() + ms
    watched.add(this)
    if (this.at < timerAt) arm(this.at)
  }

  // What is left, as a grpc-timeout: in milliseconds, or seconds past 8 digits.
  left () {
    const ms = Math.max(1, Math.ceil(this.at - performance.now()))
    return ms < 1e8 ? `${ms}m` : `${Math.ceil(ms / 1000)}S`
  }

  clear () {
    watched.delete(this)
  }
}

function arm (at) {
  clearTimeout(timer)
  timerAt = at
  timer = setTimeout(expire, Math.max(1, Math.ceil(at - performance.now())))
}

// The timer fired: every call past its deadline is ended.
function expire () {
  timer = null
  timerAt = Infinity
  const now = performance.now()
  let next = Infinity
  for (const deadline of watched) {
    if (deadline.at <= now) {
      watched.delete(deadline)
      callExpired(deadline.exchange)
    } else if (deadline.at < next) {
      next = deadline.at
    }
  }
  if (next !== Infinity && next < timerAt) arm(next)
}

function deadlineFor (exchange) {
  const ms = deadlineOf(exchange.head, exchange.grpc)
  return ms < 0 ? null : new Deadline(exchange, ms)
}

function callExpired (exchange) {
  if (exchange.done || exchange.responseStarted) return
  const { attempt } = exchange
  const where = attempt.waiter !== null
    ? 'while it waited for a backend slot'
    : attempt.backend === null ? 'before a backend took it' : `before backend ${attempt.backend.address} answered`
  exchange.forwarding.drop()
  const detail = `the call's deadline (grpc-timeout ${exchange.head.grpcTimeout}) passed ${where}`
  exchange.answer(504, detail, { quiet: true })
}

module.exports = { deadlineFor }
