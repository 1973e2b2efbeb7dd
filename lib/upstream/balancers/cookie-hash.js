'use strict'

const { pickByKey } = require('./hash')
const createRoundRobin = require('./round-robin')
const { cookieValue } = require('../../fields')

// HTTP only, cookie-hash:NAME: the same value of the cookie NAME (the application's
// session cookie, say) always reaches the same backend while it is usable (and, with a
// balance factor, while that backend is not overloaded). A request without the cookie
// (or with it empty) is balanced round-robin, as with header-hash. `arg`: the cookie's
// name, as written (cookie names are case-sensitive).
function createCookieHash ({ hashBalanceFactor = null, arg }) {
  const fallback = createRoundRobin()
  return {
    pick (candidates, ctx) {
      const key = ctx.head === undefined ? null : cookieValue(ctx.head.fields, arg)
      if (key === null || key === '') return fallback.pick(candidates)
      return pickByKey(candidates, key, hashBalanceFactor)
    }
  }
}

module.exports = createCookieHash
