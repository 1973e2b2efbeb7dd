'use strict'

const { Instance, instanceEnv } = require('./instance')
const { Backoff, STAYED_UP } = require('./backoff')
const { freePort } = require('./ports')
const { waitReady } = require('./readiness')
const { createOutput } = require('./log-lines')
const { watchFiles } = require('./watch-files')
const { checkRun } = require('./command')
const { rollingRestart } = require('./roll')
const { Listeners } = require('./listeners')
const { RuntimeError } = require('../errors')
const { formatDuration } = require('../format')
const { SAMPLE_EVERY, overLimit } = require('./instance-limits')

// `lila run`: the app's command started `instances` times, each instance a process
// (instance.js) on a port of its own. An instance is a backend of its listener only
// while it is ready: the App is the listener's membership source for the group given
// as { app: true } (upstream/membership.js subscribes with watch(), as discovery feeds
// a port range's), and says which ports are ready each time that changes; membership
// makes and retires the Backends, and tells, per port, whether its backend is up and
// how many connections it still has. The App knows nothing of HTTP.
//
// Each instance number (1..N, its LILA_INSTANCE) is a slot: an instance that exits is
// started again on its slot with backoff (backoff.js); a rolling restart (roll.js)
// gives each slot a new instance, which is ready before the one it replaces drains.
//
//   settings   the listener's "run" (config/builder.js): command, instances, appPorts,
//              appCwd, appEnv, readyTimeout, stopTimeout, stopSignal, surge, watch,
//              maxRss, maxAge, exitOnCrashLoop, appLogFormat
//   check      the readiness probe, as health.js probes: { type: 'tcp' } or --check's
//   name()     what leads its lines (the listener's name, or null for plain "app")
//   onGiveUp   every instance is crash-looping and --exit-on-crash-loop is given
class App {
  constructor (settings, {
    log, stdout, stderr, check, probeTimeout, name = () => null, env = process.env, now = Date.now, onGiveUp = () => {}
  }) {
    this.cwd = checkRun(settings, env) // a UsageError: nothing started
    this.settings = settings
    this.log = log
    this.check = check
    this.probeTimeout = probeTimeout
    this.env = env
    this.now = now
    this.onGiveUp = onGiveUp
    const colour = Boolean(stdout.isTTY) && !env.NO_COLOR
    this.colour = colour
    this.output = createOutput({ stdout, stderr, format: settings.appLogFormat, colour, app: name })
    this.slots = [] // { number, generation, instance, backoff, timer }
    this.running = new Set() // every instance not yet exited
    this.leaving = new Set() // replaced instances, draining then stopping
    this.listeners = new Listeners(now) // the memberships told of the ready ports
    this.restarts = {} // reason -> instances replaced or started again for it
    this.rolling = null // the rolling restart under way (a promise)
    this.nextRoll = null // { reason, why } asked for meanwhile: done after it
    this.spawning = Promise.resolve() // one port chosen at a time
    this.sampler = null
    this.watcher = null
    this.stopped = false
    this.stopping = null
  }

