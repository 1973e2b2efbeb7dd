'use strict'

// What a process serves its listeners with besides the config's words, in one place
// for both composition roots: the Balancer (one lila, or a --workers worker) and the
// --workers primary (cli/workers.js), which serves nothing but reads the same files
// and keeps the certificates for its workers.
//   material   the files a listener's config names (TLS, htpasswd, pages), read at
//              start and again on every reload, before anything changes: a UsageError
//              says why one cannot be used
//   keeper     the certificates lila gets itself (--tls local|acme, tls/keeper.js), in
//              the one process that keeps them, made when a config first wants one;
//              it publishes to `certificates`, the board listeners take them from
//              (proxy/tls.js), or through `publish` (the primary: to every worker)
//   fleet      --fleet (fleet/fleet.js): the listeners' per-client limits, the keeper's
//              one order for the fleet, control's changes shared and the others' made
//              here. Refused with --workers (config/builder.js): the primary's keeper
//              and control could take it as they are, but the limits are decided in
//              each worker, which would need connections of its own.
//
//   const provisions = new Provisions({ log, keeper: 'own' | 'elsewhere', publish, fleet, about })
//   provisions.material(listenerConfig) -> { tls, backendTls, edge }
//   provisions.materialOf(config)       -> one per listener: all read, or a UsageError
//   provisions.startKeeper(config)      -> Promise, once published; a UsageError at once
//   provisions.reloadKeeper(next)       -> Promise of lines (a keeper made when first wanted)
//   provisions.beginKeeper()            once the listeners listen (ACME's TLS-ALPN-01)
//   provisions.updates()                what a worker that (re)starts is sent
//   provisions.closeKeeper()
//   provisions.startFleet(), .sharedLimits(name), .sharing(perform), .hearChanges(perform),
//   .fleetSnapshot(), .closeFleet()

const { loadListenerTls, Certificates } = require('../proxy/tls')
const { loadEdge } = require('../proxy/edge/rules')
const { servesPlainHttp } = require('../tls/http01')
const { wanted: keeperWanted } = require('../tls/wants')
const { silentLogger } = require('../log')
const VERSION = require('../version')

class Provisions {
  // keeper: 'own' (this process keeps certificates) or 'elsewhere' (a --workers worker:
  // the primary keeps them and feeds `certificates`). keeperOptions go to the Keeper
  // (tests: a short localLifetime). fleet: config.fleet, or null; about() -> what this
  // lila says of itself to the others (fleet/members.js).
  constructor ({
    log = silentLogger, now = Date.now, certificates = new Certificates(), keeper = 'own', keeperOptions = {},
    publish = null, fleet = null, about = null
  } = {}) {
    this.log = log
    this.now = now
    this.certificates = certificates
    this.keeps = keeper === 'own'
    this.keeperOptions = keeperOptions
    this.publish = publish !== null ? publish : update => { certificates.apply(update); return Promise.resolve() }
    this.keeper = null // a Keeper, once a config wants one
    // --fleet-ca and --fleet-key are read here (a UsageError); Redis is not tried yet.
    this.fleet = fleet === null ? null : new (require('../fleet/fleet').Fleet)(fleet, { log, version: VERSION, about })
  }

  // TLS files, and the rules at the edge's (htpasswd, --error-page and --maintenance pages).
  material (listenerConfig) {
    return { ...loadListenerTls(listenerConfig, this.certificates), edge: loadEdge(listenerConfig) }
  }

  materialOf (config) {
    return config.listeners.map(listenerConfig => this.material(listenerConfig))
  }

  // A plain-HTTP listener answers the ACME HTTP-01 challenges of the process's board
  // (tls/http01.js), whichever listener the certificate is for.
  acmeOf (listenerConfig) {
    return servesPlainHttp(listenerConfig) ? this.certificates.challenges : null
  }

  // Certificates lila makes (local) or kept (ACME) are published before the first
  // client: synchronous up to publishing, so a state folder that cannot be used is a
  // UsageError here.
  startKeeper (config) {
    if (keeperStep(this.keeperRole, config) !== 'start') return Promise.resolve()
    const { Keeper } = require('../tls/keeper') // tls/ is loaded only for --tls local|acme
    const fleet = this.fleet === null ? null : this.fleet.certificates // --fleet: one order for the fleet
    const { log, now, publish } = this
    const keeper = new Keeper(config, { log, now, ...this.keeperOptions, publish, fleet })
    const started = keeper.start()
    this.keeper = keeper // only once started: a reload refused by it leaves none
    return started
  }

  // A reload's certificates, before the listeners take the new config: new ones made
  // (local) or loaded; ACME orders start in the background. -> what changed, in lines.
  async reloadKeeper (next) {
    const step = keeperStep(this.keeperRole, next)
    if (step === 'start') await this.startKeeper(next)
    return step === 'reload' ? this.keeper.reload(next) : []
  }

  beginKeeper () {
    if (this.keeper !== null) this.keeper.begin()
  }

  // Every certificate and challenge in force, for a server that starts.
  updates () {
    return this.keeper === null ? [] : this.keeper.updates()
  }

  get keeperRole () {
    return !this.keeps ? 'elsewhere' : this.keeper === null ? 'none' : 'own'
  }

  closeKeeper () {
    if (this.keeper !== null) this.keeper.close()
  }

  // --fleet: Redis is tried from now on, never waited for.
  startFleet () {
    if (this.fleet !== null) this.fleet.start()
  }

  // --fleet: a listener's per-client limits decided fleet-wide, or null.
  sharedLimits (listenerName) {
    return this.fleet === null ? null : this.fleet.limits.forListener(listenerName)
  }

  // Control's `perform` (admin/control.js); with --fleet, what succeeds is shared too.
  sharing (perform) {
    return this.fleet === null ? perform : this.fleet.changes.sharing(perform)
  }

  // --fleet: what the other lilas change is made here with `perform`, from now on.
  hearChanges (perform) {
    if (this.fleet !== null) this.fleet.applyChanges(perform)
  }

  // --fleet: Redis and the members, as /status.json shows them; null without.
  fleetSnapshot () {
    return this.fleet === null ? null : this.fleet.snapshot()
  }

  // --fleet: leaving is said to Redis if it answers within a second.
  closeFleet () {
    return this.fleet === null ? Promise.resolve() : this.fleet.close()
  }
}

// What the keeper does for a config (pure): role 'own' (one runs), 'none' (one would be
// made here) or 'elsewhere'. -> 'start' | 'reload' | null
function keeperStep (role, config) {
  if (role === 'own') return 'reload'
  return role === 'none' && keeperWanted(config) ? 'start' : null
}

module.exports = { Provisions, keeperStep }
