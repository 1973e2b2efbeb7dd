'use strict'

// TCP_NODELAY on a listener's sockets (lib/net/bind.js): set once on the listening
// socket where accepted sockets inherit it (Linux, macOS, FreeBSD), rather than a
// setsockopt per connection. The accepted socket's own option is read by python3's
// getsockopt, given the socket's descriptor: the kernel's word, not lila's.

const t = require('tap')
const net = require('net')
const path = require('path')
const { spawn } = require('child_process')
const { listen } = require('../lib/net/bind')
const { tool } = require('./fixtures/tools')
const { tmpDir } = require('./fixtures/tmp')
const { within } = require('./fixtures/helpers')

const READ_NODELAY = 'import socket; s = socket.socket(fileno=3); ' +
  'print(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)); s.detach()'

// TCP_NODELAY of `socket` (0 or 1), as the kernel has it.
async function noDelayOf (socket) {
  const child = spawn(tool('python3').path, ['-c', READ_NODELAY], { stdio: ['ignore', 'pipe', 'inherit', socket._handle.fd] })
  let out = ''
  child.stdout.on('data', chunk => { out += chunk })
  const code = await within(10000, 'python3 to read the option', new Promise(resolve => child.on('close', resolve)))
  if (code !== 0) throw new Error(`python3 exited ${code}`)
  return Number(out.trim())
}

// A server made as the listeners make theirs, bound through bind.js; its first
// accepted socket, and the client's.
// `file`: a Unix socket's path, else the TCP port bound is connected to.
async function acceptedOn (t, server, config, file = null) {
  await listen(server, config)
  t.teardown(() => server.close())
  const accepted = new Promise(resolve => server.once('connection', resolve))
  const client = file === null ? net.connect(server.address().port, '127.0.0.1') : net.connect(file)
  client.on('error', () => {})
  t.teardown(() => client.destroy())
  const socket = await within(10000, 'the connection', accepted)
  socket.on('error', () => {})
  t.teardown(() => socket.destroy())
  return socket
}

t.test('a TCP listener: TCP_NODELAY once on the listening socket, every accepted socket has it',
  { skip: tool('python3').skip || (process.platform !== 'linux' && 'the inheritance is checked on Linux') }, async t => {
    const server = net.createServer({ pauseOnConnect: true, noDelay: true })
    const socket = await acceptedOn(t, server, { host: '127.0.0.1', port: 0 })
    t.equal(server.noDelay, false, 'the server no longer sets it per connection')
    t.equal(await noDelayOf(socket), 1, 'the accepted socket has it all the same')
    const plain = net.createServer({ pauseOnConnect: true }) // made without noDelay: left so
    const other = await acceptedOn(t, plain, { host: '127.0.0.1', port: 0 })
    t.equal(await noDelayOf(other), 0, 'a server made without it: its sockets without it')
  })

t.test('a Unix socket listener keeps the server\'s own option (no TCP_NODELAY there)', async t => {
  const server = net.createServer({ pauseOnConnect: true, noDelay: true })
  const file = path.join(tmpDir(t), 'l.sock')
  await acceptedOn(t, server, { host: `unix:${file}`, port: 0 }, file)
  t.equal(server.noDelay, true)
})
