'use strict'

// The floor for CPU per request: the least JavaScript a Node balancer can run, so that
// lila's figure can be read as "what Node itself costs" plus "what lila adds". It does
// only what the workload needs and nothing a real balancer must (no health, no retries,
// no header rewriting, no limits, no timeouts, no access log, no error answers):
//
//   node node-proxy.js --kind tcp|http|h2 --port 0 BACKEND...
//
// tcp: accept, connect to the next backend in turn, pass bytes both ways (a data handler
// each way, back-pressure, FIN passed on).
// http: HTTP/1.1 clients, one request at a time; each request's head (found by its
// blank line, nothing else parsed) is written as it came on an idle pooled connection
// to the next backend in turn, then its body as read (Content-Length only), and the
// response passed back, its end found by its Content-Length, the connection pooled
// again once both are through (a client's Connection: close is taken out of the head
// and honoured on the client's side only). NODE_FLOOR_READS=own: see readingOwn.
// h2: HTTP/2 clients by prior knowledge (h2c), each stream sent as a stream of one
// HTTP/2 session per backend (h2c), the next backend in turn; headers, body and trailers
// passed both ways (enough for gRPC unary calls).
//
// Prints "listening on 127.0.0.1:PORT" on stderr once bound.

const net = require('net')
const http2 = require('http2')
const { parseArgs } = require('util')

let backends = []
let turn = 0
const next = () => backends[turn++ % backends.length]

if (require.main === module) main()

function main () {
  const { values, positionals } = parseArgs({
    options: { kind: { type: 'string', default: 'tcp' }, port: { type: 'string', default: '0' } },
    allowPositionals: true
  })
  backends = positionals.map(a => {
    const i = a.lastIndexOf(':')
    return { host: a.slice(0, i), port: Number(a.slice(i + 1)), idle: [], session: null }
  })
  const server = { tcp: serveTcp, http: serveHttp, h2: serveH2 }[values.kind]()
  server.listen(Number(values.port), '127.0.0.1', () => {
    process.stderr.write(`listening on 127.0.0.1:${server.address().port}\n`)
  })
  process.on('SIGTERM', () => process.exit(0))
  process.on('SIGINT', () => process.exit(0))
}

function serveTcp () {
  return net.createServer({ allowHalfOpen: true, noDelay: true }, client => {
    const b = next()
    pass(client, net.connect({ host: b.host, port: b.port, allowHalfOpen: true, noDelay: true }))
  })
}

// Bytes both ways between two sockets: a data handler each way, back-pressure, FIN
// passed on, either one's end the other's (also node-floor.js's, for memory.js).
function pass (client, upstream) {
  client.on('error', () => upstream.destroy())
  upstream.on('error', () => client.destroy())
  client.on('close', () => upstream.destroy())
  upstream.on('close', () => client.destroy())
  client.on('data', chunk => { if (!upstream.write(chunk)) client.pause() })
  upstream.on('data', chunk => { if (!client.write(chunk)) upstream.pause() })
  client.on('drain', () => upstream.resume())
  upstream.on('drain', () => client.resume())
  client.on('end', () => upstream.end())
  upstream.on('end', () => client.end())
}

const HEAD_END = Buffer.from('\r\n\r\n')
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i
const CLOSE = /\r\nconnection:\s*close/i
const CLOSE_LINE = /\r\nconnection:\s*close\r\n/i
const CONNECTION_LINE = /\r\nconnection:[^\r]*\r\n/i

function serveHttp () {
  const own = process.env.NODE_FLOOR_READS === 'own'
  return net.createServer({ noDelay: true, pauseOnConnect: own }, accepted => {
    const client = own ? readingOwn(accepted) : accepted
    client.headPart = null // a request head still arriving
    client.bodyLeft = 0 // request body bytes still to pass to client.conn
    client.conn = null
    client.on('error', () => {})
    if (!own) client.on('data', chunk => fromClient(client, chunk))
  })
}

function fromClient (client, chunk) {
  if (client.bodyLeft > 0) return passBody(client, chunk)
  const buf = client.headPart === null ? chunk : Buffer.concat([client.headPart, chunk])
  const end = buf.indexOf(HEAD_END)
  if (end === -1) {
    client.headPart = Buffer.from(buf) // a read's buffer may be read into again
    return
  }
  client.headPart = null
  // Connection: close (W2) is the client's: the backend connection stays pooled, as
  // a balancer keeps it.
  const text = buf.latin1Slice(0, end + 4)
  const close = CLOSE.test(text)
  const length = CONTENT_LENGTH.exec(text)
  client.bodyLeft = length === null ? 0 : Number(length[1])
  client.pause() // one request at a time (resumed for its body below)
  const head = close ? Buffer.from(text.replace(CLOSE_LINE, '\r\n'), 'latin1') : buf.subarray(0, end + 4)
  send(next(), head, client, close)
  if (client.bodyLeft === 0) return
  client.resume()
  if (end + 4 < buf.length) passBody(client, buf.subarray(end + 4))
}

