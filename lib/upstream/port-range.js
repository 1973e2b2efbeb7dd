'use strict'

const { probe } = require('./health')

// A watched port range (a backend written host:3000-3009): which of its ports listen.
// Every port is probed with a TCP connect, closed at once; what listens is a backend,
// as an address is for a name (membership.js turns each answer into backends, joining
// and retiring as for DNS). A port joins after `rise` connects accepted in a row and
// leaves after `fall` failed in a row, so a dev server restarting is not seen leaving;
// the first scan takes what listens at once, as a backend's first check does.
//
// Probing costs a connect per port, about 0.1 ms of CPU where ranges are used (a
// connect to a loopback port nothing listens on is refused by the kernel at once). Each
// scan probes the ports listening (to see them stop), those whose state is changing,
// and at most IDLE_PER_SCAN idle ones, taken in turn: a range of up to 128 ports is
// probed whole every --check-interval; one of 1024 sees each idle port every 8th
// scan, for 10 to 20 ms of CPU per scan instead of 75 to 110 (measured on a busy
// 2-core machine). At most PARALLEL probes are
// under way, so a range takes a few dozen descriptors at most, never a thousand, also
// when its probes time out (a remote host that drops them).
const IDLE_PER_SCAN = 128
const PARALLEL = 32
const TCP = Object.freeze({ type: 'tcp' })

class PortRange {
  constructor (host, { first, last }) {
    this.host = host
    this.first = first
    this.last = last
    this.size = last - first + 1
    this.listening = new Uint8Array(this.size) // 1: listening (a backend)
    this.streak = new Uint16Array(this.size) // probes in a row that say otherwise
    this.live = 0
    this.scanned = false
    this.cursor = 0 // the idle port the next scan starts at (#due)
  }

  get idle () {
    return this.size - this.live
  }

  // One scan (every port the first time); resolves with the ports listening now,
  // ascending. `rise` and `fall` as --rise and --fall, `timeout` per probe
  // (--check-timeout).
  async scan ({ rise, fall, timeout }) {
    const first = !this.scanned
    const due = first ? Array.from({ length: this.size }, (_, i) => i) : this.#due()
    let next = 0
    const run = async () => {
      while (next < due.length) {
        const i = due[next++]
        const target = { host: this.host, port: this.first + i, path: null }
        const ok = await new Promise(resolve => probe(target, TCP, timeout, resolve))
        // Out of file descriptors: the probe says nothing of the port.
        if (ok !== null) this.#count(i, ok, first ? 1 : ok ? rise : fall)
      }
    }
    await Promise.all(Array.from({ length: Math.min(PARALLEL, due.length) }, run))
    this.scanned = true
    return this.ports()
  }

  // The ports this scan probes, by index: those listening or changing, then idle ones
  // from where the last scan left off.
  #due () {
    const due = []
    for (let i = 0; i < this.size; i++) if (this.listening[i] === 1 || this.streak[i] > 0) due.push(i)
    const idle = Math.min(IDLE_PER_SCAN, this.size - due.length)
    for (let taken = 0, seen = 0; taken < idle && seen < this.size; seen++) {
      const i = this.cursor
      this.cursor = (this.cursor + 1) % this.size
      if (this.listening[i] === 1 || this.streak[i] > 0) continue
      due.push(i)
      taken++
    }
    return due
  }

  // Count `port` listening (a reload moved its backend here from another range): true
  // when it is in this range and was not yet. The next scan says whether it still is.
  adopt (port) {
    const i = port - this.first
    if (i < 0 || i >= this.size || this.listening[i] === 1) return false
    this.listening[i] = 1
    this.live++
    return true
  }

  // The ports listening (or with `listening` false, the idle ones), ascending.
  ports (listening = true) {
    const out = []
    const want = listening ? 1 : 0
    for (let i = 0; i < this.size; i++) if (this.listening[i] === want) out.push(this.first + i)
    return out
  }

  // One probe of port `first + i`: `needed` such in a row change its state.
  #count (i, ok, needed) {
    if ((this.listening[i] === 1) === ok) {
      this.streak[i] = 0
      return
    }
    if (++this.streak[i] < needed) return
    this.streak[i] = 0
    this.listening[i] = ok ? 1 : 0
    this.live += ok ? 1 : -1
  }
}

module.exports = { PortRange, IDLE_PER_SCAN }
