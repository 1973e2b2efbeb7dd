'use strict'

const { pickByKey } = require('./hash')

// The same client address always reaches the same backend while it is usable.
function createIpHash () {
  return {
    pick (candidates, ctx) {
      return pickByKey(candidates, ctx.clientAddress || '')
    }
  }
}

module.exports = createIpHash