  // Start every instance. Resolves once one is ready (lila may listen); rejects with
  // a RuntimeError when each one failed its first start.
  async start () {
    const { instances, watch } = this.settings
    for (let number = 1; number <= instances; number++) this.slots.push(newSlot(number))
    const firsts = this.slots.map(slot => this.#launch(slot))
    await new Promise((resolve, reject) => {
      let failed = 0
      firsts.forEach((first, i) => first.then(reason => {
        if (reason === null) return resolve()
        if (++failed < firsts.length) return
        const said = this.slots[i].instance === null ? '' : this.slots[i].instance.last.said()
        reject(new RuntimeError(`app did not start: app.${i + 1} ${reason}${said}`))
      }))
    })
    if (this.stopped) return
    this.sampler = setInterval(() => this.#sample(), SAMPLE_EVERY)
    this.sampler.unref()
    if (watch.length > 0) {
      const log = this.log
      this.watcher = watchFiles(watch, file => this.roll('watch', `${file} changed`), { cwd: this.cwd, log })
    }
  }

  // --- membership's side (upstream/membership.js) ---

  // onResult(null, ports): the ports of the ready instances, now and on every change.
  // `live(port)`: the connections its backend still has; `up(port)`: may it take
  // traffic. Returns the function that ends the subscription.
  watch (onResult, { live, up }) {
    const unwatch = this.listeners.add({ onResult, live, up })
    onResult(null, this.readyPorts())
    return unwatch
  }

  // The ports of the instances ready: each slot's, and those replaced that do not drain
  // yet (their replacements' backends are not up yet).
  readyPorts () {
    const ports = []
    for (const slot of this.slots) {
      if (slot.instance !== null && slot.instance.state === 'ready') ports.push(slot.instance.port)
    }
    for (const instance of this.leaving) if (instance.state === 'ready') ports.push(instance.port)
    return ports.sort((a, b) => a - b)
  }

  // "app.2, pid 4242": the running instance on `port` (the start-up table's), or null.
  instanceAt (port) {
    for (const instance of this.running) {
      if (instance.port === port) return `app.${instance.number}, pid ${instance.pid}`
    }
    return null
  }

  announce () {
    this.listeners.tell(this.readyPorts())
  }

  // Resolves once the backends of `ports` are up, or after --ready-timeout.
  upstreamsUp (ports) {
    return this.listeners.up(ports, this.settings.readyTimeout)
  }

  // --- rolling restarts ---

  // Replace every instance (or those of `slots`), one at a time (--surge at a time).
  // `reason`: what /metrics counts it under (signal, control, watch, max-rss,
  // max-age); `why`: the log's words. One at a time: asked during one, another follows
  // it (once). Resolves with a line saying how it went.
  roll (reason, why, slots = null) {
    if (this.stopped) return Promise.resolve('lila is stopping: no rolling restart')
    if (this.rolling !== null) {
      if (slots === null) this.nextRoll = { reason, why }
      return this.rolling
    }
    this.rolling = rollingRestart(this, { reason, why, slots: slots || this.slots.slice() }).finally(() => {
      this.rolling = null
      const next = this.nextRoll
      this.nextRoll = null
      if (next !== null) this.roll(next.reason, next.why)
    })
    return this.rolling
  }

  // A new instance for `slot` (roll.js): started, and ready or not. -> { slot,
  // instance, reason }: reason null when ready, else why not (the instance then stopped).
  async replacement (slot) {
    let instance
    try {
      instance = await this.#spawn(slot)
    } catch (err) {
      return { slot, instance: null, reason: err.message }
    }
    const reason = await waitReady(instance, this.#readiness())
    if (reason !== null) this.#dismiss(instance)
    return { slot, instance, reason }
  }

  // The roll gives `slot` its new, ready instance; returns the one it replaces (null
  // when the slot had none running), which serves on until retire().
  takeOver (slot, instance, reason) {
    const old = slot.instance
    if (old !== null && old.running) this.leaving.add(old)
    if (slot.timer !== null) clearTimeout(slot.timer) // waiting to start again: no need
    slot.timer = null
    slot.instance = instance
    instance.once('exit', exit => this.#exited(slot, instance, exit))
    this.#becomeReady(slot, instance)
    this.restarts[reason] = (this.restarts[reason] || 0) + 1
    return old !== null && old.running ? old : null
  }

  // An instance replaced: no new traffic (its backend retires), its connections finish
  // (up to --stop-timeout), then it is stopped.
  async retire (instance) {
    this.leaving.add(instance)
    instance.state = 'draining'
    this.announce()
    const left = await this.listeners.drained(instance.port, this.settings.stopTimeout)
    if (left > 0) {
      const timeout = formatDuration(this.settings.stopTimeout)
      this.log.warn(`app.${instance.number}: ${left} connection${left === 1 ? '' : 's'} still open after ${timeout}; ` +
        'stopping it')
    }
    await this.#stopInstance(instance)
    this.leaving.delete(instance)
  }

  // --- the instances ---

  // Start an instance on `slot` and wait until it is ready. Resolves with null when it
  // is, else why not (it then exits, and is started again with backoff).
  async #launch (slot) {
    let instance
    try {
      instance = await this.#spawn(slot)
    } catch (err) {
      this.#retryLater(slot, null, err.message)
      return err.message
    }
    slot.instance = instance
    instance.once('exit', exit => this.#exited(slot, instance, exit))
    const reason = await waitReady(instance, this.#readiness())
    if (this.stopped || slot.instance !== instance) return reason === null ? 'replaced' : reason
    if (reason !== null) {
      if (instance.running) this.#dismiss(instance, reason)
      return reason
    }
    this.#becomeReady(slot, instance)
    return null
  }

  #becomeReady (slot, instance) {
    instance.state = 'ready'
    instance.readyAt = this.now()
    const gen = instance.generation > 1 ? `, generation ${instance.generation}` : ''
    this.log.info(`app.${slot.number} ready on port ${instance.port} (pid ${instance.pid}${gen})`)
    this.announce()
  }

  // A new instance's process for `slot`, on a free port.
  #spawn (slot) {
    const next = this.spawning.then(async () => {
      if (this.stopped) throw new RuntimeError('lila is stopping')
      const taken = new Set([...this.running].map(i => i.port))
      const port = await freePort(this.settings.appPorts, taken)
      const instance = new Instance({ number: slot.number, generation: ++slot.generation, port, now: this.now })
      this.running.add(instance)
      instance.once('exit', () => this.running.delete(instance))
      const { command, stopTimeout } = this.settings
      instance.start(command, { cwd: this.cwd, env: this.#envOf(slot.number, port), stopTimeout, output: this.output })
      return instance
    })
    this.spawning = next.catch(() => {})
    return next
  }

  #envOf (number, port) {
    return instanceEnv(this.env, { appEnv: this.settings.appEnv, colour: this.colour, number, port })
  }

  #readiness () {
    return { check: this.check, timeout: this.settings.readyTimeout, probeTimeout: this.probeTimeout }
  }

  // Never ready: stopped; `verdict` is said for it rather than how it exited.
  #dismiss (instance, verdict = null) {
    instance.verdict = verdict
    this.#stopInstance(instance)
  }

  #stopInstance (instance) {
    return instance.stop(this.settings.stopSignal, this.settings.stopTimeout)
  }

  // An instance exited. Unless lila stopped it, that is a crash (or a failed start):
  // out of its upstream at once, started again after its backoff.
  #exited (slot, instance, exit) {
    if (this.stopped) return
    if (this.leaving.has(instance)) return this.announce() // replaced, and gone before it drained
    if (slot.instance !== instance) return
    const upFor = instance.readyAt === null ? 0 : this.now() - instance.readyAt
    if (instance.readyAt !== null) this.announce() // its port is no longer ready
    this.restarts.crash = (this.restarts.crash || 0) + 1
    const early = instance.readyAt === null ? ' before it was ready' : ''
    const what = instance.verdict || `(pid ${instance.pid}) ${exit.text}${early}`
    this.#retryLater(slot, instance, what, upFor)
  }

