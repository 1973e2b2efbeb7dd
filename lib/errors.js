'use strict'

// lila's errors: one family, as undici's lib/core/errors.js. Every error lila makes on
// purpose is a LilaError with a stable `code` (docs/errors.md lists them all) and a
// one-line message that names the bad value and what was expected. Callers tell them
// apart with instanceof, or by `code` once an error crossed a process boundary
// (toPlain/fromPlain: the --workers IPC).

// `name` is the class's own; `code` each class gives once.
class LilaError extends Error {
  constructor (message, code = 'LILA_ERROR') {
    super(message)
    this.name = new.target.name
    this.code = code
  }
}

// Bad input on the command line or in the config file: exit 2.
class UsageError extends LilaError {
  constructor (message) {
    super(message, 'LILA_USAGE')
  }
}

// Something the environment refused at run time (port taken, permission denied): exit 1.
class RuntimeError extends LilaError {
  constructor (message, cause) {
    super(message, 'LILA_RUNTIME')
    if (cause) this.cause = cause
  }
}

// A control request (status listener, dashboard) that cannot be done: `status` is the
// HTTP status that says why (400 bad value, 404 unknown backend, 409 conflict, 413 body
// too large).
class ControlError extends LilaError {
  constructor (status, message) {
    super(message, 'LILA_CONTROL')
    this.status = status
  }
}

// A change that contradicts the running state, e.g. a backend added twice: control.js
// answers it with 409.
class ConflictError extends LilaError {
  constructor (message) {
    super(message, 'LILA_CONFLICT')
  }
}

// An HTTP message head lila refuses (proxy/http1/parse.js): `status` is the answer to
// give, 4xx for a client's request, 502 for a backend's response.
class HttpError extends LilaError {
  constructor (status, message) {
    super(message, 'LILA_HTTP_PARSE')
    this.status = status
  }
}

// A new lila that could not take over from the running one (cli/upgrade.js): the
// running one goes on serving, and says why.
class UpgradeError extends LilaError {
  constructor (message) {
    super(message, 'LILA_UPGRADE')
  }
}

// A PROXY protocol header that is missing or malformed (wire/proxy-protocol.js): the
// connection is refused.
class ProxyHeaderError extends LilaError {
  constructor (message) {
    super(message, 'LILA_PROXY_HEADER')
  }
}

// An ACME server refused or could not be reached (tls/acme.js): the message says what
// it answered; `type` is its problem document's type (or null), `status` the HTTP
// status, `retryAfter` the ms it asked lila to wait (0: none said).
class AcmeError extends LilaError {
  constructor (message, { type = null, status = null, retryAfter = 0 } = {}) {
    super(message, 'LILA_ACME')
    this.type = type
    this.status = status
    this.retryAfter = retryAfter
  }
}

// Text that is not JSON (with comments: config/json.js), at `line` and `column`; file.js makes
// it a UsageError naming the file.
class JsonError extends LilaError {
  constructor (message, line, column) {
    super(`line ${line}, column ${column}: ${message}`, 'LILA_JSON')
    this.line = line
    this.column = column
  }
}

// Across a process boundary an error travels as plain data, { code, message, status },
// and is made again as the same class on the other side. An error of no known code
// comes back as a plain Error with its code and status.
const REBUILD = {
  LILA_USAGE: ({ message }) => new UsageError(message),
  LILA_RUNTIME: ({ message }) => new RuntimeError(message),
  LILA_CONTROL: ({ message, status }) => new ControlError(status, message),
  LILA_CONFLICT: ({ message }) => new ConflictError(message),
  LILA_HTTP_PARSE: ({ message, status }) => new HttpError(status, message),
  LILA_PROXY_HEADER: ({ message }) => new ProxyHeaderError(message),
  LILA_UPGRADE: ({ message }) => new UpgradeError(message),
  LILA_ACME: ({ message, status }) => new AcmeError(message, { status })
}

function toPlain (err) {
  return { code: err.code, message: err.message, status: err.status }
}

function fromPlain (plain) {
  if (Object.hasOwn(REBUILD, plain.code)) return REBUILD[plain.code](plain)
  return Object.assign(new Error(plain.message), { code: plain.code, status: plain.status })
}

// Plain-words reasons for the socket errors users meet most.
const REASONS = {
  EADDRINUSE: 'address already in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'address not available on this machine',
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'name not found',
  EAI_AGAIN: 'name lookup failed',
  ENODATA: 'no address for the name',
  ETIMEOUT: 'DNS query timed out',
  ESERVFAIL: 'DNS server failure',
  EREFUSED: 'DNS query refused',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files on this machine', // the system-wide limit, fs.file-max
  ENOBUFS: 'out of buffer space',
  ENOMEM: 'out of memory',
  EPIPE: 'broken pipe',
  ENOENT: 'no such file or directory', // a Unix socket's path
  ENOTDIR: 'a part of the path is not a folder'
}

// Errors that say lila itself is short of something (descriptors, memory), not that a
// backend failed: a backend is never blamed for them.
const LOCAL_SHORTAGE = new Set(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM'])

function isLocalShortage (err) {
  return err !== null && err !== undefined && LOCAL_SHORTAGE.has(err.code)
}

function reasonOf (err) {
  if (!err) return 'unknown error'
  return REASONS[err.code] || err.code || err.message
}

module.exports = {
  LilaError,
  UsageError,
  RuntimeError,
  ControlError,
  ConflictError,
  HttpError,
  ProxyHeaderError,
  UpgradeError,
  AcmeError,
  JsonError,
  toPlain,
  fromPlain,
  isLocalShortage,
  reasonOf
}
