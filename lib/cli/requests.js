'use strict'

const fs = require('fs')
const os = require('os')
const path = require('path')
const { readPidFile } = require('./pid-file')
const { reasonOf } = require('../errors')

// What a command asks a running lila (`lila upgrade`, `lila restart-app`). A signal
// carries no words, so they go through two files beside the PID file (or, given a PID,
// in the temporary folder), KIND being the command's name:
//   FILE.KIND        the request, written by the command before it sends SIGUSR2. The
//                    running lila takes it only if it is its own user's or root's and no
//                    one else may write it (else anyone could have it run a program).
//   FILE.KIND.done   the outcome, written by the running lila: { ok, message }.
// SIGUSR2 because every lila run as the executable handles it (it upgrades without a
// request), where SIGHUP would end one that has no config file and no app.
//
//   sendRequest(kind, { pid, pidFile, body, what, waitMs }, io) -> exit code  (the command)
//   takeRequest(kind, { pid, pidFile }) -> { body, report(outcome) } or null  (the running lila)
//   waiting(kind, { pid, pidFile }) -> a stamp of the request there, not answered, or null

const POLL_MS = 100

function requestPath (kind, { pid, pidFile }) {
  return pidFile !== null ? `${pidFile}.${kind}` : path.join(os.tmpdir(), `lila-${pid}.${kind}`)
}

// `what`: the request in words ("upgrade", "rolling restart"), for the lines said.
async function sendRequest (kind, { pid, pidFile, body, what, waitMs }, { stdout, stderr, signal = process.kill }) {
  const fail = (message, code = 1) => {
    stderr.write(`lila: ${message}\n`)
    return code
  }
  let target = pid
  if (target === null) {
    try {
      target = readPidFile(pidFile)
    } catch (err) {
      return fail(err.message)
    }
  }
  if (catches(target, 'SIGUSR2') === false) {
    const from = pidFile === null ? '' : ` (from --pid-file ${pidFile})`
    return fail(`pid ${target}${from} does not handle SIGUSR2, which would end it: is it lila?`)
  }
  const file = requestPath(kind, { pid: target, pidFile })
  const done = `${file}.done`
  try { fs.unlinkSync(done) } catch {}
  try {
    writeRequest(file, JSON.stringify({ ...body, by: process.pid }))
  } catch (err) {
    return fail(err.code === 'EEXIST'
      ? `${article(what)} ${what} of pid ${target} is under way already (${file} exists)`
      : `cannot write ${file}: ${reasonOf(err)}`)
  }
  const cleanUp = () => {
    for (const name of [file, done]) try { fs.unlinkSync(name) } catch {}
  }
  try {
    signal(target, 'SIGUSR2')
  } catch (err) {
    cleanUp()
    const from = pidFile === null ? '' : ` (from --pid-file ${pidFile})`
    if (err.code === 'ESRCH') return fail(`no process ${target}${from}: is lila running?`)
    if (err.code === 'EPERM') return fail(`not allowed to signal pid ${target}${from}: run as its user or root`)
    return fail(`cannot signal pid ${target}: ${reasonOf(err)}`)
  }
  const deadline = Date.now() + waitMs
  for (let i = 0; i < waitMs / POLL_MS + 1 && Date.now() <= deadline; i++) {
    await new Promise(resolve => setTimeout(resolve, POLL_MS))
    const outcome = readOutcome(done)
    if (outcome !== null) {
      cleanUp()
      if (outcome.ok) {
        stdout.write(`lila: ${outcome.message}\n`)
        return 0
      }
      return fail(outcome.message)
    }
    if (!alive(target, signal)) {
      cleanUp()
      return fail(`pid ${target} exited without saying how the ${what} went; see its log`)
    }
  }
  cleanUp()
  return fail(`pid ${target} said nothing of the ${what} in ${waitMs / 1000}s; see its log`)
}

// Does process `pid` catch `signal`? Read from /proc (Linux): null when unknown (no such
// file, another system), and then the signal is sent as it is.
function catches (pid, signal) {
  let status
  try {
    status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  } catch {
    return null
  }
  const mask = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)
  if (mask === null) return null
  const number = os.constants.signals[signal]
  return (BigInt(`0x${mask[1]}`) >> BigInt(number - 1) & 1n) === 1n
}

function article (word) {
  return /^[aeiou]/.test(word) ? 'an' : 'a'
}

// Written whole, or found there: a request left by a command that is gone is replaced.
function writeRequest (file, text) {
  for (let tries = 0; tries < 2; tries++) {
    try {
      fs.writeFileSync(file, text, { flag: 'wx', mode: 0o644 })
      return
    } catch (err) {
      if (err.code !== 'EEXIST' || tries > 0) throw err
      let by = null
      try { by = JSON.parse(fs.readFileSync(file, 'utf8')).by } catch {}
      if (Number.isInteger(by) && alive(by)) throw err
      fs.unlinkSync(file)
    }
  }
}

function readOutcome (file) {
  try {
    const outcome = JSON.parse(fs.readFileSync(file, 'utf8'))
    return typeof outcome.message === 'string' ? outcome : null
  } catch {
    return null // not there yet (or not whole yet)
  }
}

function alive (pid, signal = process.kill) {
  try {
    signal(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}

// In the running lila, on SIGUSR2: the request of `kind` a command left, if any (beside
// the PID file, else in the temporary folder).
function takeRequest (kind, { pid = process.pid, pidFile = null } = {}) {
  for (const file of candidates(kind, { pid, pidFile })) {
    const body = readRequest(file)
    if (body !== null) return { body, report: outcome => writeOutcome(`${file}.done`, outcome) }
  }
  return null
}

// The request of `kind` there and not answered yet, as a stamp that tells one request
// from the next (its file's inode and time), or null. (An upgrade's request is taken by
// the upgrade itself.)
function waiting (kind, { pid = process.pid, pidFile = null } = {}) {
  for (const file of candidates(kind, { pid, pidFile })) {
    try {
      const stat = fs.statSync(file)
      if (!fs.existsSync(`${file}.done`)) return `${file} ${stat.ino} ${stat.mtimeMs}`
    } catch {}
  }
  return null
}

function candidates (kind, { pid, pidFile }) {
  return [...(pidFile === null ? [] : [requestPath(kind, { pid, pidFile })]), requestPath(kind, { pid, pidFile: null })]
}

// A request file this lila may trust: a plain file (not a link), its user's or root's,
// written by no one else.
function readRequest (file) {
  let fd
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
  } catch {
    return null
  }
  try {
    const stat = fs.fstatSync(fd)
    const uid = typeof process.getuid === 'function' ? process.getuid() : stat.uid
    if (!stat.isFile() || (stat.uid !== uid && stat.uid !== 0) || (stat.mode & 0o022) !== 0) return null
    const body = JSON.parse(fs.readFileSync(fd, 'utf8'))
    return body !== null && typeof body === 'object' ? body : null
  } catch {
    return null
  } finally {
    fs.closeSync(fd)
  }
}

function writeOutcome (file, outcome) {
  try { fs.unlinkSync(file) } catch {}
  try {
    fs.writeFileSync(file, JSON.stringify(outcome), { flag: 'wx', mode: 0o644 })
  } catch {} // the command waits in vain, then says so; the log has the outcome
}

module.exports = { sendRequest, takeRequest, waiting }
