'use strict'

// SRV discovery: a backend written _service._proto.name is found through SRV records,
// each target:port a backend (its addresses resolved as names are), weighted by the
// record, lower priorities as backups. End to end, the real `lila` asks our own DNS
// server (a fixture on 127.0.0.1) whose answers change; every target is 127.0.0.1 on
// its own port. Then the rules, in process, with DNS replaced.

const t = require('tap')
const { dnsServer } = require('./fixtures/dns-server')
const {
  spawnLila, tcpBackend, exchange, statusJson, closeServer, makeUpstream, until, within
} = require('./fixtures/helpers')
const { parseBackend } = require('../lib/config/backend-spec')

const NAME = '_app._tcp.lila.test'

async function servedBy (port, n) {
  const seen = []
  for (let i = 0; i < n; i++) seen.push((await exchange(port)).data.trim())
  return seen
}

const distinct = names => [...new Set(names)].sort()
const count = (names, name) => names.filter(n => n === name).length
const escape = text => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')

t.test('lila balances over what the SRV records say, and follows them: targets join and leave, weights and priorities apply', async t => {
  const [a, b, c] = await Promise.all(['a', 'b', 'c'].map(name => tcpBackend(t, name)))
  const record = (backend, priority, weight) => ({ priority, weight, port: backend.port, target: `${backend.name}.lila.test` })
  const dns = await dnsServer(t, {
    [NAME]: { SRV: [record(a, 10, 0), record(b, 10, 1)] },
    'a.lila.test': { A: ['127.0.0.1'] },
    'b.lila.test': { A: ['127.0.0.1'] },
    'c.lila.test': { A: ['127.0.0.1'] }
  })
  const lila = await spawnLila(t, [
    'rr', NAME, '--host', '127.0.0.1', '--port', '0', '--dns-server', dns.address,
    '--resolve-interval', '100ms', '--check-interval', '100ms', '--status-port', '0'
  ])
  t.match(lila.listening, /\(tcp, round-robin, 2 backends\)$/)
  for (const backend of [a, b]) {
    const row = new RegExp(`^lila: ${escape(backend.address)} \\(${backend.name}\\.lila\\.test\\)\\s+up\\s+tcp connect ok$`)
    t.ok(lila.lines.some(l => row.test(l)), `the table lists ${backend.address}, from its target`)
  }
  t.same(distinct(await servedBy(lila.port, 6)), ['a', 'b'])
  const weights = async () => Object.fromEntries((await statusJson(lila)).listeners[0].backends
    .filter(x => !x.draining).map(x => [x.address, [x.weight, x.backup]]))
  t.same(await weights(), { [a.address]: [1, false], [b.address]: [1, false] }, 'weight 0 counts as 1')
  t.ok(dns.queries.some(q => q.name === NAME && q.type === 'SRV'), 'the SRV record was asked for')
  t.ok(dns.queries.some(q => q.name === 'a.lila.test' && q.type === 'A'), 'and its targets\' addresses')

  // A third target, with three times the weight.
  dns.set(NAME, { SRV: [record(a, 10, 0), record(b, 10, 1), record(c, 10, 3)] })
  const listed = `${escape(a.address)}, ${escape(b.address)}, ${escape(c.address)}`
  await lila.waitForLine(new RegExp(`^lila: ${escape(NAME)} resolves to ${listed} \\(added ${escape(c.address)}\\)$`))
  await lila.waitForLine(new RegExp(`^lila: backend ${escape(c.address)} up: tcp connect ok$`))
  t.same((await weights())[c.address], [3, false])
  const spread = await servedBy(lila.port, 20)
  t.same(distinct(spread), ['a', 'b', 'c'], 'the new target takes traffic')
  t.ok(count(spread, 'c') > count(spread, 'a') && count(spread, 'c') > count(spread, 'b'), `the weight applies: ${spread}`)

  // b leaves the records: it drains, the others go on.
  dns.set(NAME, { SRV: [record(a, 10, 0), record(c, 10, 3)] })
  await lila.waitForLine(new RegExp(`resolves to ${escape(a.address)}, ${escape(c.address)} \\(removed ${escape(b.address)}\\)$`))
  t.same(distinct(await servedBy(lila.port, 8)), ['a', 'c'])

  // c moves to a lower priority: a backup, used only when a cannot serve.
  dns.set(NAME, { SRV: [record(a, 10, 0), record(c, 20, 3)] })
  await lila.waitForLine(new RegExp(`resolves to ${escape(a.address)}, ${escape(c.address)} \\(backup\\) \\(${escape(c.address)} now a backup\\)$`))
  t.same((await weights())[c.address], [3, true])
  t.same(distinct(await servedBy(lila.port, 6)), ['a'], 'the backup takes nothing while a is up')
  await closeServer(a.server)
  await lila.waitForLine(new RegExp(`^lila: backend ${escape(a.address)} down: tcp connection refused$`))
  t.same(distinct(await servedBy(lila.port, 4)), ['c'], 'the backup serves once the primary is down')

  // The name gone: the last good set stays.
  dns.delete(NAME)
  await lila.waitForLine(new RegExp(`^lila: cannot resolve ${escape(NAME)}: name not found; keeping ${escape(a.address)}, ${escape(c.address)}$`))
  t.same(distinct(await servedBy(lila.port, 2)), ['c'])
  t.equal((await lila.stop()).code, 0)
})

