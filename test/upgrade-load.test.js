'use strict'

// lila upgrade under load: ten upgrades in a row through the spawned executable while
// wrk, h2load and HTTP/2 clients run (the other upgrade tests: upgrade.test.js). Every
// wait is on a line, a PID file or an exit, never a sleep.

const t = require('tap')
const { httpBackend, within } = require('./fixtures/helpers')
const { upgradableLila, gone, startWrk, startH2load, startH2Connections } = require('./fixtures/upgrade')
const { tool } = require('./fixtures/tools')

const NO_WRK = tool('wrk').skip
const NO_H2LOAD = tool('h2load').skip
const UPGRADES = 10

// Ten upgrades take a minute or two on a busy machine.
t.setTimeout(600000)

t.test('ten upgrades in a row under wrk (keep-alive, and a connection per request) and h2load: no error, no refused connection', { skip: NO_WRK || NO_H2LOAD }, async t => {
  const a = await httpBackend(t, 'a')
  const b = await httpBackend(t, 'b')
  const lila = await upgradableLila(t, ['rr', a.address, b.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0'])
  const url = `http://127.0.0.1:${lila.port}/`
  const loads = [startWrk(url), startWrk(url, ['-H', 'Connection: close']), startH2load(url), startH2Connections(url)]
  t.teardown(() => loads.forEach(load => load.kill()))
  const served = () => a.requests + b.requests
  let before = served()
  for (let i = 0; i < UPGRADES; i++) {
    // Each lila serves the loads before the next takes over.
    await within(20000, 'requests through this lila', (async () => {
      while (served() < before + 50) await new Promise(resolve => setImmediate(resolve))
    })())
    const old = lila.pid()
    const upgraded = await lila.upgrade()
    t.equal(upgraded.code, 0, `upgrade ${i + 1}: ${upgraded.stderr.trim() || upgraded.stdout.trim()}`)
    t.equal(upgraded.from, old)
    t.equal(lila.pid(), upgraded.to, 'the PID file names the new lila')
    before = served()
  }
  const [keepAlive, perRequest, h2, h2Connections] = await Promise.all(loads.map(load => load.stop()))
  for (const [name, wrk] of [['keep-alive', keepAlive], ['Connection: close', perRequest]]) {
    t.ok(wrk.requests > 0, `wrk ${name}: ${wrk.requests} requests`)
    t.same(wrk.errors, { connect: 0, read: 0, write: 0, timeout: 0 }, `wrk ${name}: no socket error\n${wrk.text}`)
    t.equal(wrk.non2xx, 0, `wrk ${name}: every answer 200`)
  }
  t.ok(h2.succeeded > 0, `h2load: ${h2.succeeded} requests in ${h2.rounds} rounds`)
  t.equal(h2.failed, 0, `h2load: none failed\n${h2.text}`)
  t.equal(h2.errored, 0, 'h2load: none errored')
  // (h2load does not count a refused connection in its timed mode: a connection per request does.)
  t.ok(h2Connections.requests > 0, `HTTP/2, a connection per request: ${h2Connections.requests} requests`)
  t.same(h2Connections.errors, {}, 'HTTP/2, a connection per request: none refused or cut')
  t.equal(h2Connections.failed, 0)
  t.same(lila.lines.filter(line => /upgraded from/.test(line)).length, UPGRADES, 'each new lila said so once')
  // Every lila before the last is gone once it drained.
  for (const pid of lila.pids) if (pid !== lila.pid()) await gone(pid)
})
