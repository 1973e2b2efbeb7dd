'use strict'

const fs = require('fs')
const { EventEmitter } = require('events')
const { spawnWithLifeline, signalGroup, letGo } = require('./lifeline')
const { LastLines } = require('./log-lines')

const CLOSE_WAIT = 2000 // after its exit, for its pipes to end

// One process of the app: instance `number` (its LILA_INSTANCE) of `generation` (each
// start of a number is one more), listening on `port` (its PORT). It knows its process
// and nothing of traffic: app.js decides when it starts and stops.
//
//   state   'starting' -> 'ready' -> 'draining' -> 'stopping' -> 'exited'
//           (app.js sets ready and draining; stop() stopping; the exit exited)
//   'exit' (exit)   once: { code, signal, text: "exited with code 1" }
class Instance extends EventEmitter {
  constructor ({ number, generation, port, now = Date.now }) {
    super()
    this.number = number
    this.generation = generation
    this.port = port
    this.now = now
    this.child = null
    this.pid = null
    this.state = 'starting'
    this.startedAt = now()
    this.readyAt = null
    this.exit = null // { code, signal, text } once it exited
    this.last = new LastLines()
    this.exited = new Promise(resolve => this.once('exit', resolve))
    this.stopping = null // stop()'s promise
  }

  // Spawn `command` (settings as app.js keeps them); its lines go to `output`.
  start (command, { cwd, env, stopTimeout, output }) {
    let child
    try {
      child = spawnWithLifeline(command, { cwd, env, stopTimeout })
    } catch (err) {
      process.nextTick(() => this.#exited({ code: null, signal: null, text: `could not start: ${err.message}` }))
      return
    }
    this.child = child
    this.pid = child.pid === undefined ? null : child.pid
    const keep = text => this.last.add(text)
    output.follow(this.number, 'stdout', child.stdout, keep)
    output.follow(this.number, 'stderr', child.stderr, keep)
    child.stdio[3].on('error', () => {})
    child.on('error', err => this.#exited({ code: null, signal: null, text: `could not start: ${err.message}` }))
    // Its last lines are read before its exit is told: 'close' comes once its pipes
    // ended, which the group's SIGKILL makes sure of (what it started could hold them).
    child.on('exit', (code, signal) => {
      const exit = { code, signal, text: exitText(code, signal) }
      signalGroup(child, 'SIGKILL')
      letGo(child)
      const timer = setTimeout(() => this.#exited(exit), CLOSE_WAIT)
      child.once('close', () => {
        clearTimeout(timer)
        this.#exited(exit)
      })
    })
  }

  get running () {
    return this.exit === null
  }

  // How long it has been ready (0 while not).
  upFor (now = this.now()) {
    return this.readyAt === null ? 0 : now - this.readyAt
  }

  // Its resident memory in bytes, from /proc (Linux); null where that cannot be read.
  // The app's own process: a command that starts others (npm start) counts only itself.
  rss () {
    if (this.pid === null || this.exit !== null) return null
    try {
      const status = fs.readFileSync(`/proc/${this.pid}/status`, 'latin1')
      const match = /^VmRSS:\s+(\d+) kB/m.exec(status)
      return match === null ? null : Number(match[1]) * 1024
    } catch {
      return null
    }
  }

  // `signal` to its process group; SIGKILL to it after `timeout`. Resolves with its exit.
  stop (signal, timeout) {
    if (this.stopping !== null) return this.stopping
    if (this.exit === null) this.state = 'stopping'
    this.stopping = this.exit !== null
      ? Promise.resolve(this.exit)
      : new Promise(resolve => {
        const timer = setTimeout(() => signalGroup(this.child, 'SIGKILL'), timeout)
        this.exited.then(exit => {
          clearTimeout(timer)
          resolve(exit)
        })
        if (this.child === null || !signalGroup(this.child, signal)) signalGroup(this.child, 'SIGKILL')
      })
    return this.stopping
  }

  // Now: SIGKILL to the group (lila is cut short).
  kill () {
    if (this.child !== null && this.exit === null) signalGroup(this.child, 'SIGKILL')
  }

  #exited (exit) {
    if (this.exit !== null) return
    this.exit = exit
    this.state = 'exited'
    if (this.child !== null) letGo(this.child)
    this.emit('exit', exit)
  }

  // A plain snapshot.
  snapshot (now = this.now()) {
    return {
      number: this.number,
      generation: this.generation,
      pid: this.pid,
      port: this.port,
      state: this.state,
      startedAt: this.startedAt,
      uptime: this.exit === null ? now - this.startedAt : 0,
      rss: this.rss(),
      exit: this.exit === null ? null : this.exit.text
    }
  }
}

function exitText (code, signal) {
  return signal !== null ? `killed by ${signal}` : `exited with code ${code}`
}

// The environment instance `number` is started with: lila's, --app-env's, its PORT and
// LILA_INSTANCE; FORCE_COLOR when lila's output is a terminal (the app's is a pipe,
// but what it prints reaches that terminal).
function instanceEnv (base, { appEnv, colour, number, port }) {
  const env = { ...base }
  if (colour && env.FORCE_COLOR === undefined) env.FORCE_COLOR = '1'
  for (const [key, value] of appEnv) env[key] = value
  env.PORT = String(port)
  env.LILA_INSTANCE = String(number)
  return env
}

module.exports = { Instance, instanceEnv }
