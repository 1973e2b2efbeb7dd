'use strict'

// The certificates lila gets itself (--tls local, --tls acme), kept: issued or loaded
// at start, renewed at two thirds of their lifetime (or in the window an ACME server's
// renewal information suggests), tried again with backoff when that fails, and handed
// over as PEM through `publish` to whatever serves them (proxy/tls.js Certificates:
// in this process, or with --workers in each worker, by the primary, the one process
// that speaks ACME and writes the state folder). What happens is said in one line
// each; a failure says what went wrong and when lila tries again. Keys are written to
// the state folder (0600) and published, never logged.
//
//   const keeper = new Keeper(config, { log, publish })
//   await keeper.start()   // local certificates issued, stored ACME ones loaded, published
//   keeper.begin()         // once the listeners listen: ACME orders, renewal timers
//   keeper.reload(next)    // names, sources changed: -> lines; begin() again once the
//                          // listeners of the new config listen
//   keeper.updates()       // every current update, for a worker that (re)starts
//   keeper.close()
//
// publish(update) -> Promise, resolved once every server has it (update: see
// proxy/tls.js Certificates). One Entry per distinct (source, names): listeners that
// ask for the same certificate share it.

const crypto = require('crypto')
const fs = require('fs')
const path = require('path')
const { StateFolder, defaultStateDir } = require('./state')
const { LocalCa } = require('./local-ca')
const { AcmeClient, obtainCertificate, certId } = require('./acme')
const { challengeTypes } = require('./http01')
const x509 = require('../wire/x509')
const { UsageError } = require('../errors')

const LOCAL_LIFETIME_MS = 7 * 86400000 // --tls local: a week, renewed after about 4.7 days
const RENEW_AT = 2 / 3 // of a certificate's lifetime
const BACKOFF_MS = [60000, 120000, 300000, 600000, 1200000, 2400000, 3600000, 7200000, 14400000, 21600000]
const ARI_EVERY_MS = 6 * 3600000 // ask for renewal information this often unless told
const MAX_TIMER_MS = 2147483647

class Keeper {
  // options: { log, publish, now, localLifetime (ms), sleep (the ACME polls'), env }
  constructor (config, {
    log, publish, now = Date.now, localLifetime = LOCAL_LIFETIME_MS, sleep, env = process.env
  } = {}) {
    this.log = log
    this.publish = publish
    this.now = now
    this.localLifetime = localLifetime
    this.sleep = sleep
    this.env = env
    this.config = null
    this.entries = new Map() // key -> Entry
    this.state = null // StateFolder, once needed
    this.ca = null // LocalCa, once needed
    this.clients = new Map() // the ACME client in use, by its directory, email and trust
    this.challenges = new Map() // a key per challenge -> its 'add' update (for workers that start)
    this.begun = false
    this.closed = false
    this.setConfig(config)
  }

  // Does this config need a keeper at all?
  static wanted (config) {
    return config.listeners.some(l => l.tls !== null && l.tls.source !== 'files')
  }

  setConfig (config) {
    this.config = config
    this.stateDir = config.stateDir === null ? defaultStateDir(this.env) : config.stateDir
  }

  // The entries this config wants: key -> { source, names, listeners, types }: types,
  // the ACME challenges lila can answer for it, in the order to try them (http01.js).
  wants (config) {
    const out = new Map()
    const served = new Map() // key -> the configs of the listeners that serve it
    for (const l of config.listeners) {
      if (l.tls === null || l.tls.source === 'files') continue
      const key = `${l.tls.source} ${l.tls.names.join(',')}`
      if (!out.has(key)) out.set(key, { source: l.tls.source, names: l.tls.names, listeners: [], types: null })
      if (!served.has(key)) served.set(key, [])
      out.get(key).listeners.push(l.name)
      served.get(key).push(l)
    }
    for (const [key, want] of out) want.types = challengeTypes(config, served.get(key))
    return out
  }

  // Synchronous up to the publishing (a state folder or CA that cannot be used throws
  // a UsageError at once); -> a Promise, once every server has the certificates.
  start () {
    for (const [key, want] of this.wants(this.config)) this.entries.set(key, new Entry(this, key, want))
    for (const entry of this.entries.values()) entry.load()
    return Promise.all([...this.entries.values()].map(entry => entry.announce()))
  }

  // Arm every entry's timer (again: an armed one is re-armed for the same time).
  begin () {
    this.begun = true
    for (const entry of this.entries.values()) {
      if (entry.running === null) entry.schedule()
    }
  }

  // A new config: entries kept (their listeners may change), made, or dropped.
  async reload (next) {
    this.setConfig(next)
    const lines = []
    const wanted = this.wants(next)
    for (const [key, entry] of this.entries) {
      if (wanted.has(key)) continue
      entry.stop()
      this.entries.delete(key)
    }
    for (const [key, want] of wanted) {
      const kept = this.entries.get(key)
      if (kept !== undefined) {
        const gained = want.listeners.filter(name => !kept.listeners.includes(name))
        kept.listeners = want.listeners
        kept.types = want.types
        for (const name of gained) await this.publish({ kind: 'certificate', listener: name, ...kept.update() })
        continue
      }
      const entry = new Entry(this, key, want)
      this.entries.set(key, entry)
      entry.load()
      await entry.announce()
      lines.push(`${want.listeners.join(', ')}: ${entry.what()}: ${entry.material === null ? 'getting one' : 'ready'}`)
    }
    return lines
  }

  // Every update now in force: a server that starts takes them all.
  updates () {
    const out = []
    for (const entry of this.entries.values()) {
      for (const listener of entry.listeners) out.push({ kind: 'certificate', listener, ...entry.update() })
    }
    return [...out, ...this.challenges.values()]
  }

