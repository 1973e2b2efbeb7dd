'use strict'

// The floor for memory per connection: the least a Node program can hold for an idle
// connection, so that lila's figure can be read as "Node's own sockets" plus "lila's
// own state". Takes lila's command line (what memory.js gives it) and ignores all but
// the backend and --protocol:
//
//   node node-floor.js round-robin 127.0.0.1:9001 --host 127.0.0.1 --port 0 [--protocol http]
//
// tcp: accept, connect to the backend, pass bytes both ways (a data handler each way,
// FIN passed on), as lila tcp does with nothing else. http: accept and answer every
// chunk read with a fixed 200 itself, keeping the connection (a keep-alive client of a
// Node server that holds nothing for it). Prints "listening on 127.0.0.1:PORT".

const net = require('net')

const args = process.argv.slice(2)
const backend = args.find(a => /^[\d.]+:\d+$/.test(a))
const http = args.includes('http')
const HELLO = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello')

const server = net.createServer({ allowHalfOpen: true, noDelay: true }, client => {
  client.on('error', () => {})
  if (http) {
    client.on('data', () => client.write(HELLO))
    client.on('end', () => client.end())
    return
  }
  const [host, port] = backend.split(':')
  const upstream = net.connect({ host, port: Number(port), allowHalfOpen: true, noDelay: true })
  upstream.on('error', () => client.destroy())
  client.on('close', () => upstream.destroy())
  upstream.on('close', () => client.destroy())
  client.on('data', chunk => { if (!upstream.write(chunk)) client.pause() })
  upstream.on('data', chunk => { if (!client.write(chunk)) upstream.pause() })
  client.on('drain', () => upstream.resume())
  upstream.on('drain', () => client.resume())
  client.on('end', () => upstream.end())
  upstream.on('end', () => client.end())
})
server.listen(0, '127.0.0.1', () => process.stderr.write(`listening on 127.0.0.1:${server.address().port}\n`))
process.on('SIGTERM', () => process.exit(0))
