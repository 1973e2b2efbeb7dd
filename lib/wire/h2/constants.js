'use strict'

// HTTP/2's numbers (RFC 9113): frame types and flags, error codes, settings; and the
// codec's one error, a protocol error with the code to send for it.

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')

const FRAME_HEADER = 9

// Frame types (6).
const DATA = 0
const HEADERS = 1
const PRIORITY = 2
const RST_STREAM = 3
const SETTINGS = 4
const PUSH_PROMISE = 5
const PING = 6
const GOAWAY = 7
const WINDOW_UPDATE = 8
const CONTINUATION = 9

// Flags.
const END_STREAM = 0x1
const ACK = 0x1
const END_HEADERS = 0x4
const PADDED = 0x8
const PRIORITY_FLAG = 0x20

// Error codes (7).
const NO_ERROR = 0
const PROTOCOL_ERROR = 1
const INTERNAL_ERROR = 2
const FLOW_CONTROL_ERROR = 3
const SETTINGS_TIMEOUT = 4
const STREAM_CLOSED = 5
const FRAME_SIZE_ERROR = 6
const REFUSED_STREAM = 7
const CANCEL = 8
const COMPRESSION_ERROR = 9
const CONNECT_ERROR = 10
const ENHANCE_YOUR_CALM = 11
const INADEQUATE_SECURITY = 12
const HTTP_1_1_REQUIRED = 13

const ERROR_NAMES = ['NO_ERROR', 'PROTOCOL_ERROR', 'INTERNAL_ERROR', 'FLOW_CONTROL_ERROR', 'SETTINGS_TIMEOUT',
  'STREAM_CLOSED', 'FRAME_SIZE_ERROR', 'REFUSED_STREAM', 'CANCEL', 'COMPRESSION_ERROR', 'CONNECT_ERROR',
  'ENHANCE_YOUR_CALM', 'INADEQUATE_SECURITY', 'HTTP_1_1_REQUIRED']

function errorName (code) {
  return ERROR_NAMES[code] || `error 0x${code.toString(16)}`
}

// Settings (6.5.2) and their initial values.
const SETTINGS_HEADER_TABLE_SIZE = 1
const SETTINGS_ENABLE_PUSH = 2
const SETTINGS_MAX_CONCURRENT_STREAMS = 3
const SETTINGS_INITIAL_WINDOW_SIZE = 4
const SETTINGS_MAX_FRAME_SIZE = 5
const SETTINGS_MAX_HEADER_LIST_SIZE = 6

const DEFAULT_WINDOW = 65535
const DEFAULT_FRAME_SIZE = 16384
const MAX_FRAME_SIZE_LIMIT = 16777215
const MAX_WINDOW = 2147483647
const MAX_STREAM_ID = 2147483647

// A connection error (5.4.1), or with `stream` a stream error (5.4.2). Thrown inside the
// codec and turned into GOAWAY or RST_STREAM there; it never leaves it.
class ProtocolError extends Error {
  constructor (code, message, stream = 0) {
    super(message)
    this.code = code
    this.stream = stream
  }
}

function connectionError (code, reason) {
  return new ProtocolError(code, reason)
}

module.exports = {
  PREFACE,
  FRAME_HEADER,
  DATA,
  HEADERS,
  PRIORITY,
  RST_STREAM,
  SETTINGS,
  PUSH_PROMISE,
  PING,
  GOAWAY,
  WINDOW_UPDATE,
  CONTINUATION,
  END_STREAM,
  ACK,
  END_HEADERS,
  PADDED,
  PRIORITY_FLAG,
  NO_ERROR,
  PROTOCOL_ERROR,
  INTERNAL_ERROR,
  FLOW_CONTROL_ERROR,
  SETTINGS_TIMEOUT,
  STREAM_CLOSED,
  FRAME_SIZE_ERROR,
  REFUSED_STREAM,
  CANCEL,
  COMPRESSION_ERROR,
  CONNECT_ERROR,
  ENHANCE_YOUR_CALM,
  INADEQUATE_SECURITY,
  HTTP_1_1_REQUIRED,
  errorName,
  SETTINGS_HEADER_TABLE_SIZE,
  SETTINGS_ENABLE_PUSH,
  SETTINGS_MAX_CONCURRENT_STREAMS,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_FRAME_SIZE,
  SETTINGS_MAX_HEADER_LIST_SIZE,
  DEFAULT_WINDOW,
  DEFAULT_FRAME_SIZE,
  MAX_FRAME_SIZE_LIMIT,
  MAX_WINDOW,
  MAX_STREAM_ID,
  ProtocolError,
  connectionError
}
