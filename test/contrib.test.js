'use strict'

// contrib/lila.service and lila.socket: systemd accepts them without a warning, the
// service asks for what lila does on signals, and its ExecStart is a command line lila
// runs: SIGHUP (ExecReload) reloads the config file, SIGTERM (KillSignal) stops it
// cleanly, the PID file systemd follows on an upgrade (PIDFile=) is the one lila writes.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawnSync } = require('child_process')
const { ROOT, LILA, spawnLila, tcpBackend } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')
const { tool } = require('./fixtures/tools')

const UNIT = path.join(ROOT, 'contrib', 'lila.service')
const text = fs.readFileSync(UNIT, 'utf8')
const setting = name => (text.match(new RegExp(`^${name}=(.*)$`, 'm')) || [])[1]

t.test('the unit: signals, restart, hardening', async t => {
  t.equal(setting('ExecReload'), '/bin/kill -HUP $MAINPID', 'reload is SIGHUP: lila re-reads its config file')
  t.equal(setting('KillSignal'), 'SIGTERM', 'stop is SIGTERM: lila lets connections finish')
  t.equal(setting('Restart'), 'on-failure')
  t.ok(parseInt(setting('TimeoutStopSec')) > 30, 'longer than the default --shutdown-timeout (30s)')
  for (const hardening of ['DynamicUser', 'NoNewPrivileges', 'ProtectSystem', 'ProtectHome', 'PrivateTmp']) {
    t.ok(setting(hardening), `${hardening} is set`)
  }
  t.notOk(setting('MemoryDenyWriteExecute'), 'not MemoryDenyWriteExecute: V8 needs it off')
  const pidFile = setting('PIDFile')
  t.match(setting('ExecStart'), ` --pid-file ${pidFile}`, 'PIDFile= is where lila writes its PID (an upgrade moves it)')
  t.equal(path.dirname(pidFile), `/run/${setting('RuntimeDirectory')}`, 'in a folder systemd makes for the dynamic user')
})

t.test('systemd-analyze verify accepts it, without a warning', { skip: tool('systemd-analyze').skip }, async t => {
  // verify checks that ExecStart exists: point it at this checkout's lila.
  const dir = tmpDir(t, 'lila-unit-')
  const unit = path.join(dir, 'lila.service')
  fs.writeFileSync(unit, text.replace(/^ExecStart=\S+/m, `ExecStart=${LILA}`))
  const socket = path.join(dir, 'lila.socket')
  fs.copyFileSync(path.join(ROOT, 'contrib', 'lila.socket'), socket)
  const verified = spawnSync('systemd-analyze', ['verify', unit, socket], { encoding: 'utf8' })
  t.equal(verified.status, 0, verified.stderr)
  t.equal(verified.stderr.trim(), '', 'no warning')
})

t.test('ExecStart runs: reload on SIGHUP, clean stop on SIGTERM', async t => {
  const [program, ...args] = setting('ExecStart').split(' ')
  t.equal(program, '/usr/local/bin/lila', 'where npm i -g puts it')
  const dir = tmpDir(t, 'lila-unit-')
  const file = path.join(dir, 'lila.json')
  const a = await tcpBackend(t, 'a')
  const b = await tcpBackend(t, 'b')
  const config = backends => JSON.stringify({ listeners: [{ host: '127.0.0.1', port: 0, check: 'none', backends }] })
  fs.writeFileSync(file, config([a.address]))
  const pidFile = path.join(dir, 'lila.pid')
  const local = { '/etc/lila/lila.json': file, [setting('PIDFile')]: pidFile }
  const lila = await spawnLila(t, args.map(arg => local[arg] || arg))
  t.equal(fs.readFileSync(pidFile, 'utf8'), `${lila.child.pid}\n`, 'the PID file names lila')
  fs.writeFileSync(file, config([a.address, b.address]))
  lila.child.kill('SIGHUP')
  await lila.waitForLine(/reloaded \(1 change\)/)
  t.equal((await lila.stop('SIGTERM')).code, 0)
  t.notOk(fs.existsSync(pidFile), 'and is gone once lila stopped')
})
