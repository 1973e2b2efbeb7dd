'use strict'

const fs = require('fs')
const { RuntimeError } = require('../errors')
const { sameAddress } = require('../config/changes')

// Listening sockets the process was given rather than binds: by systemd (socket
// activation: LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES, as sd_listen_fds(3) reads
// them: descriptors from 3 on), or by the lila it takes over from (upgrade.js, in
// LILA_UPGRADE).
//
//   takeInherited(env, pid) -> { from: 'systemd' | 'upgrade' | null, sockets, upgrade }
//     sockets: [{ fd, name }] (an upgrade's also say what they were: role 'listener'
//     or 'status', protocol, host, port); upgrade: { pid, version, state } of the lila
//     before, or null. The variables leave the environment: workers and a later lila
//     must not take the same descriptors again.
//   assign(inherited, config) -> { listeners: Map name -> socket, redirects: Map listener
//     name -> socket (its --redirect-http), status: socket | null }
//     a socket as bind.js listen() takes it: { fd, what, check, owned }. From systemd,
//     every socket goes to a listener and every listener gets one: the listener of the
//     socket's name (FileDescriptorName=; "status": the status listener; "NAME-redirect"
//     or "redirect": listener NAME's --redirect-http, or the first one's), else the
//     next in order (the listeners, then the status listener, then the --redirect-http
//     ones, which may also bind themselves); a host or port given must be the socket's
//     (check). From an upgrade, a socket goes to the listener of its name if it keeps
//     its address (as a reload would keep it); other listeners bind themselves, other
//     sockets are closed. Throws a RuntimeError naming the socket and the listener
//     that do not match.

const FIRST_FD = 3 // SD_LISTEN_FDS_START
const UPGRADE = 'LILA_UPGRADE'

function takeInherited (env, pid) {
  const fromUpgrade = env[UPGRADE]
  const count = env.LISTEN_FDS
  const forPid = env.LISTEN_PID
  const names = env.LISTEN_FDNAMES
  for (const name of [UPGRADE, 'LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES']) delete env[name]
  if (fromUpgrade !== undefined) {
    const { pid: from, version, state = [], sockets = [] } = JSON.parse(fromUpgrade)
    return { from: 'upgrade', sockets, upgrade: { pid: from, version, state } }
  }
  const n = /^[1-9][0-9]*$/.test(count || '') ? Number(count) : 0
  if (n === 0 || forPid !== String(pid)) return { from: null, sockets: [], upgrade: null }
  const named = (names || '').split(':')
  const sockets = Array.from({ length: n }, (_, i) => ({
    fd: FIRST_FD + i,
    name: named.length === n && named[i] !== '' ? named[i] : 'unknown'
  }))
  return { from: 'systemd', sockets, upgrade: null }
}

function assign (inherited, config) {
  if (inherited.from === 'upgrade') return assignHandedOver(inherited, config)
  const listeners = new Map()
  const redirects = new Map()
  let status = null
  if (inherited.from !== 'systemd') return { listeners, redirects, status }
  const n = inherited.sockets.length
  const slots = config.listeners.map(l => ({ name: l.name, listener: l, redirect: false, socket: null }))
  if (config.status !== null) slots.push({ name: 'status', listener: null, redirect: false, socket: null })
  for (const l of config.listeners) {
    if (l.redirectHttp !== null) slots.push({ name: `${l.name}-redirect`, listener: l, redirect: true, socket: null })
  }
  const left = []
  for (const socket of inherited.sockets) {
    const slot = slots.find(s => s.socket === null && s.name === socket.name) ||
      (socket.name === 'redirect' ? slots.find(s => s.socket === null && s.redirect) : undefined)
    if (slot !== undefined) slot.socket = socket
    else left.push(socket)
  }
  for (const socket of left) {
    const slot = slots.find(s => s.socket === null)
    if (slot === undefined) {
      const count = config.listeners.length
      const redirecting = slots.filter(s => s.redirect).length
      const others = [config.status === null ? '' : 'the status listener',
        redirecting === 0 ? '' : `${redirecting} --redirect-http`].filter(Boolean)
      throw new RuntimeError(`systemd gave ${n} socket${n === 1 ? '' : 's'} (LISTEN_FDS=${n}) for ${count} ` +
        `listener${count === 1 ? '' : 's'}${others.map(o => ` and ${o}`).join('')}: ` +
        `${described(socket)} is for none of them; expected a listener for each socket`)
    }
    slot.socket = socket
  }
  for (const { name, listener, redirect, socket } of slots) {
    if (listener === null || redirect) {
      if (socket === null) continue // binds its own
      if (redirect) redirects.set(listener.name, given(socket, `--redirect-http of listener ${listener.name}`, true))
      else status = given(socket, 'the status listener', true)
      continue
    }
    if (socket === null) {
      throw new RuntimeError(`listener ${name} has no socket: systemd gave ${n} (LISTEN_FDS=${n}) for ` +
        `${config.listeners.length} listeners; expected one for each, in order or named after the listener ` +
        '(FileDescriptorName=)')
    }
    listeners.set(name, given(socket, `listener ${name}`, true))
  }
  return { listeners, redirects, status }
}

function assignHandedOver ({ sockets, upgrade }, config) {
  const listeners = new Map()
  const redirects = new Map()
  let status = null
  for (const socket of sockets) {
    const what = `the socket handed over by pid ${upgrade.pid} as fd ${socket.fd}`
    const listener = socket.role === 'listener'
      ? config.listeners.find(l => l.name === socket.name && sameAddress(l, socket))
      : undefined
    if (listener !== undefined && !listeners.has(listener.name)) {
      const owner = `${what} (listener ${listener.name})`
      listeners.set(listener.name, { fd: socket.fd, what: owner, check: false, owned: true })
    } else if (socket.role === 'redirect' && !redirects.has(socket.name) && config.listeners.some(l =>
      l.name === socket.name && l.host === socket.host && l.redirectHttp === socket.port)) {
      const owner = `${what} (--redirect-http of ${socket.name})`
      redirects.set(socket.name, { fd: socket.fd, what: owner, check: false, owned: true })
    } else if (socket.role === 'status' && config.status !== null && status === null &&
        config.status.host === socket.host && (config.status.port === socket.port || config.status.port === 0)) {
      status = { fd: socket.fd, what: `${what} (the status listener)`, check: false, owned: true }
    } else {
      try { fs.closeSync(socket.fd) } catch {} // a listener the new config has not: nobody accepts on it
    }
  }
  return { listeners, redirects, status }
}

function given (socket, owner, check) {
  return { fd: socket.fd, what: `${owner}: ${described(socket)}`, check, owned: false }
}

function described ({ fd, name }) {
  return `the socket systemd gave as fd ${fd}${name === 'unknown' ? '' : ` (named ${JSON.stringify(name)})`}`
}

module.exports = { takeInherited, assign, UPGRADE }
