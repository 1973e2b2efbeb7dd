'use strict'

const { Listener } = require('../listener')
const { HttpSession } = require('./session')
const { Pool } = require('./pool')

// An HTTP listener: the generic Listener serving HttpSessions, plus what its exchanges
// share: a keep-alive connection pool per backend and the settings of the heads it
// rewrites. `via` is this lila's Via token, used to detect loops.
function createHttpListener ({ config, upstream, log, via }) {
  const listener = new Listener({ config, upstream, log, protocol: 'http', Session: HttpSession })
  const pools = new Map()
  listener.via = via
  listener.rewrite = { proto: 'http', via, forwarded: config.forwarded }
  listener.poolFor = backend => {
    let pool = pools.get(backend)
    if (pool === undefined) {
      pool = new Pool(backend, { connectTimeout: config.connectTimeout })
      pools.set(backend, pool)
    }
    return pool
  }
  // Idle backend connections must not outlive the listener.
  listener.onDrained = () => { for (const pool of pools.values()) pool.close() }
  listener.poolSnapshot = backend => pools.has(backend) ? pools.get(backend).snapshot() : null
  return listener
}

module.exports = { createHttpListener }
