'use strict'

const fs = require('fs')
const os = require('os')
const path = require('path')
const { readPidFile } = require('./pid-file')
const { reasonOf } = require('../errors')

// `lila upgrade PID` or `lila upgrade --pid-file FILE`, and the running lila's side of
// it. A signal carries no words, so they go through two files beside the PID file (or,
// given a PID, in the temporary folder):
//   FILE.upgrade        the request, written by `lila upgrade` before it sends SIGUSR2:
//                       { exec } (null: lila's own path). The running lila takes it
//                       only if it is its own user's or root's and no one else may
//                       write it (else anyone could have it run a program).
//   FILE.upgrade.done   the outcome, written by the running lila: { ok, message }.
// A SIGUSR2 without a request (kill -USR2) upgrades to lila's own path, and the outcome
// is in the log only.
//
//   requestUpgrade({ pid, pidFile, exec }, io) -> exit code   (the command)
//   takeRequest({ pid, pidFile }) -> { exec, report(outcome) }  (the running lila)

const POLL_MS = 100
const WAIT_MS = 120000 // the new lila's start (backends checked) and the settling

function requestPath ({ pid, pidFile }) {
  return pidFile !== null ? `${pidFile}.upgrade` : path.join(os.tmpdir(), `lila-${pid}.upgrade`)
}

async function requestUpgrade ({ pid, pidFile, exec }, { stdout, stderr, signal = process.kill }) {
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
  const file = requestPath({ pid: target, pidFile })
  const done = `${file}.done`
  const request = JSON.stringify({ exec: exec === null ? null : path.resolve(exec), by: process.pid })
  try { fs.unlinkSync(done) } catch {}
  try {
    writeRequest(file, request)
  } catch (err) {
    return fail(err.code === 'EEXIST'
      ? `an upgrade of pid ${target} is under way already (${file} exists)`
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
  const deadline = Date.now() + WAIT_MS
  for (let i = 0; i < WAIT_MS / POLL_MS + 1 && Date.now() <= deadline; i++) {
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
      return fail(`pid ${target} exited without saying how the upgrade went; see its log`)
    }
  }
  cleanUp()
  return fail(`pid ${target} said nothing of the upgrade in ${WAIT_MS / 1000}s; see its log`)
}

// Written whole, or found there: a request left by a `lila upgrade` that is gone is
// replaced.
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

// In the running lila, on SIGUSR2: the request `lila upgrade` left, if any.
function takeRequest ({ pid = process.pid, pidFile = null } = {}) {
  const candidates = [...(pidFile === null ? [] : [requestPath({ pid, pidFile })]), requestPath({ pid, pidFile: null })]
  for (const file of candidates) {
    const request = readRequest(file)
    if (request !== null) return { exec: request.exec, report: outcome => writeOutcome(`${file}.done`, outcome) }
  }
  return { exec: null, report () {} }
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
    const request = JSON.parse(fs.readFileSync(fd, 'utf8'))
    return { exec: typeof request.exec === 'string' ? request.exec : null }
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

module.exports = { requestUpgrade, takeRequest, requestPath }
