'use strict'

// How listeners are named, for the config (a default name) and the runtime (log
// prefixes, listening lines) alike. No parsing: the runtime may import this.

// A listener's name unless given one: what it is and where, e.g. "http:8080", or
// "http:unix:/run/lila.sock" on a Unix socket (`host`).
function defaultName (protocol, port, host = null) {
  return typeof host === 'string' && host.startsWith('unix:') ? `${protocol}:${host}` : `${protocol}:${port}`
}

// Log lines about a listener carry its name when it was given one, or when there are
// several listeners (`count`) to tell apart.
function logsName (listener, count) {
  return count > 1 || listener.name !== defaultName(listener.protocol, listener.port, listener.host)
}

module.exports = { defaultName, logsName }
