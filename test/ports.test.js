'use strict'

// The test fixtures' named ports (fixtures/ports.js): a dead port stays dead, and no two
// processes are handed the same one. Two test files run at once on two cores; before
// these claims, a port released by deadPort() came back from the kernel as another
// backend's in the same test ("duplicate backend").

const t = require('tap')
const net = require('net')
const path = require('path')
const { execFile } = require('child_process')
const { deadPort, restartablePorts, claim, claimed, ephemeralLow } = require('./fixtures/ports')
const { within } = require('./fixtures/helpers')

const PORTS = path.join(__dirname, 'fixtures', 'ports.js')

// Node in another process: claims `port`, says whether it got it, and exits.
function claimElsewhere (port) {
  const code = `require(${JSON.stringify(PORTS)}).claim(${port}).then(ok => process.stdout.write(String(ok)))`
  return within(10000, 'the other process', new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', code], (err, stdout) => err ? reject(err) : resolve(stdout))
  }))
}

function connect (port) {
  return within(5000, `a connection to ${port}`, new Promise(resolve => {
    const socket = net.connect(port, '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve('connected') })
    socket.once('error', err => resolve(err.code))
  }))
}

t.test('a dead port is below the ephemeral range, refused, and claimed', async t => {
  const ports = new Set()
  for (let i = 0; i < 20; i++) ports.add(await deadPort())
  t.equal(ports.size, 20, 'twenty dead ports, all different')
  for (const port of ports) {
    t.ok(port < ephemeralLow(), `${port} is below the ephemeral range: no listen on port 0 is given it`)
    t.ok(claimed(port), `${port} is claimed by this process`)
  }
  t.equal(await connect([...ports][0]), 'ECONNREFUSED', 'connecting to one is refused')
})

t.test('a claim holds against other processes, and ends with its holder', async t => {
  const [mine] = await restartablePorts(1)
  t.equal(await claimElsewhere(mine), 'false', 'another process cannot claim a port this one holds')
  t.equal(await claim(mine), false, 'nor can this one, twice')
  // A number outside the range ports are handed out from, so no other test file can
  // be holding it: claims are names, the port itself is not bound.
  const other = 100000 + process.pid
  t.equal(await claimElsewhere(other), 'true', 'a claim nobody holds is granted to the other process')
  t.equal(await claim(other), true, 'and is free again once that process has exited')
})
