'use strict'

// One certificate lila keeps for the keeper (keeper.js): its material, when it is
// renewed (two thirds into its lifetime, or in the ACME server's renewal window), the
// backoff after a failure, what went wrong; each said in one line.

const crypto = require('crypto')
const path = require('path')
const { obtainCertificate, certId } = require('./acme')
const x509 = require('../wire/x509')

const RENEW_AT = 2 / 3 // of a certificate's lifetime
const BACKOFF_MS = [60000, 120000, 300000, 600000, 1200000, 2400000, 3600000, 7200000, 14400000, 21600000]
const ARI_EVERY_MS = 6 * 3600000 // ask for renewal information this often unless told
const MAX_TIMER_MS = 2147483647
const FLEET_WAIT_MS = 5000 // --fleet: another lila orders, or Redis is away: look again this soon

class Entry {
  constructor (keeper, key, { source, names, listeners, types }) {
    this.keeper = keeper
    this.key = key
    this.source = source
    this.names = names
    this.listeners = listeners
    this.types = types // the ACME challenges to try, in order
    this.material = null // { cert, key } PEM
    this.x509 = null
    this.lastRenewal = null // ms
    this.lastError = null // one line
    this.nextRenewal = null // ms
    this.failures = 0
    this.timer = null
    this.running = null
    this.stopped = false
    this.ari = null // { start, end, checkAt } from the ACME server's renewal information
    this.waiting = null // --fleet: why it waits for the fleet, once said
  }

  what () {
    return `certificate for ${this.names.join(', ')} (${this.source === 'local' ? 'local CA' : 'ACME'})`
  }

  update () {
    return {
      material: this.material,
      status: { lastRenewal: this.lastRenewal, lastError: this.lastError, nextRenewal: this.nextRenewal }
    }
  }

  async announce () {
    for (const listener of this.listeners) {
      await this.keeper.publish({ kind: 'certificate', listener, ...this.update() })
    }
  }

  // At start: a local certificate is issued now; an ACME one is loaded if stored (its
  // renewal information asked for some time in the next hours, not at once: a restart
  // asks the ACME server nothing).
  load () {
    if (this.source === 'local') return this.issueLocal()
    const stored = this.readStored()
    if (stored !== null) {
      this.take(stored, false)
      this.ari = { at: Infinity, checkAt: this.keeper.now() + Math.floor(Math.random() * ARI_EVERY_MS) }
      const until = iso(this.notAfter())
      this.keeper.log.info(`${this.what()}: using the one kept in ${this.folder()}, valid until ${until}`)
    }
    this.planRenewal()
  }

  issueLocal () {
    const ca = this.keeper.localCa()
    this.take(ca.issue(this.names, this.keeper.localLifetime, this.keeper.now()), true)
    this.planRenewal()
    this.keeper.log.info(`${this.what()} issued, valid until ${iso(this.notAfter())}`)
  }

  take (material, fresh) {
    this.material = material
    this.x509 = new crypto.X509Certificate(material.cert)
    if (fresh) this.lastRenewal = this.keeper.now()
  }

  notBefore () { return Date.parse(this.x509.validFrom) }
  notAfter () { return Date.parse(this.x509.validTo) }

  // When to renew: two thirds into the lifetime, or in the ACME server's window.
  planRenewal () {
    if (this.material === null) {
      this.nextRenewal = this.keeper.now()
      return
    }
    const [from, to] = [this.notBefore(), this.notAfter()]
    this.nextRenewal = from + Math.round((to - from) * RENEW_AT)
    if (this.ari !== null) this.nextRenewal = Math.min(this.nextRenewal, this.ari.at)
  }

