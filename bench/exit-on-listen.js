'use strict'

// Loaded into a process whose start-up startup.js times (`node --require
// bench/exit-on-listen.js ...`): it exits as soon as the first server listens.

const net = require('net')

const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  this.once('listening', () => process.exit(0))
  return listen.apply(this, args)
}