// Request body bytes (P1, P2: Content-Length bodies) to the backend connection the head
// went to, with back-pressure. What follows the body is the next request: a client
// whose response came before its body's end (nginx's `return 200`) sends it at once.
function passBody (client, chunk) {
  const rest = chunk.length > client.bodyLeft ? chunk.subarray(client.bodyLeft) : null
  if (rest !== null) chunk = chunk.subarray(0, client.bodyLeft)
  client.bodyLeft -= chunk.length
  const conn = client.conn
  const full = !conn.write(chunk)
  if (client.bodyLeft > 0) {
    if (full) client.pause()
    return
  }
  if (conn.left !== 0) return client.pause() // until the response is through
  done(conn, client)
  if (rest !== null) fromClient(client, rest)
}

// NODE_FLOOR_READS=own, an experiment (issue 37): the accepted socket's handle wrapped
// anew with `onread` (net.Server has no such option; `handle` and `_handle` are Node's
// internals), reading into a buffer of its own, reused when the write of what it read
// completed at once, else replaced. Shows what Node's new buffer per read costs.
function readingOwn (accepted) {
  const handle = accepted._handle
  accepted._handle = null
  accepted.destroy()
  const state = { next: Buffer.allocUnsafeSlow(64 * 1024) }
  const client = new net.Socket({
    handle,
    readable: true,
    writable: true,
    onread: {
      buffer: () => state.next,
      callback (nread, buffer) {
        const conn = client.conn
        fromClient(client, buffer.subarray(0, nread))
        const holder = client.conn || conn
        if (holder !== null && holder.writableLength > 0) state.next = Buffer.allocUnsafeSlow(64 * 1024)
      }
    }
  })
  return client
}

// The request head `head` to a pooled connection of backend `b`, the response back.
// `close`: the client asked to close after this response (W2's Connection: close).
function send (b, head, client, close) {
  const conn = b.idle.pop() || connect(b)
  conn.client = client
  client.conn = conn
  conn.close = close
  conn.head = null
  conn.left = -1
  conn.write(head)
}

function connect (b) {
  const conn = net.connect({ host: b.host, port: b.port, noDelay: true })
  conn.backend = b
  conn.on('error', () => { if (conn.client) conn.client.destroy() })
  // A backend that closes (Go's net/http after a response it sent before reading a long
  // body, with Connection: close) is not pooled, and takes the client it served along.
  conn.on('close', () => {
    const idle = conn.backend.idle
    if (idle.includes(conn)) idle.splice(idle.indexOf(conn), 1)
    if (conn.client) conn.client.destroy()
  })
  conn.on('drain', () => { if (conn.client && conn.client.bodyLeft > 0) conn.client.resume() })
  conn.on('data', chunk => {
    const client = conn.client
    if (client === null) return conn.destroy()
    let body = chunk
    if (conn.left === -1) {
      const buf = conn.head === null ? chunk : Buffer.concat([conn.head, chunk])
      const end = buf.indexOf(HEAD_END)
      if (end === -1) {
        conn.head = buf
        return
      }
      const head = buf.latin1Slice(0, end + 2)
      const m = CONTENT_LENGTH.exec(head)
      conn.left = m === null ? 0 : Number(m[1])
      conn.reusable = !CLOSE.test(head)
      // The last response on the client's connection says so.
      if (conn.close) client.write(`${head.replace(CONNECTION_LINE, '\r\n')}Connection: close\r\n\r\n`, 'latin1')
      else client.write(buf.subarray(0, end + 4))
      body = buf.subarray(end + 4)
    }
    if (body.length > 0) client.write(body)
    conn.left -= body.length
    if (conn.left <= 0 && client.bodyLeft <= 0) done(conn, client)
  })
  return conn
}

// The request's body and the response are both through: the connection pooled again.
function done (conn, client) {
  conn.client = null
  client.conn = null
  if (conn.reusable && !conn.destroyed) conn.backend.idle.push(conn)
  else conn.end()
  if (conn.close) client.end()
  else client.resume()
}

function serveH2 () {
  const server = http2.createServer()
  server.on('stream', (stream, headers) => {
    const b = next()
    if (b.session === null || b.session.destroyed) {
      b.session = http2.connect(`http://${b.host}:${b.port}`)
      b.session.on('error', () => {})
    }
    const out = {}
    for (const name in headers) if (name !== ':scheme' && name !== ':authority') out[name] = headers[name]
    const upstream = b.session.request(out, { endStream: stream.endAfterHeaders })
    stream.on('error', () => upstream.destroy())
    stream.on('close', () => { if (!upstream.destroyed) upstream.close() })
    upstream.on('error', () => stream.destroy())
    let trailers = null
    // The client may have gone meanwhile (a load generator stopping mid-stream).
    upstream.on('response', h => { if (!stream.destroyed) stream.respond(h, { waitForTrailers: true }) })
    upstream.on('trailers', t => { trailers = t })
    stream.on('wantTrailers', () => stream.sendTrailers(trailers || {}))
    upstream.pipe(stream)
    if (!stream.endAfterHeaders) stream.pipe(upstream)
  })
  return server
}

module.exports = { pass }
