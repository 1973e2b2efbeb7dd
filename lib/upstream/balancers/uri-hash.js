'use strict'

const { pickByKey } = require('./hash')

// HTTP only: the same path (without its query) always reaches the same backend while
// it is usable (and, with a balance factor, while that backend is not overloaded), so
// each backend's cache holds its own share of the paths.
function createUriHash ({ hashBalanceFactor = null } = {}) {
  return {
    pick (candidates, ctx) {
      return pickByKey(candidates, ctx.path || '/', hashBalanceFactor)
    }
  }
}

module.exports = createUriHash
