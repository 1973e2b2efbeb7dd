'use strict'

const { cookieValues } = require('../../fields')
const { formatSticky } = require('../../format')

// --sticky cookie[=NAME]: a cookie keeps each client on the backend that served it. One
// per HTTP listener (its protocol holds it); every request's exchange (exchange.js)
// calls it twice:
//
//   exchange.stickTo = sticky.keys(head)       the cookie's values the request carries,
//                                              or null: what upstream.js choose() prefers
//   cookie = sticky.cookieFor(exchange)        the Set-Cookie value its response gets, or
//                                              null; the client's codec adds the field
//
// The cookie's value is the backend's stickyId (backend.js: a short hash of its
// address), so any lila with the same backends honours it. Whether a request goes where
// its cookie says is upstream.js's decision (choose); here only the cookie: a response
// carries Set-Cookie when the backend that answered is not the one the request's cookie
// named (it had none, or that backend could not take it), and each response is counted
// by what happened (honoured, reassigned, new). The cookie's Path is the route's path
// prefix (/ for a host route and the listener's own backends), so that each pool's
// cookie is sent back to that pool: a browser sends the longest Path first, and the
// first value that names a backend of the pool wins.
class Stickiness {
  constructor () {
    this.setting = null // { cookie } or null: off
    this.secure = false // the listener terminates TLS: the cookie is Secure
    this.counts = { honoured: 0, reassigned: 0, new: 0 }
  }

  // At the listener's start and on every reload; the counts carry over.
  configure (setting, secure) {
    this.setting = setting
    this.secure = secure
  }

  // The values of the sticky cookie in the request's fields (at most 4), or null when
  // off or when it has none.
  keys (head) {
    if (this.setting === null) return null
    const values = cookieValues(head.fields, this.setting.cookie)
    return values.length === 0 ? null : values
  }

  // The Set-Cookie value the response of `ctx` (an exchange: its stickTo, route and
  // attempt) gets, or null; counted.
  cookieFor (ctx) {
    if (this.setting === null) return null
    const backend = ctx.attempt.backend
    if (backend === null) return null
    const keys = ctx.stickTo
    if (keys !== null && keys.includes(backend.stickyId)) {
      this.counts.honoured++
      return null
    }
    this.counts[keys === null ? 'new' : 'reassigned']++
    return setCookie(this.setting.cookie, backend.stickyId, cookiePath(ctx.route), this.secure)
  }

  // What the listener's snapshot adds.
  snapshot () {
    return { sticky: formatSticky(this.setting), stickyResponses: { ...this.counts } }
  }
}

// The Path of a pool's cookie: its route's path prefix, or / (the listener's own
// backends, a route by host only). `route` as listener.routeFor() gives it.
function cookiePath (route) {
  const { match } = route
  return !match || match.path === null ? '/' : match.path
}

// A Set-Cookie value (RFC 6265): a session cookie (it ends with the browser session;
// a client that keeps it longer is still served), on every path of the pool, not for
// scripts, sent on top-level navigation from other sites; Secure behind TLS.
function setCookie (name, value, path, secure) {
  return `${name}=${value}; Path=${path}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`
}

module.exports = { Stickiness, setCookie, cookiePath }
