'use strict'

const net = require('net')
const { RuntimeError } = require('../errors')

// The port of a new instance: the first free one of --app-ports, or one lila chooses.
// Lila chooses below the kernel's ephemeral range (where it takes the local ports of
// outgoing connections, lila's own to the instances among them: one could take the
// port between lila's choice and the app's bind) and above the ports people give their
// own services: from FREE_LOW to FREE_HIGH, at random, so that two lilas rarely try the
// same. Free means that a listener can be bound on it now, on 127.0.0.1.
const FREE_LOW = 10000
const FREE_HIGH = 20000
const TRIES = 50

// `taken`: the ports of this app's instances (one may not listen yet).
async function freePort (range, taken) {
  if (range !== null) {
    for (let port = range.first; port <= range.last; port++) {
      if (!taken.has(port) && await canListen(port)) return port
    }
    const span = `${range.first}-${range.last}`
    throw new RuntimeError(`no free port in --app-ports ${span}: ${taken.size} taken by instances, the rest in use`)
  }
  for (let i = 0; i < TRIES; i++) {
    const port = FREE_LOW + Math.floor(Math.random() * (FREE_HIGH - FREE_LOW))
    if (!taken.has(port) && await canListen(port)) return port
  }
  throw new RuntimeError(`no free port found from ${FREE_LOW} to ${FREE_HIGH}: expected --app-ports FIRST-LAST`)
}

function canListen (port) {
  return new Promise(resolve => {
    const server = net.createServer()
    server.unref()
    server.once('error', () => resolve(false))
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)))
  })
}

module.exports = { freePort }
