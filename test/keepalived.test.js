'use strict'

// docs/several.md's keepalived recipe, run: two hosts (network namespaces made here, on
// a bridge of their own, TEST-NET-1 addresses that exist nowhere else), each with lila
// and keepalived checking lila's /status.json; a client in a third namespace reaches
// lila through the virtual address. lila on the master stops: the address moves to the
// backup, and the client is answered there. Needs root, ip, keepalived and curl.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn, spawnSync, execFileSync } = require('child_process')
const { until, within } = require('./fixtures/helpers')
const { tool } = require('./fixtures/tools')

const LILA = path.join(__dirname, '..', 'lila')
const MISSING = process.getuid?.() !== 0
  ? 'needs root (network namespaces)'
  : tool('keepalived').skip || tool('ip').skip

const VIP = '192.0.2.100'
const tag = `lk${process.pid % 100000}`
const NS = { a: `${tag}a`, b: `${tag}b`, client: `${tag}c`, bridge: `${tag}s` }
const ADDRESS = { a: '192.0.2.1', b: '192.0.2.2', client: '192.0.2.3' }

const ip = (...args) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] })
const inNs = (ns, command, args) => ['ip', ['netns', 'exec', ns, command, ...args]]

function network (t) {
  t.teardown(() => { for (const ns of Object.values(NS)) spawnSync('ip', ['netns', 'del', ns]) })
  for (const ns of Object.values(NS)) {
    ip('netns', 'add', ns)
    ip('-n', ns, 'link', 'set', 'lo', 'up')
  }
  ip('-n', NS.bridge, 'link', 'add', 'br0', 'type', 'bridge')
  ip('-n', NS.bridge, 'link', 'set', 'br0', 'up')
  for (const host of ['a', 'b', 'client']) {
    ip('link', 'add', `${tag}${host}0`, 'netns', NS[host], 'type', 'veth', 'peer', 'name', `${host}1`, 'netns', NS.bridge)
    ip('-n', NS[host], 'link', 'set', `${tag}${host}0`, 'name', 'eth0')
    ip('-n', NS[host], 'addr', 'add', `${ADDRESS[host]}/24`, 'dev', 'eth0')
    ip('-n', NS[host], 'link', 'set', 'eth0', 'up')
    ip('-n', NS.bridge, 'link', 'set', `${host}1`, 'master', 'br0')
    ip('-n', NS.bridge, 'link', 'set', `${host}1`, 'up')
  }
}

// A process in a namespace, killed at the end.
function run (t, ns, command, args) {
  const child = spawn(...inNs(ns, command, args), { stdio: ['ignore', 'pipe', 'pipe'] })
  const proc = { child, output: '', waiters: [], exited: new Promise(resolve => child.once('exit', resolve)) }
  const heard = chunk => {
    proc.output += chunk
    for (const waiter of proc.waiters.slice()) waiter()
  }
  child.stdout.setEncoding('utf8').on('data', heard)
  child.stderr.setEncoding('utf8').on('data', heard)
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    return proc.exited
  })
  proc.says = pattern => within(20000, () => `${command} in ${ns} to say ${pattern}:\n${proc.output}`,
    new Promise(resolve => {
      const look = () => {
        if (!pattern.test(proc.output)) return
        proc.waiters.splice(proc.waiters.indexOf(look), 1)
        resolve()
      }
      proc.waiters.push(look)
      look()
    }))
  return proc
}

function keepalivedConfig (dir, host, priority) {
  const file = path.join(dir, `keepalived-${host}.conf`)
  const peer = host === 'a' ? ADDRESS.b : ADDRESS.a
  fs.writeFileSync(file, `global_defs {
  script_user root
  enable_script_security
}
vrrp_script lila {
  script "/usr/bin/curl -fsS -o /dev/null --max-time 1 http://127.0.0.1:9000/status.json"
  interval 1
  fall 2
  rise 2
}
vrrp_instance lila {
  state ${host === 'a' ? 'MASTER' : 'BACKUP'}
  interface eth0
  virtual_router_id 51
  priority ${priority}
  advert_int 1
  unicast_src_ip ${ADDRESS[host]}
  unicast_peer {
    ${peer}
  }
  virtual_ipaddress {
    ${VIP}/24
  }
  track_script {
    lila
  }
}
`)
  return file
}

// What the client gets at the virtual address: the answering host's name, or null.
function ask () {
  const [command, args] = inNs(NS.client, 'curl', ['-sS', '--max-time', '1', `http://${VIP}:8080/`])
  const result = spawnSync(command, args, { encoding: 'utf8' })
  return result.status === 0 ? result.stdout.trim() : null
}

t.test('keepalived moves the address to the backup when lila on the master stops answering', { skip: MISSING }, async t => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-keepalived-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  network(t)
  const lilas = {}
  for (const [host, priority] of [['a', 150], ['b', 100]]) {
    // The host's app, and lila in front of it on the virtual address, which it may bind
    // before it holds it (ip_nonlocal_bind, in this namespace only).
    ip('netns', 'exec', NS[host], 'sysctl', '-q', '-w', 'net.ipv4.ip_nonlocal_bind=1')
    const app = run(t, NS[host], process.execPath, ['-e',
      `require('http').createServer((q, s) => s.end('${host}')).listen(7000, '127.0.0.1', () => console.log('up'))`])
    await app.says(/up/)
    lilas[host] = run(t, NS[host], LILA, ['127.0.0.1:7000', '--protocol', 'http', '--host', VIP, '--port', '8080',
      '--status-port', '9000'])
    await lilas[host].says(/listening on/)
    const config = keepalivedConfig(dir, host, priority)
    run(t, NS[host], 'keepalived', ['--dont-fork', '--log-console', '--vrrp', '-f', config,
      '-p', path.join(dir, `k-${host}.pid`), '-r', path.join(dir, `v-${host}.pid`)])
  }
  await until(() => ask() === 'a', 'the master to hold the address and answer', { timeout: 20000, every: 200 })
  t.pass('the client is answered by lila on the master')
  lilas.a.child.kill('SIGKILL')
  await until(() => ask() === 'b', 'the backup to take the address and answer', { timeout: 20000, every: 200 })
  t.pass('once lila on the master stopped answering /status.json, by lila on the backup')
})
