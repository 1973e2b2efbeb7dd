'use strict'

const crypto = require('crypto')
const { runScript } = require('./scripts')

// --tls acme for a fleet: one order per name for the whole fleet, taken under a lock in
// Redis whose expiry the holder keeps renewing (a lila that dies mid-order frees it);
// the challenges and the certificates kept in Redis and published, so that any lila
// answers the CA's probe and serves what another got. tls/keeper.js takes this as its
// `fleet` (it knows nothing of Redis):
//
//   await store.lock(key)       -> { release(), held } or null (another lila holds it);
//                                  rejects while Redis is unavailable (the keeper waits)
//   await store.current(key)    -> { cert, key } kept in Redis, or null
//   await store.keep(key, material)   kept and published to every lila
//   await store.present(update), store.withdraw(update)   a challenge (proxy/tls.js's
//                                  update) on every lila, or no longer
//   store.listen({ certificate(key, material), challenge(update) })   what other lilas
//                                  keep and present, as it comes and after a reconnect
//
// The private key goes into Redis as it is, or sealed with --fleet-key (AES-256-GCM).

const LOCK_TTL_MS = 10000 // a lock not renewed this long is free again
const RENEW_LOCK_EVERY_MS = 3000
const STARTING_MS = 2000

class SharedCertificates {
  constructor (client, prefix, { id, log, secret = null }) {
    this.client = client
    this.prefix = `${prefix}acme:`
    this.channel = `${prefix}acme:channel`
    this.id = id
    this.log = log
    this.secret = secret // a 32-byte key, or null
    this.listener = null
    this.unreadable = false
  }

  async lock (key) {
    await this.client.whenUp(STARTING_MS) // a lila just started: its connection is on its way
    const name = `${this.prefix}lock:${key}`
    const taken = await this.client.command(['SET', name, this.id, 'NX', 'PX', LOCK_TTL_MS])
    if (taken !== 'OK') return null
    const lock = { held: true }
    const timer = setInterval(() => {
      runScript(this.client, 'RENEW_LOCK', [name], [this.id, LOCK_TTL_MS]).then(kept => {
        if (kept !== 1) lock.held = false
      }, () => {})
    }, RENEW_LOCK_EVERY_MS).unref()
    lock.release = () => {
      clearInterval(timer)
      lock.held = false
      return runScript(this.client, 'RELEASE_LOCK', [name], [this.id]).catch(() => {})
    }
    return lock
  }

  async current (key) {
    const text = await this.client.command(['HGET', `${this.prefix}certificates`, key])
    return text === null ? null : this.open(text)
  }

  async keep (key, material) {
    const text = JSON.stringify({ key, cert: material.cert, sealed: this.seal(material.key) })
    const keys = [`${this.prefix}certificates`, this.channel]
    await runScript(this.client, 'KEEP', keys, [key, text, `certificate ${text}`])
  }

  async present (update) {
    const text = JSON.stringify({ ...update, key: update.key === undefined ? undefined : this.seal(update.key) })
    await runScript(this.client, 'KEEP', [`${this.prefix}challenges`, this.channel],
      [challengeId(update), text, `challenge ${text}`])
  }

  async withdraw (update) {
    const text = JSON.stringify({ ...update, op: 'remove', cert: undefined, key: undefined })
    await this.client.command(['HDEL', `${this.prefix}challenges`, challengeId(update)])
    await this.client.command(['PUBLISH', this.channel, `challenge ${text}`])
  }

  listen (listener) {
    this.listener = listener
  }

  heard (text) {
    if (this.listener === null) return
    const space = text.indexOf(' ')
    const [kind, body] = [text.slice(0, space), text.slice(space + 1)]
    if (kind === 'certificate') {
      const material = this.open(body)
      if (material !== null) this.listener.certificate(material.name, material)
    } else if (kind === 'challenge') {
      this.takeChallenge(body)
    }
  }

  // After a (re)connect: the challenges under way, the certificates kept.
  async resync () {
    if (this.listener === null) return
    const challenges = await this.client.command(['HGETALL', `${this.prefix}challenges`])
    for (let i = 1; i < challenges.length; i += 2) this.takeChallenge(challenges[i])
    const certificates = await this.client.command(['HGETALL', `${this.prefix}certificates`])
    for (let i = 1; i < certificates.length; i += 2) {
      const material = this.open(certificates[i])
      if (material !== null) this.listener.certificate(material.name, material)
    }
  }

  takeChallenge (text) {
    try {
      const update = JSON.parse(text)
      if (update.key !== undefined) update.key = this.unseal(update.key)
      if (update.key !== null) this.listener.challenge(update)
    } catch {}
  }

  // A certificate as kept: { name (its key), cert, key } or null (unreadable: said once).
  open (text) {
    try {
      const { key: name, cert, sealed } = JSON.parse(text)
      const key = this.unseal(sealed)
      return key === null ? null : { name, cert, key }
    } catch {
      return null
    }
  }

  seal (text) {
    if (this.secret === null) return { plain: text }
    const iv = crypto.randomBytes(12)
    const cipher = crypto.createCipheriv('aes-256-gcm', this.secret, iv)
    const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()])
    return { iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), body: body.toString('base64') }
  }

  unseal (sealed) {
    if (sealed.plain !== undefined && this.secret === null) return sealed.plain
    try {
      if (this.secret === null) throw new Error('sealed')
      const decipher = crypto.createDecipheriv('aes-256-gcm', this.secret, Buffer.from(sealed.iv, 'base64'))
      decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'))
      return Buffer.concat([decipher.update(Buffer.from(sealed.body, 'base64')), decipher.final()]).toString('utf8')
    } catch {
      if (!this.unreadable) {
        this.unreadable = true
        this.log.warn('fleet: a key kept in Redis cannot be read here: every lila of the fleet needs the same ' +
          '--fleet-key (or none)')
      }
      return null
    }
  }
}

const challengeId = ({ type, name, token }) => `${type} ${name} ${token}`

module.exports = { SharedCertificates }
