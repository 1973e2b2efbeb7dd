'use strict'

// The pure parts of upgrades and socket activation, without sockets: which socket goes
// to which listener (cli/inherited.js), what run-time state is kept (admin/journal.js),
// the PID file (cli/pid-file.js).

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { takeInherited, assign } = require('../lib/cli/inherited')
const { Journal } = require('../lib/admin/journal')
const { writePidFile, removePidFile, readPidFile } = require('../lib/cli/pid-file')
const { parseCommandLine } = require('../lib/config/argv')
const { RuntimeError } = require('../lib/errors')
const { tmpDir } = require('./fixtures/tmp')

const configOf = args => parseCommandLine(args).config

t.test('takeInherited: systemd\'s variables, for this process only, taken out of the environment', async t => {
  const env = { LISTEN_FDS: '2', LISTEN_PID: '42', LISTEN_FDNAMES: 'web:status', OTHER: 'x' }
  t.same(takeInherited(env, 42), {
    from: 'systemd', sockets: [{ fd: 3, name: 'web' }, { fd: 4, name: 'status' }], upgrade: null
  })
  t.same(env, { OTHER: 'x' }, 'workers and a later lila do not take them again')
  t.same(takeInherited({ LISTEN_FDS: '1', LISTEN_PID: '41' }, 42).from, null, 'another process\'s: not ours')
  t.same(takeInherited({ LISTEN_FDS: '2', LISTEN_PID: '42', LISTEN_FDNAMES: 'one' }, 42).sockets.map(s => s.name),
    ['unknown', 'unknown'], 'names that do not count the sockets are ignored')
  const upgrade = { pid: 7, version: '0.1.0', state: [], sockets: [{ fd: 3, role: 'listener', name: 'tcp:0' }] }
  const env2 = { LILA_UPGRADE: JSON.stringify(upgrade) }
  t.same(takeInherited(env2, 42), { from: 'upgrade', sockets: upgrade.sockets, upgrade: { pid: 7, version: '0.1.0', state: [] } })
  t.same(env2, {})
})

t.test('assign, from systemd: by name, then in order; a mismatch names both', async t => {
  const systemd = (...names) => ({ from: 'systemd', sockets: names.map((name, i) => ({ fd: 3 + i, name })), upgrade: null })
  const one = configOf(['rr', ':9001', '--status-port', '0'])
  const inOrder = assign(systemd('unknown'), one)
  t.same([...inOrder.listeners.keys()], ['tcp:4444'])
  t.equal(inOrder.listeners.get('tcp:4444').fd, 3)
  t.equal(inOrder.listeners.get('tcp:4444').check, true, 'a host or port given is checked')
  t.equal(inOrder.status, null, 'the status listener binds its own when no socket is left')
  const named = assign(systemd('status', 'unknown'), one)
  t.equal(named.status.fd, 3, 'status: the socket named status')
  t.equal(named.listeners.get('tcp:4444').fd, 4)
  t.throws(() => assign(systemd('a', 'b', 'c'), one), new RuntimeError('systemd gave 3 sockets (LISTEN_FDS=3) for 1 listener and the status listener: the socket systemd gave as fd 5 (named "c") is for none of them; expected a listener for each socket'))
  t.same(assign({ from: null, sockets: [], upgrade: null }, one), { listeners: new Map(), redirects: new Map(), status: null }, 'none given')
  // --redirect-http: named NAME-redirect or redirect, else after the status listener.
  const redirecting = configOf(['rr', ':9001', '--protocol', 'http', '--tls', 'local', '--port', '8443', '--redirect-http', '8080'])
  const byOrder = assign(systemd('unknown', 'unknown'), redirecting)
  t.equal(byOrder.listeners.get('http:8443').fd, 3)
  t.equal(byOrder.redirects.get('http:8443').fd, 4, 'the socket after the listeners\' goes to the redirect')
  t.equal(byOrder.redirects.get('http:8443').check, true, 'its port is held to --redirect-http')
  t.match(byOrder.redirects.get('http:8443').what, /^--redirect-http of listener http:8443: /)
  const byName = assign(systemd('redirect', 'unknown'), redirecting)
  t.equal(byName.redirects.get('http:8443').fd, 3, 'redirect: the socket named redirect')
  t.equal(byName.listeners.get('http:8443').fd, 4)
  t.equal(assign(systemd('unknown'), redirecting).redirects.size, 0, 'with no socket left the redirect binds its own')
  const withStatus = configOf(['rr', ':9001', '--protocol', 'http', '--tls', 'local', '--redirect-http', '8080', '--status-port', '0'])
  const three = assign(systemd('unknown', 'unknown', 'unknown'), withStatus)
  t.same([three.listeners.get('http:4444').fd, three.status.fd, three.redirects.get('http:4444').fd], [3, 4, 5],
    'in order: the listeners, the status listener, the redirects')
  t.throws(() => assign(systemd('a', 'b', 'c', 'd'), withStatus), new RuntimeError('systemd gave 4 sockets (LISTEN_FDS=4) for 1 listener and the status listener and 1 --redirect-http: the socket systemd gave as fd 6 (named "d") is for none of them; expected a listener for each socket'))
})

