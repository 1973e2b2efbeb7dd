'use strict'

const os = require('os')
const { runScript } = require('./scripts')

// The fleet's members, as each announces itself: a key per lila that lives MEMBER_TTL_MS
// unless renewed (every ANNOUNCE_MS), and a set of their IDs to find them by. One script
// announces this lila and reads the others (scripts.js ANNOUNCE); a lila that stops
// takes its key away, one that dies is gone once its key expires.
//
//   const members = new Members(client, prefix, { id, version, about })
//   await members.announce()   (fleet.js calls it every ANNOUNCE_MS while Redis is up)
//   members.list()             -> [{ id, host, pid, version, listeners, requestsPerSecond,
//                                  startedAt, lastSeenMs, self }] as last read

const ANNOUNCE_MS = 1000
const MEMBER_TTL_MS = 5000

class Members {
  // about() -> { listeners: ['127.0.0.2:8080', ...], requests: total so far }
  constructor (client, prefix, { id, version, about, now = Date.now }) {
    this.client = client
    this.prefix = prefix
    this.id = id
    this.version = version
    this.about = about
    this.now = now
    this.startedAt = now()
    this.last = null // { at, requests }: the count at the last announcement
    this.members = []
  }

  async announce () {
    const { listeners, requests } = this.about()
    const now = this.now()
    const rate = this.last === null || now <= this.last.at
      ? 0
      : (requests - this.last.requests) * 1000 / (now - this.last.at)
    this.last = { at: now, requests }
    const me = {
      id: this.id,
      host: os.hostname(),
      pid: process.pid,
      version: this.version,
      listeners,
      requestsPerSecond: Math.round(rate * 10) / 10,
      startedAt: this.startedAt
    }
    const keys = [`${this.prefix}members`, `${this.prefix}member:${this.id}`]
    const args = [JSON.stringify(me), MEMBER_TTL_MS, `${this.prefix}member:`, this.id]
    const flat = await runScript(this.client, 'ANNOUNCE', keys, args)
    const members = []
    for (let i = 0; i < flat.length; i += 2) {
      try {
        const member = JSON.parse(flat[i])
        members.push({ ...member, lastSeenMs: Math.max(0, MEMBER_TTL_MS - flat[i + 1]), self: member.id === this.id })
      } catch {} // not a lila's: left out
    }
    members.sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : 1))
    this.members = members
  }

  // Stopping: the others see it gone at once, not when its key expires.
  leave () {
    return Promise.all([
      this.client.command(['DEL', `${this.prefix}member:${this.id}`]),
      this.client.command(['SREM', `${this.prefix}members`, this.id])
    ])
  }

  list () {
    return this.members.map(m => ({ ...m, listeners: [...m.listeners] }))
  }
}

module.exports = { Members, ANNOUNCE_MS }
