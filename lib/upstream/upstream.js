'use strict'

const { createMode } = require('./balancers')
const { WaitQueue } = require('./queue')
const { Membership } = require('./membership')
const { leftOpen } = require('./membership-words')
const { silentLogger, formatTable } = require('../log')
const { specAddress } = require('../address')
const { ConflictError } = require('../errors')
const { RetryBudget } = require('./retry-budget')
const { Faults } = require('./faults')

// The backends of one listener, and who of them may take traffic now: health (through
// each Backend's state), panic (every backend down: use them anyway), max-conn and the
// wait queue. Who the backends are is membership.js's; the mode (balancers/) only ranks
// the candidates handed to it; attempt.js is the one path that uses all this:
//
//   upstream.acquire(ctx, tried)           -> a Lease on a backend now, or null
//   upstream.enqueue(ctx, tried, onLease)  -> a Waiter (a place in the queue), or null:
//                                             nothing could take it, waiting is pointless
//   lease.succeeded() | lease.failed(reason, cause, client); lease.release(in, out) once
//
// It also holds the listener's retry policy, which the attempt reads: `retries`,
// `retryOn` and `ejectOn` (Sets of statuses), `retryReset` (--retry-on reset: any
// method resent after a reset), the `budget` (retry-budget.js), and
// counts what came of it: retried(cause, spends), failedEverywhere().
//
// `ctx` is what the mode keys on (clientAddress; http adds the path and head), and
// `stickTo` (http with --sticky, else null or absent): the stickyIds its cookie names,
// the backend preferred over the mode's pick (see #stuck); `tried` is null or the Set of
// Backends that already failed this connection or request.
class Upstream {
  // config: a listener's settings as the config builds them (every field present).
  constructor (config, {
    now = Date.now, log = silentLogger, resolve = null, resolveSrv = null, balancerOptions = {}, tls = null,
    table = true, random = Math.random, app = null
  } = {}) {
    this.mode = config.mode
    this.hashBalanceFactor = config.hashBalanceFactor
    this.balancerOptions = balancerOptions
    this.balancer = createMode(this.mode, { hashBalanceFactor: this.hashBalanceFactor, ...balancerOptions })
    this.now = now
    this.log = log
    this.startFaults = config.fault || [] // --fault: injected once the backends are known
    const unit = config.protocol === 'tcp' ? 'connection' : 'request' // what a fault strikes, in the log
    this.faults = new Faults({ now, random, log, unit })
    this.table = table // log the start-up table
    this.queue = new WaitQueue({ timeout: config.queueTimeout })
    this.budget = new RetryBudget(config.retryBudget, now)
    this.#policy(config)
    this.retriesBy = {} // cause -> retries on another backend
    this.everywhere = 0 // requests that failed on two backends: blamed on the request
    this.panic = false
    this.started = false // start-up done: changes are logged
    this.closed = false
    this.scratch = [] // candidates, reused: choose() allocates nothing
    this.take = waiter => {
      const backend = this.choose(waiter.ctx, waiter.tried)
      return backend === null ? null : backend.acquire()
    }
    this.members = new Membership(config, {
      now,
      log,
      resolve,
      resolveSrv,
      tls,
      app,
      started: () => this.started,
      onFree: backend => this.#freed(backend),
      changed: () => this.#changed(),
      state: (backend, state, reason, previous) => this.#stateChanged(backend, state, reason, previous)
    })
    this.panic = this.#computePanic()
  }

  // Resolve names and check every backend once, log a table of what was found, then
  // keep doing both in the background.
  async start () {
    await this.members.start()
    this.started = true
    if (this.table) for (const line of formatTable(this.members.table())) this.log.info(line)
    this.panic = this.#computePanic()
    if (this.panic) this.log.warn(panicLine(this.backends.length))
    for (const spec of this.startFaults) {
      for (const backend of this.members.givenAs(spec.address)) this.setFault(backend, spec)
    }
  }

  get backends () {
    return this.members.backends
  }

  // -> Backend, or null when nothing can take the connection. A retry never goes back
  // to a backend in `tried`. Primaries first; backups only when no primary can take it.
  // A backend the request's sticky cookie names comes before the mode's pick.
  choose (ctx, tried = null) {
    const now = this.now()
    let candidates = this.#candidates(now, tried, false)
    if (candidates.length === 0) candidates = this.#candidates(now, tried, true)
    if (ctx.stickTo) {
      const stuck = this.#stuck(ctx.stickTo, candidates, tried, now)
      if (stuck !== undefined) return stuck
    }
    if (candidates.length <= 1) return candidates.length === 1 ? candidates[0] : null
    return this.balancer.pick(candidates, ctx)
  }

