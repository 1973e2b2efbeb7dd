'use strict'

const { pickByKey } = require('./hash')
const createRoundRobin = require('./round-robin')
const { fieldValue } = require('../../fields')

// HTTP only, header-hash:NAME: the same value of the request header NAME always reaches
// the same backend while it is usable (and, with a balance factor, while that backend
// is not overloaded): a user, a tenant, a session named by the client. A request
// without the header (or with it empty) is balanced round-robin, as HAProxy's
// `balance hdr()` does. `arg`: the header's name, lower case.
function createHeaderHash ({ hashBalanceFactor = null, arg }) {
  const fallback = createRoundRobin()
  return {
    pick (candidates, ctx) {
      const key = ctx.head === undefined ? null : fieldValue(ctx.head.fields, arg)
      if (key === null || key === '') return fallback.pick(candidates)
      return pickByKey(candidates, key, hashBalanceFactor)
    }
  }
}

module.exports = createHeaderHash