  close () {
    this.closed = true
    for (const entry of this.entries.values()) entry.stop()
    for (const client of this.clients.values()) client.close()
    this.clients.clear()
  }

  // The state folder; one that others may read (made so by hand) is said once.
  folder () {
    if (this.state === null) {
      this.state = new StateFolder(this.stateDir)
      const mode = this.state.mode()
      if (mode !== null && (mode & 0o077) !== 0) {
        const bits = (mode & 0o777).toString(8)
        this.log.warn(`the state folder ${this.stateDir} is open to other users (mode ${bits}): ` +
          `lila keeps private keys there; chmod 700 ${this.stateDir}`)
      }
    }
    return this.state
  }

  localCa () {
    if (this.ca === null) {
      this.ca = LocalCa.open(this.folder(), { now: this.now })
      for (const line of this.ca.trustLines()) this.log.info(line)
    }
    return this.ca
  }

  // The ACME client for the directory in force, with its account key (made once).
  acmeClient () {
    const { directory, email, ca } = this.config.acme
    const id = `${directory} ${email} ${ca}`
    if (this.clients.has(id)) return this.clients.get(id)
    for (const old of this.clients.values()) old.close() // a reload changed the CA, email or trust
    this.clients.clear()
    const dir = this.folder().folder('acme', slug(directory))
    const state = this.folder()
    let keyPem = state.read(path.join(dir, 'account.key'))
    if (keyPem === null) {
      keyPem = newKey().privateKey.export({ type: 'pkcs8', format: 'pem' })
      state.write(path.join(dir, 'account.key'), keyPem, { secret: true })
    }
    const account = state.readJson(path.join(dir, 'account.json'))
    const kid = account !== null && account.directory === directory ? account.url : null
    const caPem = ca === null ? null : readCa(ca)
    const client = new AcmeClient({
      directoryUrl: directory, ca: caPem, accountKey: crypto.createPrivateKey(keyPem), email, kid, sleep: this.sleep
    })
    client.folder = dir
    client.remember = url => state.writeJson(path.join(dir, 'account.json'), { directory, url, email })
    this.clients.set(id, client)
    return client
  }

  // A challenge lila answers while a CA validates, on every server.
  async present (challenge) {
    const update = { kind: 'challenge', op: 'add', ...challengeUpdate(challenge) }
    const id = `${challenge.type} ${challenge.name} ${challenge.token}`
    this.challenges.set(id, update)
    await this.publish(update)
  }

  async withdraw (challenge) {
    const id = `${challenge.type} ${challenge.name} ${challenge.token}`
    const update = this.challenges.get(id)
    this.challenges.delete(id)
    if (update !== undefined) await this.publish({ ...update, op: 'remove', cert: undefined, key: undefined })
  }
}

// One certificate lila keeps: its material, when it is renewed, what went wrong.
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

  async renewAcme () {
    const keeper = this.keeper
    const renewing = this.material !== null
    const types = [...this.types]
    // After a failure, the other challenge first: the port it needs may be the one that works.
    for (let i = 0; i < this.failures % types.length; i++) types.push(types.shift())
    try {
      const client = keeper.acmeClient()
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
      if (client.kid !== kid) client.remember(client.kid)
      if (this.stopped) return
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
      const info = await this.keeper.acmeClient().renewalInfo(x509.fromPem(this.material.cert)[0])
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

  // Where an ACME certificate is kept: acme/DIRECTORY/certificates/FIRST-NAME-HASH/.
  folder () {
    const client = this.keeper.acmeClient()
    const hash = crypto.createHash('sha256').update(this.names.join(',')).digest('hex').slice(0, 8)
    return this.keeper.folder().folder(path.relative(this.keeper.stateDir, client.folder), 'certificates',
      `${slug(this.names[0])}-${hash}`)
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

// The update that makes servers answer a challenge: HTTP-01 by token; TLS-ALPN-01 with
// a certificate of its own (RFC 8737 3), made here.
function challengeUpdate ({ type, identifier, name, token, keyAuthorization }) {
  if (type === 'http-01') return { type, name, token, keyAuthorization }
  const { publicKey, privateKey } = newKey()
  const now = Date.now()
  const der = x509.certificate({
    subject: [],
    notBefore: new Date(now - 3600000),
    notAfter: new Date(now + 7 * 86400000),
    publicKey,
    signingKey: privateKey,
    names: [identifier.value],
    acmeAuthorization: crypto.createHash('sha256').update(keyAuthorization).digest()
  })
  return { type, name, token, cert: x509.toPem(der), key: privateKey.export({ type: 'pkcs8', format: 'pem' }) }
}

const newKey = () => crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })

function readCa (file) {
  try {
    return fs.readFileSync(file, 'utf8')
  } catch (err) {
    const reason = err.code === 'ENOENT' ? 'no such file' : err.code || err.message
    throw new UsageError(`cannot read ${JSON.stringify(file)} (--acme-ca): ${reason}`)
  }
}

// 90000 -> "1.5m", 7200000 -> "2h": a wait, for people.
function inWords (ms) {
  if (ms < 60000) return `${Math.round(ms / 1000)}s`
  if (ms < 3600000) return `${Math.round(ms / 6000) / 10}m`
  return `${Math.round(ms / 360000) / 10}h`
}

const slug = text => String(text).replace(/^https?:\/\//, '').replace(/[^A-Za-z0-9.-]+/g, '_').slice(0, 80)
const iso = ms => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
const oneLine = text => String(text).replace(/\s+/g, ' ').trim()

function issuerOf (x) {
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x.issuer || '')
  return cn ? cn[1] : x.issuer.split('\n').join(', ')
}

module.exports = { Keeper, LOCAL_LIFETIME_MS, RENEW_AT }