  // --sticky: the backend whose stickyId is one of `ids`, if it may take the request
  // now; null to wait for it: it is at its max-conn (as HAProxy queues a request whose
  // cookie names a full server on that server); undefined to balance as if there were
  // no cookie: it is down, drained, disabled, gone, already tried, a backup while
  // primaries serve, or there is no room to wait (--queue-timeout 0, or the queue full:
  // as HAProxy's maxqueue redispatches).
  #stuck (ids, candidates, tried, now) {
    for (let i = 0; i < candidates.length; i++) {
      if (ids.includes(candidates[i].stickyId)) return candidates[i]
    }
    if (!this.queue.open) return undefined
    const primaries = candidates.length > 0 && !candidates[0].backup
    for (const backend of this.members.backends) {
      if (!backend.full || !ids.includes(backend.stickyId) || (backend.backup && primaries)) continue
      if (backend.available(now, this.panic) && (tried === null || !tried.has(backend))) return null
    }
    return undefined
  }

  // Written over in place, its length set last: `length = 0` would give the array's
  // backing store up, and the next push allocate a new one (152 bytes a request).
  #candidates (now, tried, backup) {
    const out = this.scratch
    let n = 0
    for (const backend of this.members.backends) {
      if (backend.backup !== backup || !backend.usable(now, this.panic)) continue
      if (tried !== null && tried.has(backend)) continue
      out[n++] = backend
    }
    if (out.length !== n) out.length = n
    return out
  }

  // A slot on a backend now, or null. Synchronous. While others wait in the queue, a
  // newcomer does not overtake them: null, and it queues behind them. Those that wait
  // for the one backend their cookie names (pinned) are not in its way.
  acquire (ctx, tried = null) {
    if (this.queue.size > this.queue.pinned) return null
    const backend = this.choose(ctx, tried)
    return backend === null ? null : backend.acquire()
  }

  // Wait for a slot: onLease(lease) when one frees (the oldest waiter first), or
  // onLease(null, reason) after --queue-timeout. onLease may run synchronously inside
  // another lease's release(). Returns a Waiter (cancel() it if the client leaves), or
  // null when waiting is pointless: no queue (--queue-timeout 0), the queue is full, or
  // no backend that could take it is merely full (all down, or all tried).
  enqueue (ctx, tried, onLease) {
    if (this.closed || !this.couldServe(tried)) return null
    return this.queue.add(ctx, tried, onLease)
  }

  // Could a backend not in `tried` take a client now or once a slot frees?
  couldServe (tried) {
    const now = this.now()
    for (const backend of this.members.backends) {
      if (backend.available(now, this.panic) && (tried === null || !tried.has(backend))) return true
    }
    return false
  }

  // What the attempt reports: a retry on another backend (spending budget when the
  // backend had seen the request), a request that failed everywhere.
  retried (cause, spends) {
    this.retriesBy[cause] = (this.retriesBy[cause] || 0) + 1
    if (spends) this.budget.spend()
  }

  failedEverywhere () {
    this.everywhere++
  }

  // --retries, --retry-on, --eject-on, --retry-budget: at start and on a reload.
  #policy ({ retries, retryOn, ejectOn, retryBudget }) {
    this.retries = retries
    this.retryOn = new Set(retryOn)
    this.retryReset = this.retryOn.has('reset')
    this.ejectOn = new Set(ejectOn)
    this.budget.setPercent(retryBudget)
  }

  #serveQueue () {
    if (this.queue.size > 0) this.queue.serve(this.take)
  }

  // A lease was released: the slot goes to the queue; a draining backend may be done.
  #freed (backend) {
    if (this.members.freed(backend) || (backend.live === 0 && backend.admin === 'draining')) {
      this.log.info(`backend ${backend.address} drained`)
    }
    this.#serveQueue()
  }

  // The set of backends changed (DNS, a reload, an operator).
  #changed () {
    this.#updatePanic()
    this.#serveQueue()
  }

  #stateChanged (backend, state, reason, previous) {
    // At start-up, the table says what the first checks found.
    if (this.started || previous !== 'pending') {
      const line = `backend ${backend.address} ${state}: ${reason}`
      if (state === 'down') this.log.warn(line)
      else this.log.info(line)
    }
    this.#updatePanic()
    // Up: a slot more. Down: those waiting for it (their cookie names it) go elsewhere.
    this.#serveQueue()
  }

  #computePanic () {
    let any = false
    for (const backend of this.members.backends) {
      // Backends an operator took out, or gave no weight, are not "down"; nor is one
      // that just joined (DNS, a port range, an operator) and waits for its first check.
      if (backend.weight === 0 || backend.admin !== null || backend.state === 'pending') continue
      if (backend.state === 'up') return false
      any = true
    }
    return any
  }

  #updatePanic () {
    const panic = this.#computePanic()
    if (panic === this.panic) return
    this.panic = panic
    if (!this.started) return
    if (panic) {
      this.log.warn(panicLine(this.backends.length))
      this.#serveQueue()
    } else {
      this.log.info('panic over: a backend is up again')
    }
  }

  // A reload: this listener's new settings, in place. The mode and queue take theirs
  // here; checks, discovery and backends theirs in membership. Open connections are
  // never cut. Returns what changed, as lines for the log.
  update (config, { tls = null } = {}) {
    const { mode, hashBalanceFactor } = config
    if (mode !== this.mode || hashBalanceFactor !== this.hashBalanceFactor) {
      this.balancer = createMode(mode, { hashBalanceFactor, ...this.balancerOptions })
      this.mode = mode
      this.hashBalanceFactor = hashBalanceFactor
    }
    this.queue.configure(config.queueTimeout)
    this.#policy(config)
    return this.members.update(config, tls)
  }

  // A reload that starts (or stops: null) lila run's app in place: the App its app
  // group follows; probed(): every backend's first probe, before those replaced leave.
  useApp (app) { this.members.useApp(app) }
  probed () { return this.members.probed() }

  // --- an operator's calls (admin/control.js): each one change, said in the log ---

  // The backend with this address, or null; retired ones are not found.
  find (address) {
    return this.members.find(address)
  }

  given (address) {
    return this.members.given(address)
  }

  // No new traffic; open connections finish. Probes go on, so its state stays current
  // and enable() gives it traffic at once. 'backend ... drained' is said when its last
  // connection ends.
  drain (backend) {
    if (backend.admin === 'draining') return
    const was = backend.admin
    backend.setAdmin('draining')
    if (was === 'disabled') this.members.watch(backend) // its probes resume
    this.log.info(`backend ${backend.address} draining (by an operator)${leftOpen(backend)}`)
    if (backend.live === 0) this.log.info(`backend ${backend.address} drained`)
    this.#updatePanic()
    this.#serveQueue() // those waiting for it (their cookie names it) go elsewhere
  }

  // An operator's "down": no new traffic, open connections go on undisturbed; probes
  // pause (a backend under maintenance may be stopped without lila calling it down),
  // so enable() checks it again before it takes traffic.
  disable (backend) {
    if (backend.admin === 'disabled') return
    backend.setAdmin('disabled')
    this.members.unwatch(backend)
    this.log.info(`backend ${backend.address} disabled (by an operator)${leftOpen(backend)}`)
    this.#updatePanic()
    this.#serveQueue() // those waiting for it (their cookie names it) go elsewhere
  }

  // Back to its health state: at once after a drain; after a disable, once a probe has
  // passed (at once too with --check none). Resolves when it can take traffic or its
  // first probe failed.
  async enable (backend) {
    const was = backend.admin
    if (was === null) return
    backend.setAdmin(null)
    this.log.info(`backend ${backend.address} enabled (by an operator)`)
    const recheck = was === 'disabled' && this.members.checked
    if (recheck) backend.recheck()
    this.#changed()
    if (recheck) await this.members.watch(backend)
  }

  setWeight (backend, weight) {
    if (backend.weight === weight) return
    this.log.info(`backend ${backend.address} weight ${backend.weight} -> ${weight} (by an operator)`)
    backend.setWeight(weight)
    this.#changed()
  }

  // Add a backend as given on the command line: an IP address or a Unix socket is one
  // backend, a name as many as it resolves to, an SRV name as many as its records give.
  // Resolves with them once each was checked (their state says how it went). Throws a
  // ConflictError if it is already a backend.
  async addBackend (spec) {
    const backends = await this.members.add(spec)
    if (backends === null) throw new ConflictError(`${specAddress(spec)} is already a backend`)
    this.#serveQueue()
    return backends
  }

  // Remove a backend as it was given: no new traffic, open connections finish, as when
  // DNS drops an address. Returns the backends removed (empty when nothing matched).
  removeBackend (address) {
    return this.members.remove(address)
  }

  // A fault (fault.js) on this backend's traffic from now on, in place of any it had,
  // ending by itself after spec.duration (0: when cleared). Returns it.
  setFault (backend, spec) { return this.faults.set(backend, spec) }

  // The fault ends: its time is over (`expired`) or it is cleared. False when there
  // was none.
  clearFault (backend, expired = false) { return this.faults.clear(backend, expired) }

  // Stop probing and resolving; every waiter gives up; faults end without a word (what
  // their delays hold goes on, to be drained).
  close () {
    this.closed = true
    this.faults.endAll(this.all())
    this.members.close()
    this.queue.clear('lila is shutting down')
  }

  get live () {
    return this.members.live
  }

  // Live figures of the upstream as a whole, for the listener's snapshot.
  stats () {
    return {
      panic: this.panic,
      queued: this.queue.size,
      queueTimeouts: this.queue.timeouts,
      retries: { ...this.retriesBy }, // by cause
      retryBudgetExhausted: this.budget.exhausted,
      failedEverywhere: this.everywhere,
      ranges: this.members.ranges() // port ranges: how many of their ports listen
    }
  }

  // Every backend, those still finishing after their removal last.
  all () {
    return this.members.all()
  }

  snapshot () {
    return this.all().map(b => b.snapshot())
  }
}

function panicLine (n) {
  return `panic: every backend is down (${n}); sending traffic to them anyway`
}

module.exports = { Upstream }