  #retryLater (slot, instance, what, upFor = 0) {
    const { delay, loopBegan } = slot.backoff.exited(upFor)
    const said = instance === null ? '' : instance.last.said()
    if (loopBegan) {
      this.log.warn(`app.${slot.number} is crash-looping (${slot.backoff.streak} exits in a row, the last: ${what}); ` +
        `starting it again with backoff up to 30s, without a line for each exit${said}`)
      this.#giveUpIfAllLoop()
    } else if (!slot.backoff.looping) {
      this.log.warn(`app.${slot.number} ${what}; starting it again in ${formatDuration(delay)}${said}`)
    }
    slot.timer = setTimeout(() => {
      slot.timer = null
      if (!this.stopped) this.#launch(slot)
    }, delay)
  }

  #giveUpIfAllLoop () {
    if (!this.settings.exitOnCrashLoop || !this.slots.every(slot => slot.backoff.looping)) return
    this.onGiveUp('every instance of the app is crash-looping (--exit-on-crash-loop)')
  }

  // Every second: an instance that stayed up is no longer crash-looping; one over
  // --max-rss or --max-age is replaced through a rolling restart of its own.
  #sample () {
    const now = this.now()
    for (const slot of this.slots) {
      const instance = slot.instance
      if (instance === null || instance.state !== 'ready') continue
      if (slot.backoff.streak > 0 && instance.upFor(now) >= STAYED_UP && slot.backoff.stayedUp()) {
        this.log.info(`app.${slot.number} stayed up ${formatDuration(STAYED_UP)}: no longer crash-looping`)
      }
      if (this.rolling !== null) continue
      const over = overLimit(slot, this.settings, now)
      if (over !== null) this.roll(over.reason, over.why, [slot])
    }
  }

  // --- the whole app ---

  // A reload's settings: the command, its environment and the timeouts apply to the
  // instances started from now on (the rolling restart that follows a SIGHUP); a new
  // --instances starts or retires instances now. Returns what changed, in words.
  update (settings) {
    const lines = []
    for (const key of ['command', 'appCwd', 'readyTimeout', 'stopTimeout', 'stopSignal', 'surge', 'maxRss', 'maxAge']) {
      if (this.settings[key] !== settings[key]) lines.push(`app: ${key} changed`)
    }
    if (JSON.stringify(this.settings.appEnv) !== JSON.stringify(settings.appEnv)) lines.push('app: app-env changed')
    const before = this.slots.length
    this.settings = { ...settings, watch: this.settings.watch, appPorts: this.settings.appPorts }
    if (settings.instances > before) {
      for (let number = before + 1; number <= settings.instances; number++) {
        const slot = newSlot(number)
        this.slots.push(slot)
        this.#launch(slot)
      }
    } else if (settings.instances < before) {
      for (const slot of this.slots.splice(settings.instances)) {
        if (slot.timer !== null) clearTimeout(slot.timer)
        if (slot.instance !== null && slot.instance.running) this.retire(slot.instance)
      }
    }
    if (settings.instances !== before) lines.push(`app: instances ${before} -> ${settings.instances}`)
    return lines
  }

  // Stop every instance: the stop signal to each process group, SIGKILL after
  // --stop-timeout. Its listener has drained first (balancer.js).
  stop () {
    if (this.stopping !== null) return this.stopping
    this.stopped = true
    clearInterval(this.sampler)
    if (this.watcher !== null) this.watcher.close()
    for (const slot of this.slots) clearTimeout(slot.timer)
    this.stopping = Promise.all([...this.running].map(instance => this.#stopInstance(instance))).then(() => {})
    return this.stopping
  }

  // A reload took the app from its listener (balancer/app-swap.js): no more starts or
  // rolls; each instance drains and stops, as a roll retires one. -> how many did.
  async retireAll () {
    this.stopped = true
    clearInterval(this.sampler)
    if (this.watcher !== null) this.watcher.close()
    for (const slot of this.slots) clearTimeout(slot.timer)
    const running = this.slots.map(slot => slot.instance).filter(i => i !== null && i.running && !this.leaving.has(i))
    await Promise.all([...running.map(instance => this.retire(instance)), ...[...this.leaving].map(i => i.exited)])
    return running.length
  }

  // Now: SIGKILL to every instance's group.
  kill () {
    this.stopped = true
    for (const instance of this.running) instance.kill()
  }

  // A plain snapshot: the settings that matter to a reader, each instance (those
  // leaving too), and how many were started again, by reason.
  snapshot () {
    const now = this.now()
    const instances = []
    for (const slot of this.slots) {
      if (slot.instance === null) continue
      const shown = slot.instance.snapshot(now)
      if (slot.timer !== null) shown.state = 'backoff'
      shown.crashLooping = slot.backoff.looping
      instances.push(shown)
    }
    for (const instance of this.leaving) instances.push({ ...instance.snapshot(now), crashLooping: false })
    return {
      command: this.settings.command,
      instances: this.settings.instances,
      rolling: this.rolling !== null,
      restarts: { ...this.restarts },
      list: instances
    }
  }
}

function newSlot (number) {
  return { number, generation: 0, instance: null, backoff: new Backoff(), timer: null }
}

module.exports = { App }
