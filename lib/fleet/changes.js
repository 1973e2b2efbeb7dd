'use strict'

const { runScript } = require('./scripts')
const { specAddress } = require('../address')

// Run-time changes (admin/control.js: drain, disable, enable, weight, add, remove, fault,
// clearFault; maintenance and a canary's share) made through one lila's control API or dashboard, made on every lila of
// the fleet: each is kept in a Redis hash, the last word per backend and kind, and
// published on a channel (scripts.js SHARE, one step, numbered). Every lila applies what
// it hears from the others, and at start and after a reconnect what the hash holds that
// it has not applied yet: a lila that starts later, or was cut off, takes the current
// changes. Each field's number says whether a change is newer than the one applied.
//
//   const changes = new SharedChanges(client, prefix, { id, log })
//   changes.sharing(perform) -> perform that also shares what succeeded
//   changes.applyWith(perform)  how changes heard are made here (not shared again)
//   changes.heard(text)         a message on the channel
//   await changes.resync()      the hash, after a (re)connect

// Which changes replace which: one field per kind and backend.
const KIND = {
  drain: 'admin',
  disable: 'admin',
  enable: 'admin',
  weight: 'weight',
  add: 'member',
  remove: 'member',
  fault: 'fault',
  clearFault: 'fault',
  // a pool's (proxy/maintenance.js, proxy/canary.js): a maintenance page's file is read
  // by each lila, where it is
  maintenance: 'maintenance',
  endMaintenance: 'maintenance',
  canary: 'canary'
}

class SharedChanges {
  constructor (client, prefix, { id, log, now = Date.now }) {
    this.client = client
    this.keys = [`${prefix}changes`, `${prefix}changes:seq`, `${prefix}changes:channel`]
    this.channel = this.keys[2]
    this.id = id
    this.log = log
    this.now = now
    this.perform = null
    this.applied = new Map() // field -> the number of the change applied (or made) here
    this.shared = 0
    this.heardCount = 0
    this.failed = 0
  }

  // Changes heard before are taken from the next resync on.
  applyWith (perform) {
    this.perform = perform
  }

  sharing (perform) {
    return async action => {
      const result = await perform(action)
      this.share(action)
      return result
    }
  }

  share (action) {
    const field = fieldOf(action)
    if (field === null) return
    // A fault's end is a time, not a duration: a lila that takes it later keeps the end.
    const change = { from: this.id, action: faultEnds(action, this.now()) }
    runScript(this.client, 'SHARE', this.keys, [field, JSON.stringify(change)]).then(seq => {
      this.shared++
      if (!(this.applied.get(field) > seq)) this.applied.set(field, seq)
    }, err => {
      this.failed++
      const what = `${action.op} of ${subjectOf(action)}`
      this.log.warn(`fleet: ${what} made here only: Redis did not take it (${err.message})`)
    })
  }

  heard (text) {
    this.take(text, true)
  }

  async resync () {
    const flat = await this.client.command(['HGETALL', this.keys[0]])
    const texts = []
    for (let i = 1; i < flat.length; i += 2) texts.push(flat[i])
    texts.sort((a, b) => seqOf(a) - seqOf(b))
    for (const text of texts) this.take(text, false)
  }

  take (text, live) {
    const seq = seqOf(text)
    let change
    try {
      change = JSON.parse(text.slice(text.indexOf(' ') + 1))
    } catch {
      return
    }
    const { from, action } = change
    const field = fieldOf(action || {})
    if (field === null || !(seq > 0) || this.perform === null) return
    if (this.applied.get(field) >= seq) return
    this.applied.set(field, seq)
    if (from === this.id) return
    const local = faultLeft(action, this.now())
    if (local === null) return // a fault over by now
    if (live) this.heardCount++
    const [host, pid] = String(from).split('/')
    const who = `${host} pid ${pid}`
    this.perform(local).then(result => {
      this.log.info(`fleet: ${local.op} from ${who}: ${result.message}`)
    }, err => {
      this.log.info(`fleet: ${local.op} of ${subjectOf(local)} from ${who} not made here: ${err.message}`)
    })
  }

  snapshot () {
    return { shared: this.shared, heard: this.heardCount, failed: this.failed }
  }
}

function fieldOf (action) {
  const kind = KIND[action.op]
  if (kind === undefined) return null
  return `${kind} ${action.listener || ''} ${action.route || ''} ${subjectOf(action)}`
}

const subjectOf = ({ backend, spec }) =>
  spec !== undefined ? specAddress(spec) : backend !== undefined ? backend : 'the pool'

const seqOf = text => Number(text.slice(0, text.indexOf(' ')))

function faultEnds (action, now) {
  if (action.op !== 'fault' || !(action.fault.duration > 0)) return action
  return { ...action, fault: { ...action.fault, endsAt: now + action.fault.duration } }
}

function faultLeft (action, now) {
  if (action.op !== 'fault' || action.fault.endsAt === undefined) return action
  const { endsAt, ...fault } = action.fault
  if (endsAt <= now) return null
  return { ...action, fault: { ...fault, duration: endsAt - now } }
}

module.exports = { SharedChanges }
