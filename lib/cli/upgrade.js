'use strict'

const fs = require('fs')
const path = require('path')
const { UpgradeError, reasonOf } = require('../errors')
const { UPGRADE } = require('./inherited')
const { takeRequest } = require('./upgrade-command')
const { writePidFile } = require('./pid-file')
const VERSION = require('../version')

// A running lila handing its listening sockets to a new one (`lila upgrade`, SIGUSR2),
// as nginx's USR2 and HAProxy's -x do: nothing is refused, nothing in flight is cut.
//
// In the running lila, startSuccessor(options) -> { done, cancel }:
//   1. the executable (its own path again, the file there now, or --exec PATH) is
//      checked first when it is a Node script (node --check: a syntax error is said in
//      one line and nothing is started); a lila whose lib/ sits in a comment for its
//      loader to compile (scripts/bundle-loader.js) has that compiled too, not run
//      (LILA_BUNDLE=check);
//   2. it is started with the same arguments, in its own session (it outlives this
//      process), the same stdout and stderr (the log goes where it went), the
//      listening sockets as descriptors 3, 4, ... and an IPC channel after them;
//      LILA_UPGRADE says what each descriptor is, who hands them over, and the run-time
//      state to take on (admin/journal.js);
//   3. it starts as any lila does (config, backends checked), on those sockets, and
//      says 'listening'. Both processes accept for SETTLE_MS: a new lila that crashes in
//      its first moments leaves this one serving as if nothing happened;
//   4. then 'take-over': it writes the PID file, says "upgraded from ...", answers
//      'took-over', and the channel closes. `done` resolves with { pid, version }: this
//      lila stops accepting and lets what it carries finish (main.js).
//   Any failure rejects `done` with an UpgradeError saying why in one line (and the new
//   process, if any, is stopped); this lila goes on serving.
//
// In the new lila, takeOver(channel, takeOverWork) and reportFailure(channel, message):
// the other side of the channel (main.js calls them).

const SETTLE_MS = 1000
const START_TIMEOUT_MS = 60000
const ANSWER_TIMEOUT_MS = 5000

function startSuccessor ({
  program, exec = null, args, execArgv = process.execArgv, env = process.env, sockets, state
}) {
  let child = null
  let cancelled = false
  const done = (async () => {
    const file = path.resolve(exec || program)
    const { nodeScript, bundled } = await kindOf(file)
    if (nodeScript) await checkSyntax(file, ['--check', file])
    if (bundled) await checkSyntax(file, [file], { ...env, LILA_BUNDLE: 'check', LILA_CODE_CACHE: 'off' })
    if (cancelled) throw new UpgradeError('cancelled')
    const handed = sockets.map(({ fd, server, ...what }, i) => ({ ...what, fd: 3 + i }))
    const word = JSON.stringify({ pid: process.pid, version: VERSION, sockets: handed, state })
    const [command, commandArgs] = nodeScript ? [process.execPath, [...execArgv, file, ...args]] : [file, args]
    // child_process is required when an upgrade starts: every lila can hand over, few do.
    child = require('child_process').spawn(command, commandArgs, {
      stdio: ['ignore', 'inherit', 'inherit', ...sockets.map(s => s.fd), 'ipc'],
      env: { ...env, [UPGRADE]: word },
      detached: true
    })
    return await handOver(child, file)
  })()
  return {
    done,
    cancel () {
      cancelled = true
      if (child !== null && child.exitCode === null) child.kill('SIGTERM')
    }
  }
}

