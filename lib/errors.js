'use strict'

// The two kinds of error a user can see. Each carries a one-line message that names
// the bad value and what was expected; cli.js prints it and picks the exit code.

// Bad input on the command line or in the config file: exit 2.
class UsageError extends Error {
  constructor (message) {
    super(message)
    this.name = 'UsageError'
    this.code = 'LILA_USAGE'
  }
}

// Something the environment refused at run time (port taken, permission denied): exit 1.
class RuntimeError extends Error {
  constructor (message, cause) {
    super(message)
    this.name = 'RuntimeError'
    this.code = 'LILA_RUNTIME'
    if (cause) this.cause = cause
  }
}

// A control request (status listener, dashboard) that cannot be done: `status` is the
// HTTP status that says why (400 bad value, 404 unknown backend, 409 conflict), the
// message one line naming the value. Plain data, so it can cross a process boundary.
class ControlError extends Error {
  constructor (status, message) {
    super(message)
    this.name = 'ControlError'
    this.code = 'LILA_CONTROL'
    this.status = status
  }
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
  EPIPE: 'broken pipe'
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

module.exports = { UsageError, RuntimeError, isLocalShortage, ControlError, reasonOf }
