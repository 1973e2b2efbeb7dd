'use strict'

const { pickByKey } = require('./hash')

// HTTP only: the same path (without its query) always reaches the same backend while
// it is usable, so each backend's cache holds its own share of the paths.
function createUriHash () {
  return {
    pick (candidates, ctx) {
      return pickByKey(candidates, ctx.path || '/')
    }
  }
}

module.exports = createUriHash
