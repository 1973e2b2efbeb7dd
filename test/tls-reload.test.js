'use strict'

// A reload (SIGHUP, the config file) changes a listener's names, its source of
// certificates (--tls local, files) and its client CA without dropping a connection:
// a connection made before every change still echoes after them, and each new
// handshake gets the certificate the config in force asks for. With --workers, every
// worker takes it.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const tls = require('tls')
const { spawnLila, tcpBackend, greetThenEcho, within } = require('./fixtures/helpers')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { tmpDir } = require('./fixtures/tmp')

function folder (t) {
  const dir = tmpDir(t, 'lila-tls-reload-')
  return dir
}

// A TLS connection to lila (tcp mode) trusting `ca`: { socket, name (the greeting), cert }.
function connect (port, servername, ca) {
  return within(10000, 'a TLS connection through lila', new Promise((resolve, reject) => {
    const socket = tls.connect({ port, host: '127.0.0.1', servername, ca: fs.readFileSync(ca) })
    socket.on('error', reject)
    socket.once('data', chunk => resolve({ socket, name: String(chunk).trim(), cert: socket.getPeerX509Certificate() }))
  }))
}

const namesOf = cert => cert.subjectAltName.split(', ').map(n => n.replace(/^(DNS|IP Address):/, ''))

t.test('SIGHUP: names, then files, then --tls local again; a connection from before goes on', async t => {
  const backend = await tcpBackend(t, 'a', greetThenEcho)
  const dir = folder(t)
  const file = path.join(dir, 'lila.json')
  const state = path.join(dir, 'state')
  const ca = path.join(state, 'local', 'ca.pem')
  const files = makeCertificate(certDir(t), 'files.test')
  const write = tls => fs.writeFileSync(file, JSON.stringify({
    'state-dir': state, check: 'none', listeners: [{ host: '127.0.0.1', port: 0, mode: 'rr', backends: [backend.address], ...tls }]
  }))
  write({ tls: 'local', 'tls-names': 'one.test' })
  const lila = await spawnLila(t, ['--config', file])
  const long = await connect(lila.port, 'one.test', ca)
  t.equal(long.name, 'a')
  t.same(namesOf(long.cert), ['one.test'])

  write({ tls: 'local', 'tls-names': 'two.test,127.0.0.1' })
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(\d+ changes?\)/)
  t.match(lila.stderr, /reload: tcp:0: tls-names one\.test -> two\.test,127\.0\.0\.1/)
  const two = await connect(lila.port, 'two.test', ca)
  t.same(namesOf(two.cert), ['two.test', '127.0.0.1'], 'new handshakes: the new names')
  two.socket.end()

  write({ 'tls-cert': files.cert, 'tls-key': files.key })
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded/, { count: 2 })
  t.match(lila.stderr, /reload: tcp:0: TLS --tls local -> certificate files/)
  const fromFile = await connect(lila.port, 'files.test', files.cert)
  t.same(namesOf(fromFile.cert), ['files.test'], 'the file\'s certificate')
  fromFile.socket.end()

  write({ tls: 'local', 'tls-names': 'two.test' })
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded/, { count: 3 })
  const back = await connect(lila.port, 'two.test', ca)
  t.same(namesOf(back.cert), ['two.test'])
  back.socket.end()

  long.socket.write('undisturbed')
  const echoed = await within(5000, 'the echo', new Promise(resolve => long.socket.once('data', resolve)))
  t.equal(String(echoed), 'undisturbed', 'the connection from before the three reloads still works')
  long.socket.end()
  t.equal((await lila.stop()).code, 0)
})

t.test('--workers 2: a reload\'s new names reach every worker', async t => {
  const backend = await tcpBackend(t, 'w', greetThenEcho)
  const dir = folder(t)
  const file = path.join(dir, 'lila.json')
  const state = path.join(dir, 'state')
  const ca = path.join(state, 'local', 'ca.pem')
  const write = names => fs.writeFileSync(file, JSON.stringify({
    'state-dir': state, check: 'none', workers: 2, listeners: [{ host: '127.0.0.1', port: 0, mode: 'rr', backends: [backend.address], tls: 'local', 'tls-names': names }]
  }))
  write('old.test')
  const lila = await spawnLila(t, ['--config', file])
  t.equal(lila.lines.filter(l => /local CA /.test(l)).length, 1, 'the CA is the primary\'s: said once')
  const first = await connect(lila.port, 'old.test', ca)
  t.same(namesOf(first.cert), ['old.test'])
  first.socket.end()
  write('new.test')
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded/)
  const serials = new Set()
  for (let i = 0; i < 8; i++) {
    const c = await connect(lila.port, 'new.test', ca)
    t.same(namesOf(c.cert), ['new.test'], `connection ${i}: the new names`)
    serials.add(c.cert.serialNumber)
    c.socket.end()
  }
  t.equal(serials.size, 1, 'one certificate, the primary\'s, in every worker')
})