// The conversation with the new process, until it took over or failed.
function handOver (child, file) {
  return new Promise((resolve, reject) => {
    let said = null // why it failed, in its own words ('failed')
    let version = null
    let timer = setTimeout(() => fail(`it did not listen within ${START_TIMEOUT_MS / 1000}s`, true), START_TIMEOUT_MS)
    const finish = () => {
      clearTimeout(timer)
      child.off('message', onMessage)
      child.off('exit', onExit)
      child.off('error', onError)
    }
    const fail = (why, kill = false) => {
      finish()
      if (kill && child.exitCode === null) child.kill('SIGKILL')
      reject(new UpgradeError(`the new lila (${file}${child.pid ? `, pid ${child.pid}` : ''}) ${why}`))
    }
    const onMessage = message => {
      if (message === null || typeof message !== 'object') return
      switch (message.lila) {
        case 'listening':
          version = message.version
          clearTimeout(timer)
          timer = setTimeout(() => {
            child.send({ lila: 'take-over' })
            timer = setTimeout(() => fail('did not answer', true), ANSWER_TIMEOUT_MS)
          }, SETTLE_MS)
          return
        case 'failed':
          said = message.message
          return
        case 'took-over':
          finish()
          child.disconnect()
          child.unref()
          return resolve({ pid: child.pid, version })
      }
    }
    const onExit = (code, signal) => {
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`
      const when = version === null ? 'before it listened' : 'right after it listened'
      fail(said !== null ? `could not start: ${said}` : `${how} ${when}`)
    }
    const onError = err => fail(`could not be started: ${reasonOf(err)}`, true)
    child.on('message', onMessage)
    child.on('exit', onExit)
    child.on('error', onError)
  })
}

// The loader's line that compiles the bundle without running it, within its first
// HEAD_BYTES: a lila that holds its lib/ in a comment, which `node --check` skips.
const BUNDLE_CHECK = "process.env.LILA_BUNDLE === 'check'"
const HEAD_BYTES = 16 * 1024

// { nodeScript, bundled }: a script Node runs (its #! line names node, or a .js name),
// rather than a program of another kind (a wrapper, a binary), which is started as it
// is; and whether it is a lila whose bundle its loader can check.
async function kindOf (file) {
  let head
  try {
    const handle = await fs.promises.open(file, 'r')
    try {
      const { buffer, bytesRead } = await handle.read(Buffer.alloc(HEAD_BYTES), 0, HEAD_BYTES, 0)
      head = buffer.subarray(0, bytesRead).toString('latin1')
    } finally {
      await handle.close()
    }
  } catch (err) {
    throw new UpgradeError(`cannot read ${file}: ${reasonOf(err)}`)
  }
  const nodeScript = /\.[cm]?js$/.test(file) || (head.startsWith('#!') && /\bnode\b/.test(head.split('\n')[0]))
  return { nodeScript, bundled: nodeScript && head.includes(BUNDLE_CHECK) }
}

// `node --check FILE`, or the loader's check of its bundle: a syntax error, in one
// line, before anything starts.
function checkSyntax (file, args, env = process.env) {
  const { execFile } = require('child_process')
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { timeout: 30000, env }, (err, stdout, stderr) => {
      if (err === null) return resolve()
      const lines = String(stderr).split('\n')
      const error = lines.find(line => /^[A-Z]\w*Error\b/.test(line)) ||
        lines.find(line => line.trim()) || reasonOf(err)
      const where = /^(\/.*:\d+)$/.exec(lines[0] || '')
      reject(new UpgradeError(`${file} does not run: ${error}${where === null ? '' : ` (${where[1]})`}`))
    })
  })
}

// The new lila, listening: tell the lila before, wait for its word (or for it to be
// gone), then `work()` (the PID file, the line); resolves true once taken over, false
// if `work` failed (said to the lila before, which goes on serving).
function takeOver (channel, work) {
  return new Promise(resolve => {
    const go = () => {
      channel.off('message', onMessage)
      channel.off('disconnect', go)
      try {
        work()
      } catch (err) {
        reportFailure(channel, err.message)
        return resolve(false)
      }
      if (channel.connected) channel.send({ lila: 'took-over' }, () => disconnect(channel))
      resolve(true)
    }
    const onMessage = message => { if (message && message.lila === 'take-over') go() }
    if (!channel.connected) return go()
    channel.on('message', onMessage)
    channel.on('disconnect', go) // the lila before is gone: there is no one to wait for
    channel.send({ lila: 'listening', version: VERSION })
  })
}

// Why this lila could not start, for the one that started it (before it exits).
function reportFailure (channel, message) {
  if (!channel.connected) return Promise.resolve()
  return new Promise(resolve => {
    channel.send({ lila: 'failed', message }, () => {
      disconnect(channel)
      resolve()
    })
  })
}

function disconnect (channel) {
  if (channel.connected) channel.disconnect()
}

// The running lila's part, for main.js (one process, or the --workers primary):
//   createUpgrader({ program, args, pidFile, sockets, state, log, handOver })
//     sockets() -> promise of the listening sockets ([{ role, name, protocol, host, port,
//     fd }]; `release()` once started, if given); state() -> the journal's entries;
//     handOver(pid): the new lila took over, stop accepting and drain.
//   -> { upgrade() (SIGUSR2; one at a time), cancel() (stopping meanwhile) }
function createUpgrader ({ program, args, pidFile, sockets, state, log, handOver }) {
  let current = null
  let over = false
  async function upgrade () {
    if (over) return refuseUpgrade({ pidFile, log }, 'handed over already; letting open connections finish')
    if (current !== null) return refuseUpgrade({ pidFile, log }, 'an upgrade is under way already')
    const request = takeRequest({ pidFile })
    const report = (ok, message) => {
      if (!ok) log.error(message) // (the new lila says its success itself)
      request.report({ ok, message })
    }
    log.info(`SIGUSR2: starting ${request.exec || program} to take over`)
    current = { cancel () {} }
    try {
      const handed = await sockets()
      try {
        current = startSuccessor({ program, exec: request.exec, args, sockets: handed, state: state() })
        const { pid, version } = await current.done
        over = true
        current = null
        report(true, `upgraded from ${VERSION} (pid ${process.pid}) to ${version} (pid ${pid})`)
        handOver(pid)
      } finally {
        if (typeof handed.release === 'function') handed.release()
      }
    } catch (err) {
      if (!(err instanceof UpgradeError)) throw err
      report(false, `upgrade failed: ${err.message}; pid ${process.pid} goes on serving`)
    } finally {
      current = null
    }
  }
  return {
    upgrade,
    cancel () { if (current !== null) current.cancel() }
  }
}

// A SIGUSR2 this lila cannot act on now: said, and answered to `lila upgrade`.
function refuseUpgrade ({ pidFile, log }, why) {
  log.warn(`SIGUSR2: ${why}; no upgrade`)
  takeRequest({ pidFile }).report({ ok: false, message: `pid ${process.pid}: ${why}; no upgrade` })
}

// The new lila's part once it listens: take on the run-time state (`perform`: the
// control's, journaled), then take over from the lila before and say so; or, started
// any other way, write the PID file. Resolves false when it must not serve after all
// (the PID file could not be written: said, and told to the lila before).
async function enterService ({ inherited, channel, pidFile, log, perform }) {
  const from = inherited.upgrade
  if (from === null) return writePid(pidFile, log)
  for (const action of from.state) {
    try {
      await perform(action)
    } catch (err) {
      log.info(`upgrade: not carried over: ${action.op} ${action.backend || ''}: ${err.message}`)
    }
  }
  return takeOver(channel, () => {
    if (pidFile !== null) writePidFile(pidFile, process.pid) // (throws: said to the lila before)
    log.always(`upgraded from ${from.version} (pid ${from.pid}) to ${VERSION} (pid ${process.pid})`)
  })
}

// The PID file of a lila started afresh: true when written (or none asked for), false
// when it cannot be (said).
function writePid (pidFile, log) {
  if (pidFile === null) return true
  try {
    writePidFile(pidFile, process.pid)
    return true
  } catch (err) {
    log.error(err.message)
    return false
  }
}

// The last line a stream was given (but "Try 'lila --help'."), or noted: why a new lila
// could not start, for the lila that started it. -> { stream, note(line), last() }
function rememberLastLine (stream) {
  let last = ''
  return {
    stream: {
      write (text) {
        const lines = String(text).split('\n').filter(line => line.trim() && !line.startsWith('Try '))
        if (lines.length > 0) last = lines[lines.length - 1].replace(/^lila: /, '')
        return stream.write(text)
      },
      get isTTY () { return stream.isTTY },
      get columns () { return stream.columns }
    },
    note: line => { last = line },
    last: () => last
  }
}

module.exports = {
  startSuccessor,
  takeOver,
  reportFailure,
  createUpgrader,
  refuseUpgrade,
  enterService,
  writePid,
  rememberLastLine,
  SETTLE_MS
}