  // Arm the timer for the next renewal (or renewal information check).
  schedule () {
    if (this.stopped || this.keeper.closed) return
    clearTimeout(this.timer)
    const now = this.keeper.now()
    let at = this.nextRenewal
    const checkAri = this.source === 'acme' && this.material !== null && this.ari !== null && this.ari.checkAt < at
    if (checkAri) at = this.ari.checkAt
    const wait = Math.max(0, Math.min(at - now, MAX_TIMER_MS))
    this.timer = setTimeout(() => {
      this.timer = null
      if (this.keeper.now() < at - 1000) return this.schedule() // a long wait comes in parts
      if (checkAri) this.askRenewalInfo().then(() => this.schedule())
      else this.renew()
    }, wait)
    this.timer.unref()
  }

  stop () {
    this.stopped = true
    clearTimeout(this.timer)
  }

  async renew () {
    if (this.running !== null || this.stopped) return this.running
    this.running = this.source === 'local' ? this.renewLocal() : this.renewAcme()
    try {
      await this.running
    } finally {
      this.running = null
    }
  }

  async renewLocal () {
    try {
      this.issueLocal()
      this.lastError = null
      await this.announce()
    } catch (err) {
      this.failed(err)
    }
    this.schedule()
  }

  // --fleet (keeper.fleet, fleet/certificates.js): one order for the fleet, under its
  // lock; a certificate another lila got first is taken rather than ordered again.
  async renewAcme () {
    const { fleet } = this.keeper
    if (fleet === null) return this.orderAcme()
    let lock
    try {
      lock = await fleet.lock(this.key)
      if (lock !== null) {
        const kept = await fleet.current(this.key)
        if (kept !== null && this.adopt(kept)) return lock.release()
      }
    } catch (err) {
      if (lock) lock.release()
      return this.waitForFleet(`the fleet's Redis is unavailable (${oneLine(err.message)})`)
    }
    if (lock === null) return this.waitForFleet('another lila of the fleet is getting it')
    this.waiting = null
    try {
      await this.orderAcme(material => fleet.keep(this.key, material))
    } finally {
      lock.release()
    }
  }

  // Said once while it lasts; looked at again in FLEET_WAIT_MS.
  waitForFleet (why) {
    if (this.waiting !== why) this.keeper.log.info(`${this.what()}: ${why}; waiting for it`)
    this.waiting = why
    this.nextRenewal = this.keeper.now() + FLEET_WAIT_MS
    this.schedule()
  }

  // A certificate another lila of the fleet got: taken when it is newer than this one's.
  // -> whether it was.
  adopt (material) {
    let x
    try {
      x = new crypto.X509Certificate(material.cert)
      if (!x.checkPrivateKey(crypto.createPrivateKey(material.key))) return false
    } catch {
      return false
    }
    if (this.stopped || (this.x509 !== null && Date.parse(x.validTo) <= this.notAfter())) return false
    const kept = { cert: material.cert, key: material.key }
    this.store(kept)
    this.take(kept, true)
    this.failures = 0
    this.lastError = null
    this.waiting = null
    this.ari = null
    this.planRenewal()
    this.keeper.log.info(`${this.what()} taken from the fleet (issued by ${issuerOf(this.x509)}), valid until ` +
      `${iso(this.notAfter())}; renewal from ${iso(this.nextRenewal)}`)
    this.announce().then(() => this.schedule())
    return true
  }

  // `kept(material)`: what else is done with a new certificate before it is served.
  async orderAcme (kept = null) {
    const keeper = this.keeper
    const renewing = this.material !== null
    const types = [...this.types]
    // After a failure, the other challenge first: the port it needs may be the one that works.
    for (let i = 0; i < this.failures % types.length; i++) types.push(types.shift())
    try {
      const account = keeper.acmeAccount()
      const { client } = account
      const kid = client.kid
      let replaces = null
      if (renewing) {
        try { replaces = certId(x509.fromPem(this.material.cert)[0]) } catch {}
      }
      const doing = renewing ? 'renewing' : 'getting one'
      keeper.log.info(`${this.what()}: ${doing} from ${client.directoryUrl} (${types[0]})`)
      const material = await obtainCertificate(client, this.names, {
        types,
        replaces,
        present: challenge => keeper.present(challenge),
        remove: challenge => keeper.withdraw(challenge),
        log: line => keeper.log.debug(line)
      })
      if (client.kid !== kid) account.remember(client.kid)
      if (this.stopped) return
      if (kept !== null) await kept(material)
      this.store(material)
      this.take(material, true)
      this.failures = 0
      this.lastError = null
      this.ari = null
      this.planRenewal()
      await this.askRenewalInfo()
      keeper.log.info(`${this.what()} ${renewing ? 'renewed' : 'issued'} by ${issuerOf(this.x509)}, valid until ` +
        `${iso(this.notAfter())}; renewal from ${iso(this.nextRenewal)}`)
      await this.announce()
    } catch (err) {
      if (this.stopped) return
      this.failed(err, renewing)
      await this.announce()
    }
    this.schedule()
  }

