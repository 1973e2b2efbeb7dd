'use strict'

// Who hears which of an app's ports are ready: the memberships of the upstreams whose
// app group the app feeds (upstream/membership.js subscribes through App#watch), and
// what the app asks them back: is a port's backend up, how many connections does it
// still have. The asking is polled (every POLL, bounded by a timeout): membership keeps
// no list of waiters for the app.
const POLL = 25

class Listeners {
  constructor (now = Date.now) {
    this.now = now
    this.subscribers = new Set() // { onResult, live(port), up(port) }
  }

  // Returns the function that ends the subscription.
  add (subscriber) {
    this.subscribers.add(subscriber)
    return () => this.subscribers.delete(subscriber)
  }

  tell (ports) {
    for (const { onResult } of this.subscribers) onResult(null, ports)
  }

  // Resolves once every upstream has the backends of `ports` up (a first check passed),
  // or after `timeout`.
  up (ports, timeout) {
    return this.#until(() => [...this.subscribers].every(s => ports.every(port => s.up(port))), timeout)
  }

  // Resolves once no upstream has a connection open to `port`, or after `timeout`: with
  // how many are still open.
  async drained (port, timeout) {
    const live = () => [...this.subscribers].reduce((sum, s) => sum + s.live(port), 0)
    await this.#until(() => live() === 0, timeout)
    return live()
  }

  #until (test, timeout) {
    return new Promise(resolve => {
      const deadline = this.now() + timeout
      const poll = () => {
        if (test() || this.now() >= deadline) return resolve()
        setTimeout(poll, POLL)
      }
      poll()
    })
  }
}

module.exports = { Listeners }
