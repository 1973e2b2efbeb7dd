'use strict'

const crypto = require('crypto')

// This lila's token in HTTP Via headers, by which it knows a request it sent already
// (a loop). One per balancer; the --workers primary makes one for all its workers.
function viaToken () {
  return `lila-${crypto.randomBytes(4).toString('hex')}`
}

module.exports = { viaToken }
