'use strict'

const http = require('http')
const path = require('path')
const { parseBackend } = require('../config/backend-spec')

// `lila demo`: three small HTTP backends on free local ports, lila in front of them,
// and a line saying what to run to watch the balancing. Everything stops on Ctrl-C.
// The command is alone on its line after "try: ", so that it pastes into a shell.
// `lila demo --tls`: HTTPS with lila's local CA, which curl is told to trust.
async function runDemo (config, io, serve) {
  const backends = await Promise.all([1, 2, 3].map(startDemoBackend))
  const listener = config.listeners[0]
  listener.backends = backends.map(b => parseBackend(`127.0.0.1:${b.port}`))
  if (listener.host === null) listener.host = '127.0.0.1'
  try {
    return await serve(config, { ...io, listenHint }, ([address], log) => {
      log.info(`demo backends: ${listener.backends.map(b => `127.0.0.1:${b.port}`).join(', ')}`)
      // On a Unix socket (--host unix:/path), curl goes through it.
      const scheme = listener.tls === null ? 'http' : 'https'
      const port = address.slice(address.lastIndexOf(':') + 1)
      const target = address.startsWith('unix:')
        ? `--unix-socket ${address.slice(5)} ${scheme}://localhost/`
        : scheme === 'http' ? `http://${address}/` : `https://localhost:${port}/`
      log.info(`try: for i in 1 2 3 4 5 6; do curl -s${trust(config, listener)} ${target}; done`)
      log.info('Ctrl-C stops the demo')
    })
  } finally {
    await Promise.all(backends.map(b => b.close()))
  }
}

// --tls local: curl trusts lila's CA (tls/local-ca.js keeps it in the state folder).
function trust (config, listener) {
  if (listener.tls === null || listener.tls.source !== 'local') return ''
  const { defaultStateDir } = require('../tls/state')
  const file = path.join(config.stateDir === null ? defaultStateDir() : config.stateDir, 'local', 'ca.pem')
  return ` --cacert ${/[\s'"$\\]/.test(file) ? `'${file.replace(/'/g, "'\\''")}'` : file}`
}

// 4444 may well be taken (another demo, another tool): say how to get a free port.
function listenHint (err) {
  const port = err.cause && err.cause.code === 'EADDRINUSE' && err.cause.port !== -1 // -1: a Unix socket
  return port ? 'lila demo --port 0 takes a free port' : null
}

function startDemoBackend (n) {
  let served = 0
  const server = http.createServer((req, res) => {
    served++
    res.end(`Hello from backend ${n} (127.0.0.1:${server.address().port}), request ${served} here\n`)
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve({
      port: server.address().port,
      close: () => new Promise(resolve => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
    }))
  })
}

module.exports = { runDemo }
