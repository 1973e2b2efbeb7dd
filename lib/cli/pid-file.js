'use strict'

const fs = require('fs')
const path = require('path')
const { RuntimeError, reasonOf } = require('../errors')

// --pid-file: the process's ID, one line, for `lila upgrade --pid-file` and systemd's
// PIDFile= (which follows the file when the main process hands over and exits).
//
//   writePidFile(file, pid)    written whole or not at all (a new file renamed over it),
//                              so a reader never sees half of it; a RuntimeError if it
//                              cannot be written
//   removePidFile(file, pid)   removed at exit, only if it still names `pid` (after an
//                              upgrade it names the new lila)
//   readPidFile(file)          -> the ID; a RuntimeError saying what is wrong otherwise

function writePidFile (file, pid) {
  const temporary = path.join(path.dirname(file), `.${path.basename(file)}.${pid}`)
  try {
    fs.writeFileSync(temporary, `${pid}\n`, { mode: 0o644 })
    fs.renameSync(temporary, file)
  } catch (err) {
    try { fs.unlinkSync(temporary) } catch {}
    throw new RuntimeError(`cannot write --pid-file ${file}: ${reasonOf(err)}`, err)
  }
}

function removePidFile (file, pid) {
  try {
    if (fs.readFileSync(file, 'utf8').trim() === String(pid)) fs.unlinkSync(file)
  } catch {} // gone already, or not ours to remove
}

function readPidFile (file) {
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (err) {
    throw new RuntimeError(`cannot read --pid-file ${file}: ${reasonOf(err)}`)
  }
  const pid = text.trim()
  if (!/^[1-9][0-9]{0,9}$/.test(pid)) {
    throw new RuntimeError(`--pid-file ${file} holds ${JSON.stringify(text.slice(0, 20))}: expected a process ID`)
  }
  return Number(pid)
}

module.exports = { writePidFile, removePidFile, readPidFile }
