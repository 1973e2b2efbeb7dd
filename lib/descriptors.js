'use strict'

const fs = require('fs')
const { EventEmitter } = require('events')

// lila's file descriptors: the one home for what the limit is, what share of it a
// listener's clients may take, and how running out is said. Running out is lila's own
// problem, never a backend's: callers that meet EMFILE/ENFILE blame no backend, and a
// listener stops accepting for a while rather than accept and close.

// Descriptors kept aside for what is not a client connection: stdio, the event loop,
// DNS, the status listener, health probes, log files. A quarter of a very low limit.
const RESERVE = 64
const reserveOf = limit => Math.min(RESERVE, Math.floor(limit / 4))
// How long a listener stops accepting when it ran out (or its share is used up).
const PAUSE_MS = 1000

const OUT_OF_DESCRIPTORS = new Set(['EMFILE', 'ENFILE'])

let lastKnown = null

// The soft limit on open files ("Max open files  1024  524288  files" in
// /proc/self/limits; Node raises the soft limit to the hard one at start), or null where
// it cannot be read. Out of descriptors, the file cannot be opened: the last limit read
// is the answer then.
function descriptorLimit () {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find(l => l.startsWith('Max open files'))
    const soft = line === undefined ? NaN : Number(line.slice(14).trim().split(/\s+/)[0])
    if (Number.isFinite(soft)) lastKnown = soft
  } catch {
    // no /proc, or no descriptor to read it with
  }
  return lastKnown
}

// The descriptors one of `listeners` listeners may use for its clients: an even share
// of the limit less the reserve. null: no known limit.
function listenerShare (limit, listeners) {
  if (limit === null) return null
  return Math.max(2, Math.floor((limit - reserveOf(limit)) / Math.max(1, listeners)))
}

// The default --max-conn: a client connection may hold two descriptors (its own and its
// backend's), so half the listener's share, as HAProxy derives maxconn from ulimit -n.
function defaultMaxConn (share) {
  return share === null ? null : Math.floor(share / 2)
}

// How many clients over --max-conn a listener may hold unread: what its share leaves
// once every client it serves has its two descriptors, at most `cap`.
function holdable (share, maxConn, cap) {
  if (share === null || maxConn === null) return cap
  return Math.max(0, Math.min(cap, share - 2 * maxConn))
}

// Start-up: a line saying the --max-conn given cannot be honoured by the limit, or null.
// maxConns: each listener's --max-conn as given (null: not given, so derived).
function limitWarning (limit, maxConns) {
  if (limit === null) return null
  const given = maxConns.filter(n => n !== null)
  if (given.length === 0) return null
  const needed = given.reduce((sum, n) => sum + 2 * n, 0) + reserveOf(limit)
  if (needed <= limit) return null
  const what = given.length === 1 ? `--max-conn ${given[0]}` : `--max-conn (${given.join(' + ')})`
  return `${what} needs about ${needed} file descriptors (two per client, and ${reserveOf(limit)} for lila), ` +
    `but the limit is ${limit}: raise it (ulimit -n, LimitNOFILE=) or lower --max-conn`
}

// Descriptors are the process's, so running out anywhere (a backend connection, a health
// probe) concerns every listener: each stops accepting for a while (listener.js).
const ranOut = new EventEmitter()
ranOut.setMaxListeners(0)

// Something lila was `doing` failed for want of descriptors. `kind`: what the log says
// once a second at most ('health check' for every probe, whichever backend).
function reportOutOfDescriptors (doing, kind = doing) {
  ranOut.emit('out', doing, kind)
}

// Call `onOut(doing, kind)` on each report; returns the function that stops it.
function onOutOfDescriptors (onOut) {
  ranOut.on('out', onOut)
  return () => ranOut.off('out', onOut)
}

function isOutOfDescriptors (err) {
  return err != null && OUT_OF_DESCRIPTORS.has(err.code)
}

// The one wording for running out: "out of file descriptors (limit 256): <doing>".
function outOfDescriptors (limit, doing) {
  return `out of file descriptors${limit === null ? '' : ` (limit ${limit})`}: ${doing}`
}

module.exports = {
  descriptorLimit,
  listenerShare,
  defaultMaxConn,
  holdable,
  limitWarning,
  isOutOfDescriptors,
  outOfDescriptors,
  reportOutOfDescriptors,
  onOutOfDescriptors,
  RESERVE,
  PAUSE_MS
}
