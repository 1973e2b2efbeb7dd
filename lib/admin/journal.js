'use strict'

const { specAddress } = require('../address')

// The run-time changes made through the control API (drain, disable, enable, weight,
// add, remove, maintenance and a canary's share: control.js), kept so that an upgrade
// can hand them to the next lila, which makes them again once it listens
// (cli/upgrade.js). Only the last word on each backend (or pool) is kept. Faults are
// not: a rehearsal ends with the process that ran it.
//
//   const journal = new Journal(entries)       entries: a journal's, handed over
//   const perform = journal.recording(perform)   actions that succeed are kept
//   journal.entries()                            -> [action] in order, plain data

const KEPT = new Set([
  'drain', 'disable', 'enable', 'weight', 'add', 'remove', 'maintenance', 'endMaintenance', 'canary'
])
const ADMIN = new Set(['drain', 'disable', 'enable'])
// What a pool answers rather than a backend: the last word of each kind is kept.
const POOL = { maintenance: 'maintenance', endMaintenance: 'maintenance', canary: 'canary' }
const MAX_ENTRIES = 1000

class Journal {
  constructor (entries = []) {
    this.list = []
    for (const action of entries) this.record(action)
  }

  recording (perform) {
    return async action => {
      const result = await perform(action)
      this.record(action)
      return result
    }
  }

  record (action) {
    if (!KEPT.has(action.op)) return
    const key = keyOf(action)
    const supersedes = old => keyOf(old) === key && (
      action.op === 'remove' || // the backend's story ends here
      (ADMIN.has(action.op) && ADMIN.has(old.op)) ||
      (action.op === 'weight' && old.op === 'weight') ||
      (POOL[action.op] !== undefined && POOL[action.op] === POOL[old.op]))
    const before = this.list.length
    const added = this.list.some(old => old.op === 'add' && keyOf(old) === key)
    this.list = this.list.filter(old => !supersedes(old))
    // A backend added and removed at run time leaves nothing to do again.
    if (action.op === 'remove' && added && this.list.length < before) return
    this.list.push(action)
    if (this.list.length > MAX_ENTRIES) this.list.shift()
  }

  entries () {
    return this.list.slice()
  }
}

// The backend an action is about, in the pool it names (or the pool's maintenance or
// canary share).
function keyOf ({ op, backend, spec, listener = '', route = '' }) {
  const what = spec !== undefined ? specAddress(spec) : backend !== undefined ? backend : POOL[op]
  return `${listener || ''} ${route || ''} ${what}`
}

module.exports = { Journal }
