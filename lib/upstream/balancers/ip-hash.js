'use strict'

const { pickByKey } = require('./hash')

// The same client address always reaches the same backend while it is usable (and,
// with a balance factor, while that backend is not overloaded).
function createIpHash ({ hashBalanceFactor = null } = {}) {
  return {
    pick (candidates, ctx) {
      return pickByKey(candidates, ctx.clientAddress || '', hashBalanceFactor)
    }
  }
}

module.exports = createIpHash