// In process: DNS replaced by functions the test answers.
function fakeDns (records, addresses) {
  const calls = { srv: 0 }
  return {
    calls,
    resolveSrv: async name => {
      calls.srv++
      const answer = records.get(name)
      if (answer instanceof Error) throw answer
      return answer
    },
    resolve: async name => {
      const answer = addresses.get(name)
      if (answer instanceof Error) throw answer
      return answer
    }
  }
}

const dnsError = code => Object.assign(new Error(`query ${code}`), { code })

t.test('the records, in process: weights, backups, a target that fails for now keeps its backends, an operator\'s weight stays until the record changes, a reload keeps the records\' weights', async t => {
  const records = new Map([[NAME, [
    { name: 'a.test', port: 8001, priority: 1, weight: 0 },
    { name: 'b.test.', port: 8002, priority: 1, weight: 7 },
    { name: 'c.test', port: 8003, priority: 5, weight: 2 },
    { name: '127.0.0.1', port: 8004, priority: 1, weight: 1 }
  ]]])
  const addresses = new Map([['a.test', ['127.0.0.1']], ['b.test', ['127.0.0.1', '::1']], ['c.test', ['127.0.0.1']]])
  const dns = fakeDns(records, addresses)
  const config = { backends: [parseBackend(`${NAME},max-conn=9`)], resolveInterval: 10 }
  const { upstream, waitFor } = makeUpstream(t, config, { resolveSrv: dns.resolveSrv, resolve: dns.resolve })
  await within(5000, 'the start', upstream.start())
  const shown = () => Object.fromEntries(upstream.backends.map(b =>
    [b.address, [b.weight, b.backup, b.maxConn, b.name]]))
  t.same(shown(), {
    '127.0.0.1:8001': [1, false, 9, 'a.test'],
    '127.0.0.1:8002': [7, false, 9, 'b.test'],
    '[::1]:8002': [7, false, 9, 'b.test'],
    '127.0.0.1:8003': [2, true, 9, 'c.test'],
    '127.0.0.1:8004': [1, false, 9, '127.0.0.1']
  }, 'a backend per address of each target, weights and backups from the records, settings from the spec')

  // b cannot be resolved for now; c no longer exists.
  addresses.set('b.test', dnsError('ETIMEOUT'))
  addresses.set('c.test', dnsError('ENOTFOUND'))
  await waitFor(/^_app\._tcp\.lila\.test resolves to .* \(removed 127\.0\.0\.1:8003\)$/)
  t.same(Object.keys(shown()).sort(), ['127.0.0.1:8001', '127.0.0.1:8002', '127.0.0.1:8004', '[::1]:8002'],
    'a target that timed out keeps its backends; one with no address has none')

  // An operator's weight stays while the record says the same; a new record weight wins.
  const b = upstream.members.find('127.0.0.1:8002')
  upstream.setWeight(b, 50)
  const asked = dns.calls.srv
  await until(() => dns.calls.srv > asked + 2, 'a few more resolutions')
  t.equal(b.weight, 50, 'the operator\'s weight is kept')
  records.set(NAME, records.get(NAME).map(r => r.name === 'b.test.' ? { ...r, weight: 8 } : r))
  await waitFor(/\(127\.0\.0\.1:8002 weight 7 -> 8, \[::1\]:8002 weight 7 -> 8\)$/)
  t.equal(b.weight, 8)

  // A reload that changes the spec keeps the weights the records give.
  const { upstreamConfig } = require('./fixtures/helpers')
  const changes = upstream.update(upstreamConfig({ ...config, backends: [parseBackend(`${NAME},max-conn=3`)] }))
  t.same(changes, [`backend ${NAME}: max-conn 9 -> 3`])
  t.same(shown()['127.0.0.1:8002'], [8, false, 3, 'b.test'])
  t.same(shown()['127.0.0.1:8001'], [1, false, 3, 'a.test'])

  // No target resolvable at all: nothing is known, the set stays.
  for (const name of ['a.test', 'b.test', 'c.test']) addresses.set(name, dnsError('ESERVFAIL'))
  records.set(NAME, records.get(NAME).filter(r => r.name !== '127.0.0.1'))
  await waitFor(/^cannot resolve _app\._tcp\.lila\.test: DNS server failure; keeping /)
  t.equal(upstream.backends.length, 4)

  // "." alone: the service is decidedly not there.
  records.set(NAME, [{ name: '.', port: 0, priority: 0, weight: 0 }])
  await waitFor(/^cannot resolve _app\._tcp\.lila\.test: no SRV target \(the service is not available\); keeping /)
})

t.test('SRV names on the command line: usage errors', async t => {
  const { parseCommandLine } = require('../lib/config/argv')
  t.same(parseCommandLine([NAME, '--port', '0']).config.listeners[0].backends[0].srv, NAME, 'an SRV name is a backend, not a mode')
  t.same(parseCommandLine(['rr', `${NAME},backup`]).config.listeners[0].backends[0].backup, true)
  t.throws(() => parseCommandLine([`${NAME},weight=2`]), {
    message: `invalid backend setting "weight=2" in "${NAME},weight=2": an SRV backend's weights come from its records; expected max-conn=N, slow-start=DUR or backup`
  })
  t.throws(() => parseCommandLine([`${NAME}:80`]), {
    message: `invalid backend "${NAME}:80": expected an SRV name without a port: its records give each target's port`
  })
  t.throws(() => parseCommandLine([NAME, NAME]), { message: `duplicate backend "${NAME}": expected each backend once (use weight=N to send it more)` })
})