  // One line: what went wrong, when lila tries again, and what it serves meanwhile.
  failed (err, renewing = true) {
    const delay = Math.max(BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length - 1)], err.retryAfter || 0)
    this.failures++
    const reason = oneLine(err.message)
    this.lastError = reason
    this.nextRenewal = this.keeper.now() + delay
    const meanwhile = this.material === null
      ? 'until then TLS clients get a handshake failure'
      : this.notAfter() > this.keeper.now()
        ? `the one in use is valid until ${iso(this.notAfter())}`
        : `the one in use expired at ${iso(this.notAfter())}`
    const doing = this.material === null || !renewing ? 'could not get' : 'could not renew'
    this.keeper.log.warn(`${doing} the ${this.what()}: ${reason}; trying again in ${inWords(delay)} (${meanwhile})`)
  }

  // The ACME server's renewal window (ARI), if it has one: renewal moves into it.
  async askRenewalInfo () {
    if (this.material === null) return
    try {
      const info = await this.keeper.acmeAccount().client.renewalInfo(x509.fromPem(this.material.cert)[0])
      if (info === null) return
      const at = info.start + Math.floor(Math.random() * (info.end - info.start))
      const again = Math.min(Math.max(info.retryAfter || ARI_EVERY_MS, 60000), 86400000)
      this.ari = { at, checkAt: this.keeper.now() + again }
      this.planRenewal()
    } catch (err) {
      this.ari = this.ari && { ...this.ari, checkAt: this.keeper.now() + ARI_EVERY_MS }
      this.keeper.log.debug(`${this.what()}: no renewal information: ${oneLine(err.message)}`)
    }
  }

  // Where an ACME certificate is kept (keeper.certificateFolder).
  folder () {
    return this.keeper.certificateFolder(this.names)
  }

  readStored () {
    const state = this.keeper.folder()
    const dir = this.folder()
    const cert = state.read(path.join(dir, 'cert.pem'))
    const key = state.read(path.join(dir, 'key.pem'))
    if (cert === null || key === null) return null
    try {
      const x = new crypto.X509Certificate(cert)
      if (!x.checkPrivateKey(crypto.createPrivateKey(key))) return null
      if (Date.parse(x.validTo) <= this.keeper.now()) return null
      return { cert: String(cert), key: String(key) }
    } catch {
      return null
    }
  }

  store (material) {
    const state = this.keeper.folder()
    const dir = this.folder()
    state.write(path.join(dir, 'key.pem'), material.key, { secret: true })
    state.write(path.join(dir, 'cert.pem'), material.cert)
  }
}

// 90000 -> "1.5m", 7200000 -> "2h": a wait, for people.
function inWords (ms) {
  if (ms < 60000) return `${Math.round(ms / 1000)}s`
  if (ms < 3600000) return `${Math.round(ms / 6000) / 10}m`
  return `${Math.round(ms / 360000) / 10}h`
}

const iso = ms => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
const oneLine = text => String(text).replace(/\s+/g, ' ').trim()

function issuerOf (x) {
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x.issuer || '')
  return cn ? cn[1] : x.issuer.split('\n').join(', ')
}

module.exports = { Entry }