t.test('assign, from an upgrade: a listener keeps its socket if it keeps its name and address', async t => {
  const config = configOf(['rr', ':9001', '--host', '127.0.0.1', '--port', '0', '--status-port', '0'])
  const handed = (name, port, extra = {}) => ({ fd: 99, role: 'listener', name, protocol: 'tcp', host: '127.0.0.1', port, ...extra })
  const from = sockets => ({ from: 'upgrade', sockets, upgrade: { pid: 7, version: '0.1.0', state: [] } })
  const kept = assign(from([handed('tcp:0', 0), { fd: 98, role: 'status', host: '127.0.0.1', port: 0 }]), config)
  t.equal(kept.listeners.get('tcp:0').fd, 99)
  t.equal(kept.listeners.get('tcp:0').owned, true, 'its Unix socket file, if any, is the new lila\'s to remove')
  t.equal(kept.status.fd, 98)
  // Another port (a config file edited since): the socket is let go, the listener binds.
  const closed = []
  const originalClose = fs.closeSync
  fs.closeSync = fd => closed.push(fd)
  t.teardown(() => { fs.closeSync = originalClose })
  const moved = assign(from([handed('tcp:0', 8080)]), config)
  t.equal(moved.listeners.size, 0)
  t.same(closed, [99], 'the socket no listener takes is closed')
})

t.test('the journal keeps the last word on each backend, faults not at all', async t => {
  const journal = new Journal()
  const performed = []
  const perform = journal.recording(async action => { performed.push(action.op); return 'done' })
  t.equal(await perform({ op: 'drain', backend: '10.0.0.1:80' }), 'done')
  await perform({ op: 'enable', backend: '10.0.0.1:80' })
  await perform({ op: 'weight', backend: '10.0.0.2:80', value: 3 })
  await perform({ op: 'weight', backend: '10.0.0.2:80', value: 5 })
  await perform({ op: 'fault', backend: '10.0.0.2:80', fault: {} })
  await perform({ op: 'add', spec: { host: '10.0.0.3', port: 80 } })
  await perform({ op: 'remove', backend: '10.0.0.3:80' })
  await perform({ op: 'remove', backend: '10.0.0.4:80' })
  t.same(performed, ['drain', 'enable', 'weight', 'weight', 'fault', 'add', 'remove', 'remove'])
  t.same(journal.entries(), [
    { op: 'enable', backend: '10.0.0.1:80' },
    { op: 'weight', backend: '10.0.0.2:80', value: 5 },
    { op: 'remove', backend: '10.0.0.4:80' }
  ], 'a backend added and removed at run time leaves nothing to do again')
  const failing = journal.recording(async () => { throw new Error('no such backend') })
  await t.rejects(failing({ op: 'drain', backend: '10.0.0.9:80' }))
  t.equal(journal.entries().length, 3, 'what failed is not kept')
  t.same(new Journal(journal.entries()).entries(), journal.entries(), 'handed over as it is')
})

t.test('the PID file: written whole, removed only while it names this process', async t => {
  const dir = tmpDir(t, 'lila-pid-')
  const file = path.join(dir, 'lila.pid')
  writePidFile(file, 123)
  t.equal(fs.readFileSync(file, 'utf8'), '123\n')
  t.equal(readPidFile(file), 123)
  t.same(fs.readdirSync(dir), ['lila.pid'], 'no temporary file left')
  writePidFile(file, 456) // the new lila of an upgrade
  removePidFile(file, 123) // the old one, exiting
  t.equal(readPidFile(file), 456, 'the old lila leaves the new one\'s file')
  removePidFile(file, 456)
  t.notOk(fs.existsSync(file))
  t.throws(() => writePidFile(path.join(dir, 'none', 'lila.pid'), 1), /^cannot write --pid-file \S+: no such file or directory$/)
  fs.writeFileSync(file, 'lila\n')
  t.throws(() => readPidFile(file), /holds "lila\\n": expected a process ID/)
})
