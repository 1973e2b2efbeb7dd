'use strict'

const net = require('net')
const { PortRange } = require('./port-range')
const { specAddress } = require('../address')
const { specChanges } = require('./membership-words')

// One backend as it was given (on the command line, in the file, by an operator: its
// spec) and the Backends it stands for: one for an IP address or a Unix socket, as many
// as DNS says for a name, one per address of each target of an SRV name's records, one
// per port of a port range that listens, one per ready instance of the app `lila run`
// started. Membership (membership.js) makes the Backends;
// the group keeps which are its own and what its last answer said.
class Group {
  constructor (spec) {
    const srv = spec.srv !== undefined
    const range = spec.range !== undefined
    this.spec = spec
    this.app = spec.app === true // `lila run`: the app's ready instances (app/app.js) give the backends
    this.unwatchApp = null // ends membership's subscription to the app
    this.srv = srv // an SRV name: its records give the backends (endpoints.js)
    // what is resolved: a name, an SRV name, or null (an IP address, a Unix socket, a
    // port range: its host is dialled as written)
    this.name = srv ? spec.srv : range || this.app || spec.path !== undefined || net.isIP(spec.host) ? null : spec.host
    this.range = range ? new PortRange(spec.host, spec.range) : null // a port range: which of its ports listen
    this.backends = []
    this.error = null // the last resolution failure, while it lasts
    this.records = new Map() // SRV: address -> { weight, lowPriority }, as its records last said
    this.removed = false // taken out (remove): its late answers are ignored
  }

  // A backend as it was given: what a reload matches old and new backends by, and what
  // an operator adds and removes.
  get key () {
    return specAddress(this.spec)
  }

  // Its name in log lines: "name:80", an SRV name as it is, a port range as given.
  get label () {
    if (this.range !== null || this.app) return specAddress(this.spec)
    return this.srv ? this.name : `${this.name}:${this.spec.port}`
  }

  // Is its membership discovered (a name, an SRV name, a port range), rather than one
  // backend as given?
  get watched () {
    return this.name !== null || this.range !== null || this.app
  }

  // The settings of its backend at `address`: the group's, but an SRV name's weights and
  // backups are its records' (as last resolved).
  settingsOf (address) {
    const record = this.records.get(address)
    if (!this.srv || record === undefined) return this.spec
    return { ...this.spec, weight: record.weight, backup: this.spec.backup || record.lowPriority }
  }

  // A reload gave it new settings: its backends take them. Returns what changed, in
  // words (empty when nothing did).
  reconfigure (spec) {
    const what = specChanges(this.spec, spec)
    if (what.length === 0) return what
    this.spec = spec
    for (const backend of this.backends) backend.configure(this.settingsOf(backend.address))
    return what
  }

  // What a new SRV answer's { weight, backup } for its backend at `address` changes, in
  // words: an operator's weight stays until the records change it.
  recordChanges (address, { weight, backup }) {
    if (!this.records.has(address)) return []
    const before = this.settingsOf(address)
    return specChanges(before, { ...before, weight, backup })
  }

  // Resolving it failed for `reason`: true when the reason is new (said once).
  failed (reason) {
    const fresh = this.error !== reason
    this.error = reason
    return fresh
  }

  join (backend) {
    this.backends.push(backend)
  }

  // An answer came: `wanted` (endpoints.js) are its backends now. Returns those it no
  // longer has.
  answered (wanted) {
    this.error = null
    if (this.srv) this.records = new Map([...wanted].map(([address, e]) => [address, recordOf(e)]))
    const gone = this.backends.filter(backend => !wanted.has(backend.address))
    this.backends = this.backends.filter(backend => wanted.has(backend.address))
    return gone
  }

  // A reload that changed a port range (3000-3009 -> 3000-3019): a port listening in a
  // removed range of the same host and in this one keeps its backend (its state,
  // counters and connections), with this range's settings.
  adoptPorts (removed) {
    for (const other of removed) {
      if (other.range === null || other.spec.host !== this.spec.host) continue
      const kept = other.backends.filter(backend => this.range.adopt(backend.port))
      other.backends = other.backends.filter(backend => !kept.includes(backend))
      for (const backend of kept) backend.configure(this.spec)
      this.backends.push(...kept)
    }
  }

  // Taken out (a reload, an operator): answers still on their way are ignored.
  remove () {
    this.removed = true
  }
}

// What is kept of an SRV endpoint to see what the next answer changes.
function recordOf ({ weight, lowPriority }) {
  return { weight, lowPriority }
}

module.exports = { Group }
