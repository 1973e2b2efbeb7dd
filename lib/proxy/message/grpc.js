'use strict'

// What lila knows of gRPC (pure): which requests are gRPC calls, their deadline
// (grpc-timeout), the status codes, and how lila's own answers (502, 503, 504, 429, ...)
// are said to a gRPC client: a trailers-only response (HTTP 200, content-type
// application/grpc, grpc-status and grpc-message in the one header block), since a gRPC
// client reads the status from there and takes an HTML or text error page for a broken
// call. replies.js answerOf is the one place that uses it to compose an answer; the
// calls' deadlines are kept by http/deadline.js. The standard health service's two
// messages are wire/grpc-health.js's.

// https://grpc.github.io/grpc/core/md_doc_statuscodes.html
const CODES = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16
}

// lila's own HTTP statuses as gRPC codes: gRPC's HTTP mapping
// (doc/http-grpc-status-mapping.md), except where lila knows better what happened:
// its own timeouts are DEADLINE_EXCEEDED and its own limits RESOURCE_EXHAUSTED.
const BY_STATUS = {
  400: CODES.INTERNAL, // malformed: the client's gRPC library sent what HTTP refuses
  401: CODES.UNAUTHENTICATED,
  403: CODES.PERMISSION_DENIED,
  404: CODES.UNIMPLEMENTED,
  408: CODES.DEADLINE_EXCEEDED, // --body-timeout
  413: CODES.RESOURCE_EXHAUSTED,
  429: CODES.RESOURCE_EXHAUSTED, // --rate-limit
  431: CODES.RESOURCE_EXHAUSTED, // metadata too large
  502: CODES.UNAVAILABLE, // no backend could answer
  503: CODES.UNAVAILABLE, // none could take it
  504: CODES.DEADLINE_EXCEEDED // --timeout, or the call's grpc-timeout
}

function codeOf (status) {
  return BY_STATUS[status] || CODES.UNKNOWN
}

// Is this content-type a gRPC call's? application/grpc, application/grpc+proto,
// application/grpc-web, ... (the request's content-type is what its answer echoes).
const GRPC_TYPE = 'application/grpc'
function isGrpcType (value) {
  if (value === null || value.length < 16) return false
  for (let i = 0; i < 16; i++) if ((value.charCodeAt(i) | 0x20) !== (GRPC_TYPE.charCodeAt(i) | 0x20)) return false
  return true
}

// grpc-message is percent-encoded: bytes outside printable ASCII, and "%" itself.
function encodeMessage (text) {
  let out = ''
  for (const byte of Buffer.from(text)) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25
      ? String.fromCharCode(byte)
      : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

// grpc-timeout, "TimeoutValue TimeoutUnit": up to 8 digits and H M S m u n. -> ms
// (at least 1 for a non-zero value, timers having no finer grain; at most 2^31-1), or
// -1 when absent or malformed (then the call has no deadline lila knows of).
const UNIT_MS = { H: 3600e3, M: 60e3, S: 1e3, m: 1, u: 1e-3, n: 1e-6 }
const TIMEOUT = /^(\d{1,8})([HMSmun])$/
const MAX_TIMER = 2 ** 31 - 1

function parseTimeout (text) {
  if (text === null) return -1
  const match = TIMEOUT.exec(text)
  if (match === null) return -1
  const ms = Number(match[1]) * UNIT_MS[match[2]]
  // Past what a timer can wait (24.8 days), as long as a timer can.
  return ms === 0 ? 0 : Math.min(MAX_TIMER, Math.max(1, Math.ceil(ms)))
}

// The content-type of lila's own answers to a request when they are to be gRPC-shaped,
// else null: a request that says it is a gRPC call (its content-type, as either codec
// reads it into the head), and any request on a --protocol grpc listener.
function callType (head, grpcListener) {
  if (isGrpcType(head.contentType)) return head.contentType
  return grpcListener ? 'application/grpc' : null
}

// The call's deadline (ms from now, or -1) for a request whose `call` type says it
// is one (callType).
function deadlineOf (head, call) {
  return call === null ? -1 : parseTimeout(head.grpcTimeout)
}

module.exports = {
  CODES,
  codeOf,
  encodeMessage,
  parseTimeout,
  callType,
  deadlineOf
}
