'use strict'

const { Discovery } = require('./discovery')

// The names and port ranges one membership watches, as its settings say (discovery.js
// does the resolving and the scanning): a name resolved every --resolve-interval
// (through --dns-server), a range scanned every --check-interval with --check-timeout
// probes and the checks' rise and fall. The Discovery is made with the first group
// watched, and remade when a reload changes how names are resolved: membership.js then
// watches its groups again. What an answer changes is membership's.
class Watching {
  constructor (settings, { resolve, resolveSrv }) {
    this.resolve = resolve
    this.resolveSrv = resolveSrv
    this.discovery = null
    this.#configure(settings)
  }

  // Resolve a group's name (A and AAAA, or SRV) now and every interval, or scan its
  // port range; onResult(err, answer) hears each answer. `thresholds()`: the checks'
  // { rise, fall } now.
  watch (group, onResult, thresholds) {
    if (this.discovery === null) this.discovery = new Discovery(this.options)
    if (group.range !== null) {
      return this.discovery.watchRange(group.range, onResult, group, {
        options: () => ({ ...this.scanning, ...thresholds() }),
        interval: () => this.scanning.interval
      })
    }
    if (group.srv) return this.discovery.watchService(group.name, onResult, group)
    return this.discovery.watch(group.name, onResult, group)
  }

  unwatch (group) {
    if (this.discovery !== null) this.discovery.unwatch(group)
  }

  // A reload's settings. True when names are resolved otherwise from now on and groups
  // were watched: their Discovery is closed, and each is to be watched again.
  update (settings) {
    const { interval, server } = this.options
    this.#configure(settings)
    const same = settings.resolveInterval === interval && settings.dnsServer === server
    if (this.discovery === null || same) return false
    this.discovery.close()
    this.discovery = null
    return true
  }

  close () {
    if (this.discovery !== null) this.discovery.close()
  }

  #configure ({ resolveInterval, dnsServer, checkTimeout, checkInterval }) {
    this.options = { interval: resolveInterval, server: dnsServer, resolve: this.resolve, resolveSrv: this.resolveSrv }
    this.scanning = { timeout: checkTimeout, interval: checkInterval }
  }
}

module.exports = { Watching }
