'use strict'

const { probe } = require('../upstream/health')
const { formatDuration } = require('../format')

// Whether a new instance is ready for traffic: its port accepts a connection, or with
// --check http:/PATH (or grpc) that check passes, as the health checks would ask it.
// Probed every PROBE_EVERY until it is, it exits, or `timeout` (--ready-timeout) passes.
const PROBE_EVERY = 100

// `check`: the probe as health.js takes it. Resolves with null when ready, else the
// reason in words: "never listened on 3002 within 30s", "exited with code 1".
function waitReady (instance, { check, timeout, probeTimeout }) {
  const target = { host: '127.0.0.1', port: instance.port, path: null, hostHeader: `127.0.0.1:${instance.port}` }
  const deadline = Date.now() + timeout
  return new Promise(resolve => {
    let last = null // the last probe's reason, once the port accepted
    let listened = false
    let timer = null
    let done = false
    const finish = reason => {
      if (done) return
      done = true
      clearTimeout(timer)
      resolve(reason)
    }
    instance.exited.then(exit => finish(exit.text))
    const once = () => {
      if (done) return
      if (Date.now() >= deadline) {
        const within = formatDuration(timeout)
        if (check.type === 'tcp' || !listened) return finish(`never listened on ${instance.port} within ${within}`)
        return finish(`never passed its check within ${within} (${last})`)
      }
      probe(target, check, Math.min(probeTimeout, Math.max(1, deadline - Date.now())), (ok, reason) => {
        if (done) return
        if (ok) return finish(null)
        if (!/refused|ECONNREFUSED/.test(reason)) listened = true
        last = reason
        timer = setTimeout(once, PROBE_EVERY)
      })
    }
    once()
  })
}

module.exports = { waitReady }
