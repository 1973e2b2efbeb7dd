'use strict'

const histogram = require('../histogram')
const { fieldValue, cookieValue } = require('../fields')
const { setCookie, cookiePath } = require('./http/sticky')

// --canary BACKENDS PCT%: beside a pool (the listener's own backends, or a route's),
// a pool of canary backends that gets a share of the clients. One Canary per such
// pool, kept across reloads by the listener's Canaries; each request's exchange asks
// it once which side the request goes to, and tells it once what came of it:
//
//   side = canary.choose(fields)   a side: `canary` (true: the canary pool), `fresh`
//                                  (drawn now: its cookie goes with the response)
//   canary.upstreamOf(side, stable), canary.cookies(side, sticky)   where it goes, and
//                                  the Set-Cookie values its response gets
//   canary.count(side, status, ms) the answer, counted by side (requests, errors: 5xx,
//                                  time) for the status page's side by side
//
// Which side: a header (--canary-header, X-Lila-Canary) or the cookie (--canary-cookie,
// lila-canary) saying `always` or `never` forces it; a cookie saying `canary` or
// `stable` (which lila gave) keeps the client on its side while the share is between 0
// and 100%; else the share decides, and the client gets the cookie. The share decides
// by a running credit, not a coin: of every 100 new clients at 10%, exactly 10 go to
// the canary, and a change of the share (the control API, a reload) moves only the
// clients still to come.
const SIDES = {
  forcedCanary: side(true, false),
  forcedStable: side(false, false),
  keptCanary: side(true, false),
  keptStable: side(false, false),
  newCanary: side(true, true),
  newStable: side(false, true)
}

const WHOLE = 100 * 1000 // a client's worth of credit, in thousandths of a percent

function side (canary, fresh) {
  return Object.freeze({ canary, fresh })
}

class Canary {
  // upstream: the canary pool's Upstream; config: the pool's { share, backends, pool }
  // (config/build-routes.js buildCanary); route: the pool's route ({ match }) or the
  // listener's own ({ match: null }), for the cookie's Path; names: the listener's
  // { canaryCookie, canaryHeader }; secure: the listener terminates TLS.
  constructor (upstream) {
    this.upstream = upstream
    this.share = 0
    this.given = null // the share the config in force says
    this.credit = 0
    this.cookieName = null
    this.header = null
    this.setCookies = null // { canary, stable }: the Set-Cookie values
    this.sides = { stable: tally(), canary: tally() }
  }

  // At the start and on every reload: the config's share only where it changed, so
  // that a reload does not undo a share set through the control API.
  configure (config, route, names, secure, upstream) {
    this.upstream = upstream
    if (config.share !== this.given) this.share = config.share
    this.given = config.share
    this.cookieName = names.canaryCookie
    this.header = names.canaryHeader.toLowerCase()
    const path = cookiePath(route)
    this.setCookies = {
      canary: setCookie(this.cookieName, 'canary', path, secure),
      stable: setCookie(this.cookieName, 'stable', path, secure)
    }
  }

  setShare (share) {
    const was = this.share
    this.share = share
    return was
  }

  choose (fields) {
    const forced = fieldValue(fields, this.header)
    if (forced !== null) {
      const word = forced.toLowerCase()
      if (word === 'always') return SIDES.forcedCanary
      if (word === 'never') return SIDES.forcedStable
    }
    const cookie = cookieValue(fields, this.cookieName)
    if (cookie !== null) {
      if (cookie === 'always') return SIDES.forcedCanary
      if (cookie === 'never') return SIDES.forcedStable
      if (this.share > 0 && this.share < 100) {
        if (cookie === 'canary') return SIDES.keptCanary
        if (cookie === 'stable') return SIDES.keptStable
      }
    }
    if (this.share <= 0) return SIDES.forcedStable // nothing to keep a client on
    if (this.share >= 100) return SIDES.forcedCanary
    this.credit += Math.round(this.share * 1000) // in thousandths of a percent: whole numbers, exact
    if (this.credit < WHOLE) return SIDES.newStable
    this.credit -= WHOLE
    return SIDES.newCanary
  }

  // The pool a request of `side` goes to: the canary's, or `stable` (the pool beside it).
  upstreamOf (side, stable) {
    return side.canary ? this.upstream : stable
  }

  // The Set-Cookie values a response of `side` gets, with `other` (--sticky's, or null):
  // null, one, or a list of both.
  cookies (side, other) {
    if (!side.fresh) return other
    const mine = side.canary ? this.setCookies.canary : this.setCookies.stable
    return other === null ? mine : [other, mine]
  }

  count (side, status, ms) {
    const t = side.canary ? this.sides.canary : this.sides.stable
    t.requests++
    if (status >= 500) t.errors++
    t.times[histogram.bucketOf(ms)]++
    t.timeSum += ms
  }

  // `backends`: the canary pool's backends as the listener's protocol shows them.
  snapshot (backends) {
    const of = t => {
      const counts = histogram.cumulative(t.times)
      const time = { count: t.requests, sum: Math.round(t.timeSum * 1000) / 1000, bounds: histogram.BOUNDS_MS, counts }
      return { requests: t.requests, errors: t.errors, time }
    }
    return {
      share: this.share,
      cookie: this.cookieName,
      stable: of(this.sides.stable),
      canary: of(this.sides.canary),
      mode: this.upstream.mode,
      backends
    }
  }
}

function tally () {
  return { requests: 0, errors: 0, times: histogram.createCounts(), timeSum: 0 }
}

// The Canary of each pool of a listener that has one: the listener's own (named null)
// and its routes' (by name). Kept across reloads: a pool keeps its share (unless the
// config changed it) and its counts.
class Canaries {
  constructor () {
    this.byPool = new Map()
  }

  // upstreams: Map pool name -> the canary pool's Upstream (balancer.js makes them).
  configure (config, upstreams, secure) {
    const configs = new Map([[null, config.canary], ...config.routes.map(r => [r.name, r.canary])])
    const routes = new Map(config.routes.map(r => [r.name, r]))
    for (const name of [...this.byPool.keys()]) if (!upstreams.has(name)) this.byPool.delete(name)
    for (const [name, upstream] of upstreams) {
      let canary = this.byPool.get(name)
      if (canary === undefined) this.byPool.set(name, canary = new Canary(upstream))
      const route = name === null ? { match: null } : routes.get(name)
      canary.configure(configs.get(name), route, config, secure, upstream)
    }
  }

  get (name) {
    return this.byPool.get(name) || null
  }

  // The canary pools' Upstreams.
  upstreams () {
    return [...this.byPool.values()].map(canary => canary.upstream)
  }
}

module.exports = { Canaries }
