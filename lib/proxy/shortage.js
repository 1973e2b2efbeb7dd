'use strict'

const { listen } = require('../net/bind')
const { forget } = require('../net/socket-file')
const { throttled } = require('../log')
const { reasonOf } = require('../errors')
const {
  isOutOfDescriptors, outOfDescriptors, reportOutOfDescriptors, onOutOfDescriptors, PAUSE_MS
} = require('../descriptors')

const NOT_ACCEPTING = `not accepting for ${PAUSE_MS / 1000}s`
const TRYING = `trying again in ${PAUSE_MS / 1000}s`
const STILL_ACCEPTING = 'still accepting (a socket given to lila cannot be bound again)'

// A listener short of something (descriptors, memory, room to hold clients): what it
// says, each kind of shortage once a second so that one kind does not hide another,
// and the pause in accepting that follows. Out of descriptors, accepting more clients
// would only make it worse, and libuv accepts and closes in silence what waits in the
// kernel once accept() fails: the listener stops accepting for PAUSE_MS instead, its
// listening socket closed (new clients are refused at once, nothing of theirs read:
// they may try again), and binds again by itself. It reads its listener (server,
// bound, config, port, given, closing, full, descriptors, log) and writes none of it.
class Shortage {
  constructor (listener) {
    this.listener = listener
    this.paused = null // the timer that ends a pause in accepting
    this.sayers = new Map() // kind -> its throttled logger
    this.onError = err => this.onAcceptError(err)
    this.unsubscribe = null // from reports of running out of descriptors (descriptors.js)
  }

  get accepting () {
    return this.paused === null
  }

  // Once listening: accept errors and shortages said elsewhere are heard.
  watch () {
    this.listener.server.on('error', this.onError)
    this.unsubscribe = onOutOfDescriptors((doing, kind) => this.onOutOfDescriptors(doing, kind))
  }

  // The listener closes: no pause goes on, nothing more is heard.
  stop () {
    if (this.unsubscribe !== null) this.unsubscribe()
    this.unsubscribe = null
    clearTimeout(this.paused)
    this.paused = null
  }

  // accept() failed. Out of descriptors, libuv would accept and close every connection
  // waiting in the kernel to keep the loop from spinning; lila stops accepting instead.
  onAcceptError (err) {
    if (!isOutOfDescriptors(err)) return this.short(err, 'accept failed')
    this.pause(this.outOf(NOT_ACCEPTING), 'accept')
  }

  // lila itself is short of something (descriptors, memory) for `doing`: no backend is
  // to blame. Said once a second; out of descriptors, every listener hears of it.
  short (err, doing) {
    if (!isOutOfDescriptors(err)) return this.say(`${doing}: ${reasonOf(err)}`, doing)
    reportOutOfDescriptors(doing)
  }

  // lila ran out of descriptors `doing` something, here or elsewhere (descriptors.js).
  onOutOfDescriptors (doing, kind) {
    if (this.paused === null) this.pause(this.outOf(`${doing}; ${NOT_ACCEPTING}`), kind)
    else this.say(this.outOf(doing), kind)
  }

  // Clients served and held are as many as the listener allows (`what` says how many):
  // a pause, said in words that tell whether --max-conn or the descriptors set it.
  full (what, maxConnGiven) {
    const message = maxConnGiven
      ? `${what}: ${NOT_ACCEPTING}`
      : this.outOf(`${what}, as many as it allows; ${NOT_ACCEPTING}`)
    this.pause(message, 'full')
  }

  // Stop accepting for PAUSE_MS, said (as `kind`). A socket the process was given cannot
  // be bound again once closed: it goes on accepting, and what libuv does out of
  // descriptors happens.
  pause (message, kind) {
    const { listener } = this
    if (this.paused !== null || listener.closing) return
    if (listener.given) return this.say(message.replace(NOT_ACCEPTING, STILL_ACCEPTING), kind)
    this.say(message, kind)
    listener.server.close()
    forget(listener.server)
    this.paused = setTimeout(() => this.resume(), PAUSE_MS)
  }

  resume () {
    const { listener } = this
    this.paused = null
    if (listener.closing) return
    if (listener.full) {
      this.paused = setTimeout(() => this.resume(), PAUSE_MS) // still full: not said again
      return
    }
    const failed = err => {
      if (listener.closing) return
      if (isOutOfDescriptors(err)) return this.pause(this.outOf(`cannot listen again; ${TRYING}`), 'listen')
      listener.log.error(`cannot listen on ${listener.bound} again: ${reasonOf(err)}; ${TRYING}`)
      this.paused = setTimeout(() => this.resume(), PAUSE_MS)
    }
    const { server } = listener
    server.off('error', this.onError)
    listen(server, { host: listener.config.host, port: listener.port }).then(() => {
      server.on('error', this.onError)
      if (listener.closing) return server.close()
      listener.log.info(`accepting again on ${listener.bound}`)
    }, err => {
      server.on('error', this.onError)
      failed(err.cause || err)
    })
  }

  // An error line about a shortage, at most once a second for each `kind` (the rest
  // counted into the next line of that kind).
  say (message, kind) {
    let say = this.sayers.get(kind)
    if (say === undefined) {
      say = throttled(line => this.listener.log.error(line))
      this.sayers.set(kind, say)
    }
    say(message)
  }

  // "out of file descriptors (limit 256): <doing>"
  outOf (doing) {
    return outOfDescriptors(this.listener.descriptors.limit, doing)
  }
}

module.exports = { Shortage }
