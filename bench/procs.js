'use strict'

// Child processes for the bench: spawned pinned to a CPU, each in its own process
// group so that stopping it also stops what it forked (nginx master + worker), and
// all of them remembered so that nothing outlives the harness, whatever ends it.

const { spawn, spawnSync } = require('child_process')
const net = require('net')
const fs = require('fs')
const path = require('path')

const children = new Set()

// Whether `name` is an executable on PATH (or an existing path).
function which (name) {
  if (name.includes('/')) return fs.existsSync(name) ? name : null
  for (const dir of (process.env.PATH || '').split(':')) {
    const candidate = path.join(dir || '.', name)
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      return candidate
    } catch {}
  }
  // Debian keeps haproxy and nginx in /usr/sbin, which a non-root PATH may lack.
  for (const dir of ['/usr/sbin', '/sbin', '/usr/local/sbin']) {
    const candidate = path.join(dir, name)
    if (fs.existsSync(candidate)) return candidate
  }
  return null
}

// The argv that runs lila at `lilaPath`: the file itself when executable (as users run
// it), else through node.
function lilaArgv (lilaPath) {
  try {
    fs.accessSync(lilaPath, fs.constants.X_OK)
    return [lilaPath]
  } catch {
    return ['node', lilaPath]
  }
}

// The argv that runs `argv` on `cpu` (when taskset exists and a cpu is given). taskset
// execs the command, so the pid we get is the program's own.
function pinned (cpu, argv) {
  if (cpu === null || cpu === undefined || !which('taskset')) return argv
  return ['taskset', '-c', String(cpu), ...argv]
}

// Start a long-running child. Resolves once a line on stdout or stderr matches
// `ready` (the match is returned), rejects if the child exits first or `timeoutMs`
// passes. The child's output is kept (last few KiB) for error messages.
function start (argv, { cpu = null, ready, timeoutMs = 10000, env, cwd, ipc = false, ulimitN = null } = {}) {
  let full = pinned(cpu, argv)
  // A raised fd limit needs a shell: `ulimit -n` cannot be changed for another process
  // from Node. Up to ulimitN, or the hard limit when that is lower (containers often
  // forbid raising it even to root). `exec` keeps the pid the program's own.
  if (ulimitN !== null) {
    full = ['sh', '-c', `ulimit -n ${ulimitN} 2>/dev/null || ulimit -n "$(ulimit -Hn)" || exit 111; exec "$@"`, 'sh', ...full]
  }
  const stdio = ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe']
  const child = spawn(full[0], full.slice(1), { stdio, env: env || process.env, cwd, detached: true })
  children.add(child)
  let output = ''
  let exited = null
  const handle = {
    child,
    pid: child.pid,
    argv: full,
    output: () => output,
    exited: () => exited,
    stop: () => stop(child)
  }
  return new Promise((resolve, reject) => {
    let settled = false
    const timer = setTimeout(() => finish(new Error(`${argv[0]} not ready after ${timeoutMs} ms: ${tail(output)}`)), timeoutMs)
    function finish (err, match) {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (err) {
        stop(child).then(() => reject(err))
      } else {
        handle.ready = match
        resolve(handle)
      }
    }
    const onData = chunk => {
      output = (output + chunk).slice(-8192)
      if (settled || !ready) return
      const m = output.match(ready)
      if (m) finish(null, m)
    }
    child.stdout.setEncoding('utf8').on('data', onData)
    child.stderr.setEncoding('utf8').on('data', onData)
    child.on('error', err => finish(err))
    child.on('exit', (code, signal) => {
      exited = { code, signal }
      children.delete(child)
      const why = code === 111 && ulimitN !== null ? `cannot raise ulimit -n to ${ulimitN}` : `exited (${signal || code})`
      finish(new Error(`${argv[0]} ${why}: ${tail(output)}`))
    })
    if (!ready) setImmediate(() => finish(null, null))
  })
}

