'use strict'

const fs = require('fs')
const os = require('os')
const crypto = require('crypto')
const { RedisClient } = require('./redis')
const { loadScripts } = require('./scripts')
const { SharedLimits } = require('./shared-limits')
const { SharedChanges } = require('./changes')
const { Members, ANNOUNCE_MS } = require('./members')
const { SharedCertificates } = require('./certificates')
const { UsageError } = require('../errors')

// A lila's part in a fleet (--fleet): two connections to the fleet's Redis (commands,
// and the channel of run-time changes), and what goes through them: rate-limit
// decisions (shared-limits.js), run-time changes (changes.js), the members
// (members.js). Made by balancer/provisions.js, which hands each part to where it is
// used through a small interface; nothing on a request's path knows Redis. Redis is
// never waited for: down, each part goes on alone, said once; back, it resyncs, said
// once.
//
//   const fleet = new Fleet(config.fleet, { log, version, about })
//   fleet.start()
//   fleet.limits.forListener(name) a listener's per-client limits decided fleet-wide
//   fleet.changes.sharing(perform) perform, and what succeeded shared with the fleet
//   fleet.applyChanges(perform)    what the others change, made here with perform
//   fleet.certificates             --tls acme's store (tls/keeper.js's `fleet`)
//   fleet.snapshot()               what /status.json, the page and /metrics show
//   await fleet.close()

const LATE_LINE_EVERY_MS = 60000
const CLOSE_MS = 1000

class Fleet {
  // about() -> { listeners, requests } (members.js)
  constructor ({ target, name, ca, key = null }, { log, version, about, now = Date.now }) {
    this.target = ca === null ? target : { ...target, ca: readCa(ca) }
    this.name = name === null ? 'default' : name
    this.prefix = `lila:${this.name}:`
    this.log = log
    this.now = now
    this.id = `${os.hostname()}/${process.pid}/${crypto.randomBytes(3).toString('hex')}`
    this.state = 'starting' // 'up' | 'down': what was said last
    this.lateSaidAt = -Infinity
    this.announcer = null
    const clientName = `lila-${process.pid}`
    this.client = new RedisClient(this.target, {
      name: clientName,
      onUp: () => this.clientUp(),
      onDown: reason => this.down(reason)
    })
    this.changes = new SharedChanges(this.client, this.prefix, { id: this.id, log })
    this.certificates = new SharedCertificates(this.client, this.prefix, { id: this.id, log, secret: readKey(key) })
    this.subscriber = new RedisClient(this.target, {
      name: clientName,
      channels: [this.changes.channel, this.certificates.channel],
      onMessage: (channel, text) => channel === this.changes.channel
        ? this.changes.heard(text)
        : this.certificates.heard(text),
      onUp: () => {
        this.resync()
        this.up()
      },
      onDown: reason => this.down(reason)
    })
    this.limits = new SharedLimits(this.client, this.prefix, { id: this.id, onLate: () => this.late() })
    this.members = new Members(this.client, this.prefix, { id: this.id, version, about, now })
  }

  start () {
    this.client.start()
    this.subscriber.start()
    return this
  }

  // Leaving is said to Redis if it answers within CLOSE_MS; lila's exit never waits longer.
  async close () {
    clearInterval(this.announcer)
    if (this.client.up) {
      const waited = new Promise(resolve => setTimeout(resolve, CLOSE_MS).unref())
      await Promise.race([this.members.leave().catch(() => {}), waited])
    }
    this.client.close()
    this.subscriber.close()
  }

  // Changes the other lilas make are made here with `perform` from now on, those kept
  // in Redis first.
  applyChanges (perform) {
    this.changes.applyWith(perform)
    this.resync()
  }

  clientUp () {
    loadScripts(this.client).catch(() => {})
    this.announce()
    clearInterval(this.announcer)
    this.announcer = setInterval(() => this.announce(), ANNOUNCE_MS).unref()
    this.resync()
    this.up()
  }

  announce () {
    if (this.client.up) this.members.announce().catch(() => {})
  }

  // Changes missed while starting or cut off (both connections must be up: the channel
  // heard from now on, the hash read).
  resync () {
    if (!this.client.up || !this.subscriber.up) return
    this.changes.resync().catch(err => this.log.debug(`fleet: changes not read again: ${err.message}`))
    this.certificates.resync().catch(err => this.log.debug(`fleet: certificates not read again: ${err.message}`))
  }

  // Said once both connections are up.
  up () {
    if (!this.client.up || !this.subscriber.up || this.state === 'up') return
    const where = this.where()
    if (this.state === 'down') {
      this.log.info(`fleet: Redis at ${where} is back: rate limits count fleet-wide again, changes are shared`)
    } else if (this.state === 'starting') this.log.info(`fleet: "${this.name}" on Redis at ${where}`)
    this.state = 'up'
  }

  // Said once per outage (every failed try calls it).
  down (reason) {
    if (this.state === 'down') return
    this.state = 'down'
    clearInterval(this.announcer)
    this.log.warn(`fleet: Redis at ${this.target.display} unavailable (${reason}): this lila goes on alone, ` +
      'its rate limits its own and its changes not shared, until Redis answers again')
  }

  late () {
    const now = this.now()
    if (!this.client.up || now - this.lateSaidAt < LATE_LINE_EVERY_MS) return
    this.lateSaidAt = now
    this.log.info(`fleet: Redis did not answer a per-client limit's decision within ${this.limits.budgetMs} ms: ` +
      'this lila decided it alone (said once a minute at most)')
  }

  // The URL without its password, and the master Sentinel named.
  where () {
    const master = this.client.snapshot().address
    return this.target.scheme === 'redis-sentinel' && master !== null
      ? `${this.target.display} (master ${master})`
      : this.target.display
  }

  snapshot () {
    const client = this.client.snapshot()
    const subscriber = this.subscriber.snapshot()
    return {
      name: this.name,
      id: this.id,
      redis: this.target.display,
      master: client.address,
      up: client.up && subscriber.up,
      roundTrips: client.roundTrips + subscriber.roundTrips,
      roundTripMs: client.roundTripMs + subscriber.roundTripMs,
      errors: client.errors + subscriber.errors,
      limits: this.limits.snapshot(), // decided, late (decided by the lila alone), budgetMs
      changes: this.changes.snapshot(), // shared, heard, failed
      members: this.members.list()
    }
  }
}

// --fleet-key: a file of any secret bytes, the same on every lila; the AES key is its hash.
function readKey (file) {
  if (file === null) return null
  try {
    return crypto.createHash('sha256').update(fs.readFileSync(file)).digest()
  } catch (err) {
    throw new UsageError(`cannot read --fleet-key ${JSON.stringify(file)}: ${err.code || err.message}`)
  }
}

function readCa (file) {
  try {
    return fs.readFileSync(file)
  } catch (err) {
    throw new UsageError(`cannot read --fleet-ca ${JSON.stringify(file)}: ${err.code || err.message}`)
  }
}

module.exports = { Fleet }
