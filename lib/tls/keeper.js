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
// proxy/tls.js Certificates). One Entry (certificate-entry.js) per certificate a config
// wants (wants.js): listeners that ask for the same certificate share it.

const crypto = require('crypto')
const fs = require('fs')
const path = require('path')
const { StateFolder, defaultStateDir } = require('./state')
const { LocalCa } = require('./local-ca')
const { AcmeClient } = require('./acme')
const { Entry } = require('./certificate-entry')
const { wants } = require('./wants')
const x509 = require('../wire/x509')
const { UsageError } = require('../errors')

const LOCAL_LIFETIME_MS = 7 * 86400000 // --tls local: a week, renewed after about 4.7 days

class Keeper {
  // options: { log, publish, now, localLifetime (ms), sleep (the ACME polls'), env,
  // fleet }. `fleet`: with --fleet, where ACME orders are locked and certificates and
  // challenges shared (fleet/certificates.js's interface), or null.
  constructor (config, {
    log, publish, now = Date.now, localLifetime = LOCAL_LIFETIME_MS, sleep, env = process.env, fleet = null
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
    this.clients = new Map() // the ACME account in use (acmeAccount), by its directory, email and trust
    this.challenges = new Map() // a key per challenge -> its 'add' update (for workers that start)
    this.begun = false
    this.closed = false
    this.fleet = fleet
    this.setConfig(config)
    if (fleet !== null) {
      fleet.listen({
        certificate: (key, material) => this.entries.has(key) && this.entries.get(key).adopt(material),
        challenge: update => this.publish(update) // another lila's order: answered here too
      })
    }
  }

  setConfig (config) {
    this.config = config
    this.stateDir = config.stateDir === null ? defaultStateDir(this.env) : config.stateDir
  }

  // Synchronous up to the publishing (a state folder or CA that cannot be used throws
  // a UsageError at once); -> a Promise, once every server has the certificates.
  start () {
    for (const [key, want] of wants(this.config)) this.entries.set(key, new Entry(this, key, want))
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
    const wanted = wants(next)
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
    for (const { client } of this.clients.values()) client.close()
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

  // Where an ACME certificate for `names` is kept: acme/DIRECTORY/certificates/FIRST-NAME-HASH/.
  certificateFolder (names) {
    const hash = crypto.createHash('sha256').update(names.join(',')).digest('hex').slice(0, 8)
    return this.folder().folder(path.relative(this.stateDir, this.acmeAccount().dir), 'certificates',
      `${slug(names[0])}-${hash}`)
  }

  // The ACME account in force: { client (with its account key, made once), dir (its
  // folder), remember(url) (once the server made the account: kept for the next start) }.
  acmeAccount () {
    const { directory, email, ca } = this.config.acme
    const id = `${directory} ${email} ${ca}`
    if (this.clients.has(id)) return this.clients.get(id)
    for (const { client } of this.clients.values()) client.close() // a reload changed the CA, email or trust
    this.clients.clear()
    const dir = this.folder().folder('acme', slug(directory))
    const state = this.folder()
    let keyPem = state.read(path.join(dir, 'account.key'))
    if (keyPem === null) {
      keyPem = newKey().privateKey.export({ type: 'pkcs8', format: 'pem' })
      state.write(path.join(dir, 'account.key'), keyPem, { secret: true })
    }
    const known = state.readJson(path.join(dir, 'account.json'))
    const kid = known !== null && known.directory === directory ? known.url : null
    const caPem = ca === null ? null : readCa(ca)
    const client = new AcmeClient({
      directoryUrl: directory, ca: caPem, accountKey: crypto.createPrivateKey(keyPem), email, kid, sleep: this.sleep
    })
    const remember = url => state.writeJson(path.join(dir, 'account.json'), { directory, url, email })
    const account = { client, dir, remember }
    this.clients.set(id, account)
    return account
  }

  // A challenge lila answers while a CA validates, on every server.
  async present (challenge) {
    const update = { kind: 'challenge', op: 'add', ...challengeUpdate(challenge) }
    const id = `${challenge.type} ${challenge.name} ${challenge.token}`
    this.challenges.set(id, update)
    await this.publish(update)
    if (this.fleet !== null) await this.fleet.present(update)
  }

  async withdraw (challenge) {
    const id = `${challenge.type} ${challenge.name} ${challenge.token}`
    const update = this.challenges.get(id)
    this.challenges.delete(id)
    if (update === undefined) return
    await this.publish({ ...update, op: 'remove', cert: undefined, key: undefined })
    if (this.fleet !== null) await this.fleet.withdraw(update).catch(() => {})
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

const slug = text => String(text).replace(/^https?:\/\//, '').replace(/[^A-Za-z0-9.-]+/g, '_').slice(0, 80)

function readCa (file) {
  try {
    return fs.readFileSync(file, 'utf8')
  } catch (err) {
    const reason = err.code === 'ENOENT' ? 'no such file' : err.code || err.message
    throw new UsageError(`cannot read ${JSON.stringify(file)} (--acme-ca): ${reason}`)
  }
}

module.exports = { Keeper }
