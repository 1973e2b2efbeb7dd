'use strict'

// A minimal HTTP/1.1 backend on raw `net` sockets: fixed bodies, keep-alive, an
// optional fixed delay per response, and a count of the requests it served. Raw
// sockets rather than `http` so that this process costs as little CPU as possible on
// the core it shares with the load generator.
//
//   node backend-server.js --port 0 [--delay 20] [--name A]
//
// Prints "backend A listening on 127.0.0.1:PORT" once bound.
// GET /        -> 200, "hello" (5 bytes)
// GET /1m      -> 200, 1 MiB
// GET /__count -> 200, the number of requests served so far (this one excluded)
// A request with "Connection: close" is answered and the connection closed.

const net = require('net')
const { parseArgs } = require('util')

const { values: opts } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    delay: { type: 'string', default: '0' },
    name: { type: 'string', default: 'backend' }
  }
})
const delayMs = Number(opts.delay)

function response (body, close) {
  const head = `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n` +
    `${close ? 'Connection: close\r\n' : ''}\r\n`
  return Buffer.concat([Buffer.from(head, 'latin1'), body])
}
const HELLO = Buffer.from('hello')
const MIB = Buffer.alloc(1024 * 1024, 'x')
// Whole responses are prebuilt: the common case is one write of a ready buffer.
const prebuilt = {
  '/': [response(HELLO, false), response(HELLO, true)],
  '/1m': [response(MIB, false), response(MIB, true)]
}
const NOT_FOUND = Buffer.from('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n')

let served = 0

// The head of one request: its path, whether it asks to close, and the length of a
// body to skip (the bench sends none, but a proxy probing with one must not desync us).
function parseHead (head) {
  const firstSpace = head.indexOf(' ')
  const secondSpace = head.indexOf(' ', firstSpace + 1)
  const path = head.slice(firstSpace + 1, secondSpace)
  const lower = head.toLowerCase()
  const close = /\r\nconnection:[^\r]*close/.test(lower) || lower.includes(' http/1.0\r\n')
  const cl = lower.match(/\r\ncontent-length:\s*(\d+)/)
  return { path, close, bodyLength: cl ? Number(cl[1]) : 0 }
}

const server = net.createServer({ noDelay: true }, socket => {
  let buffered = ''
  let skip = 0 // request body bytes still to discard
  let queue = Promise.resolve() // keeps delayed responses in request order
  socket.setEncoding('latin1')
  socket.on('error', () => {})
  socket.on('data', chunk => {
    buffered += chunk
    for (let n = 0; n < 10000; n++) { // bounded: at most this many pipelined requests per chunk
      if (skip > 0) {
        const take = Math.min(skip, buffered.length)
        buffered = buffered.slice(take)
        skip -= take
        if (skip > 0) return
      }
      const end = buffered.indexOf('\r\n\r\n')
      if (end === -1) return
      const req = parseHead(buffered.slice(0, end + 4))
      buffered = buffered.slice(end + 4)
      skip = req.bodyLength
      answer(socket, req)
    }
  })

  function answer (socket, { path, close }) {
    let bytes
    if (path === '/__count') {
      bytes = response(Buffer.from(String(served)), close)
    } else if (prebuilt[path]) {
      served++
      bytes = prebuilt[path][close ? 1 : 0]
    } else {
      bytes = NOT_FOUND
    }
    const send = () => {
      if (socket.destroyed) return
      if (close) socket.end(bytes)
      else socket.write(bytes)
    }
    if (delayMs > 0 && path !== '/__count') {
      queue = queue.then(() => new Promise(resolve => setTimeout(() => { send(); resolve() }, delayMs)))
    } else {
      send()
    }
  }
})

server.listen(Number(opts.port), '127.0.0.1', () => {
  process.stderr.write(`backend ${opts.name} listening on 127.0.0.1:${server.address().port}\n`)
})
process.on('SIGTERM', () => process.exit(0))
