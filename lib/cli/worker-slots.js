'use strict'

const { sumStats } = require('../admin/sum-stats')
const { UpgradeError } = require('../errors')
const { WorkerRequests } = require('./worker-requests')

// The --workers primary's worker slots as it talks to them over IPC (workers.js says
// the messages; Primary forks, restarts and stops what runs in them): a message sent,
// a question asked and its answer awaited (worker-requests.js), the same asked of
// every worker and the answers gathered (statistics summed, control actions, a
// reload), certificates told, the listening sockets handed up for an upgrade.
//
//   const slots = new WorkerSlots(count, log)
//   slots.all                             [{ index, worker, pid, listening, ... }]
//   slots.forked(slot, worker), .configure(slot, message), .listening(slot), .exited(slot)
//   slots.send(slot, message) -> whether it went
//   slots.received(slot, message, handle) the answers among a worker's messages
//   slots.request(slot, message, timeout) -> Promise of the reply's value
//   slots.askAll(message, timeout) -> Promise of [{ slot, index, pid, value | error }]
//   slots.tell(update), slots.sockets(), slots.gatherStats(), slots.broadcast(action)

const REPLY_TIMEOUT_MS = 2000

class WorkerSlots {
  constructor (count, log) {
    this.log = log
    this.all = Array.from({ length: count }, (_, i) => ({
      index: i + 1,
      // What the worker in it is, as the methods below keep it:
      worker: null, // cluster's Worker while one runs in the slot
      pid: null,
      configured: false, // sent its config
      listening: false,
      requests: new WorkerRequests(i + 1), // asked and not yet answered
      sockets: null, // while handing the listening sockets up: those received
      // How Primary supervises it (workers.js writes these):
      listeningAt: 0,
      failures: 0, // exits in a row, for the back-off
      failedCode: undefined, // the exit code a worker that could not start asked for
      exitCode: undefined, // once stopping: how it exited
      timer: null // the back-off's, before the next fork
    }))
  }

  forked (slot, worker) {
    slot.worker = worker
    slot.pid = worker.process.pid
    slot.listening = false
    slot.configured = false
  }

  // Its config sent (workers.js: the `config` message): certificates are told it from now on.
  configure (slot, message) {
    this.send(slot, message)
    slot.configured = true
  }

  listening (slot) {
    slot.listening = true
  }

  // Its worker exited: nothing it was asked will be answered.
  exited (slot) {
    slot.worker = null
    slot.listening = false
    slot.requests.fail()
  }

  send (slot, message) {
    if (slot.worker === null || !slot.worker.isConnected()) return false
    slot.worker.send(message)
    return true
  }

  // A worker's `reply` and `socket` messages (with the socket's handle). -> whether it
  // was one of them.
  received (slot, message, handle) {
    if (message.lila === 'reply') {
      slot.requests.answer(message)
    } else if (message.lila === 'socket') {
      const { lila, id, ...socket } = message
      if (handle && slot.sockets !== null) slot.sockets.push({ ...socket, handle })
      else if (handle) handle.close()
    } else {
      return false
    }
    return true
  }

  // Ask one worker something: resolves with its reply's value, rejects on its error,
  // its exit or a timeout. `listening: false`: a worker still starting may be asked.
  request (slot, message, timeout = REPLY_TIMEOUT_MS, { listening = true } = {}) {
    if (slot.worker === null || (listening && !slot.listening) || !slot.worker.isConnected()) {
      return Promise.reject(new Error(`worker ${slot.index} is not running`))
    }
    return slot.requests.ask(slot.worker, message, timeout)
  }

  // The same of every worker: [{ slot, index, pid, value } | { slot, index, pid, error }]
  // (error: the Error; pid: the worker's that answered).
  askAll (message, timeout = REPLY_TIMEOUT_MS) {
    return Promise.all(this.all.map(slot => this.request(slot, message, timeout).then(
      value => ({ slot, index: slot.index, pid: slot.pid, value }),
      error => ({ slot, index: slot.index, pid: slot.pid, error })
    )))
  }

  // A certificate or challenge for every worker that has its config (one still
  // starting too: its board takes it before its listeners do); resolves once each has
  // it. A worker that starts later gets them all with its config.
  tell (update) {
    const told = this.all.filter(slot => slot.configured && slot.worker !== null && slot.worker.isConnected())
    return Promise.all(told.map(slot =>
      this.request(slot, { lila: 'certificates', updates: [update] }, REPLY_TIMEOUT_MS, { listening: false })
        .catch(err => this.log.warn(`worker ${slot.index} did not take a certificate: ${err.message}`))))
  }

  // The listening sockets, to hand to a new lila (upgrade.js): the primary holds none of
  // its own (cluster does), so a listening worker sends its copies up. Resolves
  // [{ role, name, protocol, host, port, fd }] with release(), which closes the copies.
  async sockets () {
    const slot = this.all.find(s => s.listening && s.worker !== null)
    if (slot === undefined) throw new UpgradeError('no worker listens: there are no sockets to hand over')
    slot.sockets = []
    let received
    try {
      await this.request(slot, { lila: 'sockets' })
    } catch (err) {
      throw new UpgradeError(`worker ${slot.index} did not hand its sockets up: ${err.message}`)
    } finally {
      received = slot.sockets
      slot.sockets = null
    }
    const handed = received.map(({ handle, ...socket }) => ({ ...socket, fd: handle.fd }))
    handed.release = () => { for (const { handle } of received) handle.close() }
    return handed
  }

  // Every worker's snapshot, summed into one of the shape of lb.stats(), with each
  // worker's own under `workers` ({ index, pid, listeners, process } or { index, pid,
  // error }). A process's figures are its own, never summed (a sum of limits or start
  // times means nothing).
  async gatherStats ({ timeout = REPLY_TIMEOUT_MS } = {}) {
    const replies = (await this.askAll({ lila: 'stats' }, timeout)).map(({ index, pid, value, error }) =>
      error === undefined ? { index, pid, ...value } : { index, pid, error: error.message })
    const answered = replies.filter(r => r.error === undefined).map(({ index, pid, process: own, ...stats }) => stats)
    return { ...sumStats(answered), workers: replies }
  }

  // A control action (the status listener's drain, enable, weight, ...) for every
  // worker: resolves with [{ index, pid, value } | { index, pid, error, code, status }]
  // (error: the message; code and status as the error had them).
  async broadcast (action, { timeout = REPLY_TIMEOUT_MS } = {}) {
    return (await this.askAll({ lila: 'control', action }, timeout)).map(({ index, pid, value, error }) =>
      error === undefined
        ? { index, pid, value }
        : { index, pid, error: error.message, code: error.code, status: error.status })
  }
}

module.exports = { WorkerSlots, REPLY_TIMEOUT_MS }
