'use strict'

// node http-proxy 1.18.1 as a user would set it up as a load balancer: one
// http.Server, a keep-alive agent towards the backends, and the balancing itself
// written by hand (http-proxy has none): round-robin or least in-flight requests.
//
//   node http-proxy-lb.js --mode rr|lc --port 0 127.0.0.1:9001 127.0.0.1:9002
//
// Prints "http-proxy listening on 127.0.0.1:PORT" once bound.

const http = require('http')
const { parseArgs } = require('util')
const httpProxy = require('http-proxy')

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    mode: { type: 'string', default: 'rr' },
    port: { type: 'string', default: '0' }
  }
})

const targets = positionals.map(address => ({ url: `http://${address}`, inFlight: 0 }))
// Without a keep-alive agent http-proxy sends "Connection: close" to every backend.
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 })
const proxy = httpProxy.createProxyServer({ agent, xfwd: true })

proxy.on('error', (err, req, res) => {
  if (res.headersSent || !res.writeHead) return res.destroy && res.destroy()
  res.writeHead(502, { 'Content-Type': 'text/plain' })
  res.end(`bad gateway: ${err.message}\n`)
})

let next = 0
function pick () {
  if (opts.mode === 'lc') {
    let best = targets[0]
    for (const t of targets) if (t.inFlight < best.inFlight) best = t
    return best
  }
  const t = targets[next]
  next = (next + 1) % targets.length
  return t
}

const server = http.createServer((req, res) => {
  const target = pick()
  target.inFlight++
  res.once('close', () => target.inFlight--)
  proxy.web(req, res, { target: target.url })
})
server.keepAliveTimeout = 60000

server.listen(Number(opts.port), '127.0.0.1', () => {
  process.stderr.write(`http-proxy listening on 127.0.0.1:${server.address().port}\n`)
})
process.on('SIGTERM', () => process.exit(0))
