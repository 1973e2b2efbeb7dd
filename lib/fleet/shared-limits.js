'use strict'

const { runScript, callScript } = require('./scripts')

// The per-client limits decided for the whole fleet: --rate-limit by one GCRA script
// per decision, --max-conn-per-client by a count per client and member (scripts.js);
// the decisions of a turn of the event loop pipelined in one write (redis.js), each
// given BUDGET_MS to be answered. What Redis does not answer in time, or cannot answer
// (down), is decided by the lila's own bucket or count (proxy/client-limits.js), which
// the listener keeps up to date either way.
//
// A listener's decider, as proxy/client-admission.js takes it (forListener(name)):
//   decide(address, rate, burst) -> null: no Redis now, decide alone; or a Promise of ms
//                                   to wait (0: go on), or null: not in time
//   open(address, max) -> null: decide alone; or a Promise of true (counted), false
//                         (the fleet's clients hold max), or null: not in time
//   close(address)       a connection open() counted is over

// A Redis answer slower than this is none, for that decision: a request never waits
// longer on the fleet (docs/several.md). A round trip on a LAN is well under 1 ms.
const BUDGET_MS = 5

class SharedLimits {
  constructor (client, prefix, { id, budgetMs = BUDGET_MS, onLate = () => {} }) {
    this.client = client
    this.prefix = prefix
    this.id = id
    this.budgetMs = budgetMs
    this.onLate = onLate
    this.batch = null // the decisions asked this turn: one timer for them all
    this.decided = 0 // by Redis in time
    this.late = 0 // not in time, or failed: decided by the lila's own bucket
    this.endTurn = () => { this.batch = null }
  }

  forListener (name) {
    const rates = `${this.prefix}rate:${name}:`
    const connections = `${this.prefix}connections:${name}:`
    const members = `${this.prefix}member:`
    return {
      decide: (address, rate, burst) => this.ask('GCRA', rates + address, [1000 / rate, burst]),
      open: (address, max) => {
        const verdict = this.ask('CONNECT', connections + address, [this.id, max, members])
        return verdict === null ? null : verdict.then(counted => counted === null ? null : counted === 1)
      },
      close: address => {
        runScript(this.client, 'DISCONNECT', [connections + address], [this.id]).catch(() => {})
      }
    }
  }

  // A script's answer within the budget, or null (late, failed); null at once when
  // Redis is not there.
  ask (script, key, args) {
    if (!this.client.up) return null
    if (this.batch === null) this.startBatch()
    const batch = this.batch
    return new Promise(resolve => {
      const entry = { resolve, settled: false }
      batch.push(entry)
      callScript(this.client, script, [key], args, (err, answer) => {
        if (err !== null) return this.lateFor(entry)
        if (entry.settled) return
        entry.settled = true
        this.decided++
        resolve(answer)
      })
    })
  }

  startBatch () {
    const batch = []
    this.batch = batch
    setImmediate(this.endTurn)
    setTimeout(() => { for (const entry of batch) this.lateFor(entry) }, this.budgetMs)
  }

  lateFor (entry) {
    if (entry.settled) return
    entry.settled = true
    this.late++
    this.onLate()
    entry.resolve(null)
  }

  snapshot () {
    return { decided: this.decided, late: this.late, budgetMs: this.budgetMs }
  }
}

module.exports = { SharedLimits }
