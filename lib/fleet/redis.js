'use strict'

const net = require('net')
const tls = require('tls')
const { performance } = require('perf_hooks')
const { encodeCommand, ReplyParser, ReplyError } = require('../wire/resp')
const { formatAddress } = require('../address')

// One connection to Redis, lila's own client (Node has none): commands pipelined (each
// turn's written at once, answers matched in order), AUTH with an ACL user, SELECT, TLS
// (rediss://), the master found through Sentinel, and a reconnect with backoff that
// never ends until close(). Commands are never queued while it is down: they fail at
// once, so that whoever asked goes on without Redis (fleet/ never waits on it).
//
//   const client = new RedisClient(target, { onUp, onDown, onMessage, channels })
//   client.start()
//   await client.command(['GET', 'k'])   a reply (resp.js), or rejects: a ReplyError
//                                        (Redis said no), an Unavailable (no connection)
//   client.close()
//
// `target` is config/fleet-url.js's: { scheme, hosts: [{ host, port }], username,
// password, db, master, tls, ca }. With `channels`, the connection only subscribes
// (a subscribed connection can do nothing else): onMessage(channel, text) per message.
// onUp() once each connection is ready; onDown(reason) once each time it is lost or a
// try fails (reason: words without the password).

const CONNECT_TIMEOUT_MS = 2000
const PING_EVERY_MS = 1000 // a connection that leaves a PING unanswered this long...
const PING_PATIENCE = 3 // ...this many times over is dead (a host gone without a RST)
const BACKOFF_MIN_MS = 100
const BACKOFF_MAX_MS = 2000

class Unavailable extends Error {
  get name () { return 'Unavailable' }
}

class RedisClient {
  constructor (target, { onUp = () => {}, onDown = () => {}, onMessage = null, channels = null, name = 'lila' } = {}) {
    this.target = target
    this.onUp = onUp
    this.onDown = onDown
    this.onMessage = onMessage
    this.channels = channels
    this.name = name
    this.socket = null
    this.ready = false
    this.pending = [] // { callback, sentAt } in the order the commands went
    this.closed = false
    this.backoff = BACKOFF_MIN_MS
    this.timer = null
    this.pinger = null
    this.unanswered = 0
    this.master = null // { host, port } now used, through Sentinel or given
    this.roundTrips = 0
    this.roundTripMs = 0
    this.errors = 0
    this.upWaiters = [] // whenUp()'s
    this.corked = false
    this.uncork = () => {
      this.corked = false
      if (this.socket !== null) this.socket.uncork()
    }
  }

  get up () { return this.ready }

  start () {
    this.connect()
    return this
  }

  // Resolves once connected, or after `ms` (then `up` says which).
  whenUp (ms) {
    if (this.ready) return Promise.resolve()
    return new Promise(resolve => {
      this.upWaiters.push(resolve)
      setTimeout(resolve, ms).unref()
    })
  }

  close () {
    this.closed = true
    clearTimeout(this.timer)
    this.drop(null)
  }

  // A command's reply, pipelined behind those before it.
  command (args) {
    if (!this.ready) return Promise.reject(new Unavailable('not connected'))
    return this.send(args)
  }

  send (args) {
    return new Promise((resolve, reject) => {
      this.call(args, (err, reply) => err === null ? resolve(reply) : reject(err))
    })
  }

  // The same with a callback, (err, reply): what a request's decision uses (no Promise).
  // Only while up: the caller checks `up` first.
  call (args, callback) {
    this.pending.push({ callback, sentAt: performance.now() })
    this.write(encodeCommand(args))
  }

  write (bytes) {
    if (!this.corked) {
      this.corked = true
      this.socket.cork()
      setImmediate(this.uncork) // after every read of this turn of the event loop: one write for them all
    }
    this.socket.write(bytes)
  }

  async connect () {
    if (this.closed) return
    let socket = null
    try {
      const address = await this.find()
      socket = await dial(address, this.target)
      if (this.closed) return socket.destroy()
      this.attach(socket, address)
      await this.setUp()
    } catch (err) {
      // Not yet attached: try again; attached: drop it, unless its close did already.
      if (socket === null) this.retry(reasonOf(err))
      else if (this.socket === socket) this.drop(reasonOf(err))
      return
    }
    this.ready = true
    this.backoff = BACKOFF_MIN_MS
    this.pinger = setInterval(() => this.ping(), PING_EVERY_MS).unref()
    for (const resolve of this.upWaiters.splice(0)) resolve()
    this.onUp()
  }

  // The address to connect to: the one given, or the master Sentinel names now.
  async find () {
    if (this.target.scheme !== 'redis-sentinel') return this.target.hosts[0]
    let last = null
    for (const sentinel of this.target.hosts) {
      try {
        const reply = await ask(sentinel, ['SENTINEL', 'get-master-addr-by-name', this.target.master])
        if (reply === null) {
          const which = formatAddress(sentinel.host, sentinel.port)
          throw new Error(`sentinel ${which} knows no master ${JSON.stringify(this.target.master)}`)
        }
        return { host: reply[0], port: Number(reply[1]) }
      } catch (err) {
        last = err
      }
    }
    throw new Error(`no sentinel answered (${reasonOf(last)})`)
  }

