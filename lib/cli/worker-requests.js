'use strict'

const { fromPlain } = require('../errors')

// What the --workers primary asked one worker and waits for (workers.js): each request
// an id, answered by the worker's `reply { id, value | error }` (an error made again as
// its class: errors.js fromPlain), or failed by a timeout or the worker's exit.
class WorkerRequests {
  constructor (index) {
    this.index = index // the worker's, for the words
    this.nextId = 1
    this.waiting = new Map() // id -> { resolve, reject, timer }
  }

  // Send `message` to `worker` with an id: resolves with the reply's value, rejects on
  // its error or after `timeout` ms.
  ask (worker, message, timeout) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++
      const timer = setTimeout(() => {
        this.waiting.delete(id)
        reject(new Error(`worker ${this.index} did not answer in ${timeout}ms`))
      }, timeout)
      this.waiting.set(id, { resolve, reject, timer })
      worker.send({ ...message, id })
    })
  }

  // The worker's `reply` message.
  answer ({ id, value, error }) {
    const waiter = this.waiting.get(id)
    if (waiter === undefined) return
    this.waiting.delete(id)
    clearTimeout(waiter.timer)
    if (error !== undefined) waiter.reject(fromPlain(error))
    else waiter.resolve(value)
  }

  // The worker exited: nothing it was asked will be answered.
  fail () {
    for (const waiter of this.waiting.values()) {
      clearTimeout(waiter.timer)
      waiter.reject(new Error(`worker ${this.index} exited`))
    }
    this.waiting.clear()
  }
}

module.exports = { WorkerRequests }
