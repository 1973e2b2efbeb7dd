'use strict'

// The floor for memory per connection: the least a Node program can hold for an idle
// connection, so that lila's figure can be read as "Node's own sockets" plus "lila's
// own state". Takes lila's command line (what memory.js gives it) and ignores all but
// the backend and --protocol:
//
//   node node-floor.js round-robin 127.0.0.1:9001 --host 127.0.0.1 --port 0 [--protocol http|h2]
//
// tcp: accept, connect to the backend, pass bytes both ways (a data handler each way,
// FIN passed on), as lila tcp does with nothing else. http: accept and answer every
// chunk read with a fixed 200 itself, keeping the connection (a keep-alive client of a
// Node server that holds nothing for it). h2: HTTP/2 by prior knowledge (h2c); each
// stream opens a connection to the backend and writes a GET on it, and the answer is
// never read (the memory probe's backend sends none): a Node Http2Stream and a socket
// per stream, nothing else. Prints "listening on 127.0.0.1:PORT".

const net = require('net')
const { pass } = require('./node-proxy')

const args = process.argv.slice(2)
const backend = args.find(a => /^[\d.]+:\d+$/.test(a))
const h2 = args.includes('h2')
const http = args.includes('http')

if (h2) serveH2()
else serveNet()
process.on('SIGTERM', () => process.exit(0))

function serveH2 () {
  const [host, port] = backend.split(':')
  const server = require('http2').createServer()
  server.on('stream', stream => {
    const upstream = net.connect({ host, port: Number(port), noDelay: true })
    upstream.on('error', () => stream.destroy())
    stream.on('error', () => {})
    stream.on('close', () => upstream.destroy())
    upstream.write(`GET / HTTP/1.1\r\nHost: ${backend}\r\n\r\n`)
  })
  server.listen(0, '127.0.0.1', () => process.stderr.write(`listening on 127.0.0.1:${server.address().port}\n`))
}

function serveNet () {
  const HELLO = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello')

  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, client => {
    client.on('error', () => {})
    if (http) {
      client.on('data', () => client.write(HELLO))
      client.on('end', () => client.end())
      return
    }
    const [host, port] = backend.split(':')
    pass(client, net.connect({ host, port: Number(port), allowHalfOpen: true, noDelay: true }))
  })
  server.listen(0, '127.0.0.1', () => process.stderr.write(`listening on 127.0.0.1:${server.address().port}\n`))
}