function tail (text) {
  const lines = text.trim().split('\n').filter(Boolean)
  return lines.slice(-3).join(' | ') || '(no output)'
}

// SIGTERM the child's process group; SIGKILL it if it is still there after a grace
// period. Resolves once it has exited.
function stop (child, graceMs = 3000) {
  if (child.exitCode !== null || child.signalCode !== null) {
    children.delete(child)
    return Promise.resolve()
  }
  return new Promise(resolve => {
    const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs)
    child.once('exit', () => {
      clearTimeout(timer)
      // The group may still hold a grandchild (nginx worker) for an instant.
      signalGroup(child, 'SIGKILL')
      children.delete(child)
      resolve()
    })
    signalGroup(child, 'SIGTERM')
  })
}

function signalGroup (child, signal) {
  try {
    process.kill(-child.pid, signal)
  } catch {
    try { child.kill(signal) } catch {}
  }
}

// Synchronous last resort: on exit, Ctrl-C or a crash, kill every group we started.
function killAll () {
  for (const child of children) signalGroup(child, 'SIGKILL')
  children.clear()
}

let installed = false
function installCleanup () {
  if (installed) return
  installed = true
  process.on('exit', killAll)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      process.stderr.write(`\nbench: ${signal}, stopping everything\n`)
      killAll()
      process.exit(130)
    })
  }
  process.on('uncaughtException', err => {
    process.stderr.write(`bench: ${err && err.stack}\n`)
    killAll()
    process.exit(1)
  })
  process.on('unhandledRejection', err => {
    process.stderr.write(`bench: ${err && err.stack}\n`)
    killAll()
    process.exit(1)
  })
}

// A free TCP port on 127.0.0.1, for programs that cannot take --port 0 and report back
// (nginx, HAProxy). Tiny race with other processes; the caller retries on bind errors.
function freePort () {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

// Run a command to completion (wrk, the Node load generator), tracked like the
// long-running ones so that Ctrl-C stops it too. Resolves with its output; rejects on
// a non-zero exit or after timeoutMs (the command is then killed).
function run (argv, timeoutMs) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    children.add(child)
    let output = ''
    const onData = chunk => { output = (output + chunk).slice(-65536) }
    child.stdout.setEncoding('utf8').on('data', onData)
    child.stderr.setEncoding('utf8').on('data', onData)
    const timer = setTimeout(() => {
      signalGroup(child, 'SIGKILL')
      reject(new Error(`${argv[0]} did not finish in ${timeoutMs} ms`))
    }, timeoutMs)
    child.on('error', err => { clearTimeout(timer); children.delete(child); reject(err) })
    // 'close' rather than 'exit': all output has been read by then.
    child.on('close', code => {
      clearTimeout(timer)
      children.delete(child)
      if (code === 0) resolve(output)
      else reject(new Error(`${argv[0]} failed (${code}): ${tail(output)}`))
    })
  })
}

// Run a command to completion, synchronously (short tools: nginx -t, haproxy -c).
function runSync (argv, opts = {}) {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 15000, ...opts })
  return { code: r.status, out: `${r.stdout || ''}${r.stderr || ''}`, error: r.error }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// A process that says "listening on HOST:PORT" on its stderr (lila, or a bare server
// told to): { child, port } once it has, rejected with what it said if it exits first.
function startListening (command, args, options = {}) {
  const child = require('child_process').spawn(command, args, { ...options, stdio: ['ignore', 'ignore', 'pipe'] })
  return new Promise((resolve, reject) => {
    let err = ''
    child.stderr.on('data', chunk => {
      err += chunk
      const listening = /listening on \S+:(\d+)/.exec(err)
      if (listening) resolve({ child, port: Number(listening[1]) })
    })
    child.on('exit', () => reject(new Error(err)))
  })
}

module.exports = {
  which, lilaArgv, pinned, start, run, killAll, installCleanup, freePort, runSync, sleep, tail, startListening
}