  attach (socket, address) {
    this.socket = socket
    this.master = address
    const parser = new ReplyParser(reply => this.reply(reply))
    socket.setNoDelay(true)
    socket.setKeepAlive(true, 10000)
    socket.on('data', chunk => {
      try {
        parser.feed(chunk)
      } catch (err) {
        this.drop(`Redis sent what is not RESP: ${err.message}`)
      }
    })
    socket.on('error', err => this.drop(reasonOf(err)))
    socket.on('close', () => this.drop('the connection closed'))
  }

  // AUTH, SELECT and a name (and with Sentinel, that this is the master still), in one
  // write; then the subscriptions.
  async setUp () {
    const { username, password, db } = this.target
    const steps = []
    if (password !== null) steps.push(this.send(username === null ? ['AUTH', password] : ['AUTH', username, password]))
    if (db !== 0) steps.push(this.send(['SELECT', db]))
    if (this.channels === null) steps.push(this.send(['CLIENT', 'SETNAME', this.name]))
    const role = this.target.scheme === 'redis-sentinel' ? this.send(['ROLE']) : null
    if (role !== null) steps.push(role)
    await Promise.all(steps)
    if (role !== null && (await role)[0] !== 'master') throw new Error('the master Sentinel named is a replica now')
    if (this.channels !== null) await this.send(['SUBSCRIBE', ...this.channels])
  }

  reply (value) {
    if (this.channels !== null && Array.isArray(value)) {
      if (value[0] === 'message') return this.onMessage(value[1], value[2])
      // SUBSCRIBE is answered once per channel: the last answer is the command's.
      if (value[0] === 'subscribe' && value[1] !== this.channels[this.channels.length - 1]) return
    }
    const entry = this.pending.shift()
    if (entry === undefined) return this.drop('Redis answered a command not sent')
    this.roundTrips++
    this.roundTripMs += performance.now() - entry.sentAt
    if (value instanceof ReplyError) {
      this.errors++
      // A master Sentinel turned into a replica: find the new one.
      if (value.prefix === 'READONLY') this.drop('the master became a replica')
      return entry.callback(value, null)
    }
    if (value === 'PONG' || (Array.isArray(value) && value[0] === 'pong')) this.unanswered = 0
    entry.callback(null, value)
  }

  ping () {
    if (!this.ready) return
    if (++this.unanswered > PING_PATIENCE) return this.drop(`no answer to PING for ${PING_EVERY_MS * PING_PATIENCE} ms`)
    this.send(['PING']).catch(() => {})
  }

  // The connection is over (once): everything in flight fails, and a new one is tried.
  drop (reason) {
    const socket = this.socket
    if (socket === null) return
    this.socket = null
    const wasReady = this.ready
    this.ready = false
    this.corked = false
    clearInterval(this.pinger)
    this.unanswered = 0
    socket.destroy()
    const pending = this.pending
    this.pending = []
    for (const entry of pending) entry.callback(new Unavailable(reason || 'closed'), null)
    if (reason !== null && !wasReady) this.errors++
    if (reason === null) return
    this.retry(reason)
  }

  retry (reason) {
    if (this.closed) return
    this.onDown(reason)
    this.timer = setTimeout(() => this.connect(), this.backoff).unref()
    this.backoff = Math.min(BACKOFF_MAX_MS, this.backoff * 2)
  }

  snapshot () {
    return {
      up: this.ready,
      address: this.master === null ? null : formatAddress(this.master.host, this.master.port),
      roundTrips: this.roundTrips,
      roundTripMs: Math.round(this.roundTripMs * 1000) / 1000,
      errors: this.errors
    }
  }
}

// A connected socket (TLS: handshaken) to `address`, or a rejection in words.
function dial ({ host, port }, target) {
  return new Promise((resolve, reject) => {
    const options = { host, port }
    const socket = target.tls
      ? tls.connect({ ...options, ca: target.ca || undefined, servername: net.isIP(host) ? undefined : host })
      : net.connect(options)
    const ready = target.tls ? 'secureConnect' : 'connect'
    const late = new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`)
    const timer = setTimeout(() => socket.destroy(late), CONNECT_TIMEOUT_MS)
    socket.once(ready, () => {
      clearTimeout(timer)
      socket.removeListener('error', reject)
      resolve(socket)
    })
    socket.once('error', err => {
      clearTimeout(timer)
      reject(err)
    })
  })
}

// One command on a connection of its own (a sentinel's question), then closed.
function ask (address, args) {
  return dial(address, { tls: false }).then(socket => new Promise((resolve, reject) => {
    const timer = setTimeout(() => socket.destroy(new Error('no answer')), CONNECT_TIMEOUT_MS)
    const parser = new ReplyParser(reply => {
      clearTimeout(timer)
      socket.destroy()
      if (reply instanceof ReplyError) reject(reply)
      else resolve(reply)
    })
    socket.on('data', chunk => {
      try { parser.feed(chunk) } catch (err) { socket.destroy(err) }
    })
    socket.on('error', err => { clearTimeout(timer); reject(err) })
    socket.on('close', () => { clearTimeout(timer); reject(new Error('closed before answering')) })
    socket.write(encodeCommand(args))
  }))
}

// What went wrong, in words that never hold the password (Redis's own never do).
function reasonOf (err) {
  if (err === null || err === undefined) return 'unknown'
  if (err.code === 'ECONNREFUSED') return 'connection refused'
  if (err.code) return `${err.code}${err.message && !err.message.startsWith(err.code) ? `: ${err.message}` : ''}`
  return err.message
}

module.exports = { RedisClient }
