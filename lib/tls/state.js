'use strict'

// The state folder (--state-dir): where lila keeps what it made and must find again
// after a restart: its local CA, its ACME accounts, the certificates it was issued and
// their keys. Folders are made 0700 and keys written 0600; every file is written to a
// temporary name and renamed, so a crash leaves the old file or the new one, never half
// of one. A folder or file that cannot be used is a UsageError naming it (the fix is
// --state-dir, or the folder's permissions).

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const os = require('os')
const { UsageError } = require('../errors')

const FILE_ERRORS = {
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOTDIR: 'a part of the path is not a folder',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
  EEXIST: 'a file is in the way'
}
const reason = err => FILE_ERRORS[err.code] || err.code || err.message

class StateFolder {
  constructor (dir) {
    this.dir = dir
  }

  // The path of `parts` inside the folder, its folder made (0700) if need be.
  folder (...parts) {
    const dir = path.join(this.dir, ...parts)
    try {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    } catch (err) {
      throw new UsageError(`cannot use the state folder ${JSON.stringify(dir)} (--state-dir): ${reason(err)}`)
    }
    return dir
  }

  // The folder's permission bits, made if need be (0700); null when they cannot be read.
  mode () {
    this.folder()
    try {
      return fs.statSync(this.dir).mode
    } catch {
      return null
    }
  }

  // A file's bytes, or null when there is none.
  read (file) {
    try {
      return fs.readFileSync(file)
    } catch (err) {
      if (err.code === 'ENOENT') return null
      throw new UsageError(`cannot read ${JSON.stringify(file)} (--state-dir): ${reason(err)}`)
    }
  }

  readJson (file) {
    const bytes = this.read(file)
    if (bytes === null) return null
    try {
      return JSON.parse(bytes)
    } catch {
      return null // written by a lila that died mid-way before renames were atomic, or by hand: start again
    }
  }

  // Write `data` whole or not at all; `secret`: readable by this user only.
  write (file, data, { secret = false } = {}) {
    const temporary = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`
    try {
      fs.writeFileSync(temporary, data, { mode: secret ? 0o600 : 0o644 })
      fs.renameSync(temporary, file)
    } catch (err) {
      try { fs.unlinkSync(temporary) } catch {}
      throw new UsageError(`cannot write ${JSON.stringify(file)} (--state-dir): ${reason(err)}`)
    }
  }

  writeJson (file, value) {
    this.write(file, `${JSON.stringify(value, null, 2)}\n`)
  }
}

// --state-dir's default: $XDG_DATA_HOME/lila, else ~/.local/share/lila.
function defaultStateDir (env = process.env, home = os.homedir()) {
  const xdg = env.XDG_DATA_HOME
  const data = xdg && path.isAbsolute(xdg) ? xdg : path.join(home, '.local', 'share')
  return path.join(data, 'lila')
}

module.exports = { StateFolder, defaultStateDir }
