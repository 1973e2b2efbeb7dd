'use strict'

// lila upgrade with --workers: the primary hands the sockets over and the new one starts
// workers of its own, under wrk; and lila upgrade PID, without a PID file.

const t = require('tap')
const { httpBackend, runLila } = require('./fixtures/helpers')
const { upgradableLila, startWrk } = require('./fixtures/upgrade')
const { tool } = require('./fixtures/tools')

const NO_WRK = tool('wrk').skip

t.setTimeout(300000)

t.test('--workers 2: the primary hands over, the new one starts its own workers; lila upgrade PID', { skip: NO_WRK }, async t => {
  const a = await httpBackend(t, 'a')
  const lila = await upgradableLila(t, ['rr', a.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--workers', '2'])
  const url = `http://127.0.0.1:${lila.port}/`
  const wrk = startWrk(url)
  t.teardown(() => wrk.kill())
  for (let i = 0; i < 2; i++) {
    const upgraded = await lila.upgrade()
    t.equal(upgraded.code, 0, upgraded.stderr)
    await lila.line(/workers: 1 \(pid \d+\), 2 \(pid \d+\)$/, { count: i + 2 })
  }
  // By PID, without the PID file (the outcome comes through the temporary folder).
  const pid = lila.pid()
  const from = lila.lines.length
  const byPid = await runLila(['upgrade', String(pid)], { timeout: 60000 })
  t.equal(byPid.code, 0, byPid.stderr)
  t.match(byPid.stdout, new RegExp(`^lila: upgraded from \\S+ \\(pid ${pid}\\) to \\S+ \\(pid \\d+\\)\\n$`))
  const [, , next] = await lila.line(/upgraded from \S+ \(pid (\d+)\) to \S+ \(pid (\d+)\)$/, { from })
  lila.pids.add(Number(next))
  const result = await wrk.stop()
  t.ok(result.requests > 0, `${result.requests} requests`)
  t.same(result.errors, { connect: 0, read: 0, write: 0, timeout: 0 }, `no socket error\n${result.text}`)
  t.equal(result.non2xx, 0)
})
