'use strict'

// --fleet under keep-alive load through two lilas: Redis killed and started again, then
// a master failed over by Sentinel (a master, a replica, three sentinels): no request
// fails, and the lilas follow the new master.

const t = require('tap')
const http = require('http')
const { redisServer, redisSentinel, MISSING, SENTINEL_MISSING, spawnMember, get } = require('./fixtures/redis')
const { httpBackend, statusJson, until } = require('./fixtures/helpers')
const { RedisClient } = require('../lib/fleet/redis')

// Keep-alive requests through each lila, `concurrency` at a time each, until stop():
// -> { ok, failed: [why] }.
function load (lilas, concurrency = 4) {
  const result = { ok: 0, failed: [], going: true }
  const agents = lilas.map(() => new http.Agent({ keepAlive: true, maxSockets: concurrency }))
  const loops = []
  for (const [i, lila] of lilas.entries()) {
    for (let n = 0; n < concurrency; n++) {
      loops.push((async () => {
        for (let k = 0; result.going && k < 1e6; k++) {
          const { status, error } = await get(lila, agents[i])
          if (status === 200) result.ok++
          else result.failed.push(error ? error.message : status)
        }
      })())
    }
  }
  result.stop = async () => {
    result.going = false
    await Promise.all(loops)
    for (const agent of agents) agent.destroy()
    return result
  }
  return result
}

// Every request decided by Redis: a rate no test reaches.
const memberArgs = (backend, url) => ['rr', backend.address, '--protocol', 'http', '--rate-limit', '1000000/s', '--fleet', url]

t.test('Redis killed and started again under load: no request fails', { skip: MISSING }, async t => {
  const redis = await redisServer(t)
  const backend = await httpBackend(t, 'app')
  const url = `redis://127.0.0.1:${redis.port}`
  const lilas = [await spawnMember(t, 2, memberArgs(backend, url)), await spawnMember(t, 3, memberArgs(backend, url))]
  await Promise.all(lilas.map(lila => lila.waitForLine(/fleet: "default" on Redis/)))
  const running = load(lilas)
  await until(() => running.ok > 200, 'some requests through')
  await redis.stop()
  await Promise.all(lilas.map(lila => lila.waitForLine(/fleet: Redis at .* unavailable/)))
  const during = running.ok
  await until(() => running.ok > during + 200, 'requests while Redis is down')
  await redis.start()
  await Promise.all(lilas.map(lila => lila.waitForLine(/fleet: Redis at .* is back: /)))
  const after = running.ok
  await until(() => running.ok > after + 200, 'requests once it is back')
  const { ok, failed } = await running.stop()
  t.same(failed, [], `no request failed (${ok} served)`)
  for (const lila of lilas) {
    const { fleet } = await statusJson(lila)
    t.ok(fleet.up && fleet.limits.decided > 0, `decided by Redis again (${JSON.stringify({ up: fleet.up, limits: fleet.limits })})`)
  }
})

// SENTINEL's answer about a master's replicas, from one sentinel.
async function sentinelSays (t, port, args) {
  const client = new RedisClient({ scheme: 'redis', hosts: [{ host: '127.0.0.1', port }], username: null, password: null, db: 0, tls: false }, {})
  client.start()
  t.teardown(() => client.close())
  await until(() => client.up, 'a connection to the sentinel')
  return client.command(args)
}

t.test('a Sentinel failover under load: no request fails, the lilas follow the new master', { skip: MISSING || SENTINEL_MISSING }, async t => {
  const master = await redisServer(t)
  const replica = await redisServer(t, { args: ['--replicaof', '127.0.0.1', String(master.port)] })
  await replica.proc.watch(/MASTER <-> REPLICA sync: Finished with success/)
  const sentinels = []
  for (let i = 0; i < 3; i++) sentinels.push(await redisSentinel(t, master.port))
  // Each sentinel knows the replica (from the master's INFO) and the other sentinels.
  for (const sentinel of sentinels) {
    await until(async () => {
      const [replicas, others] = await Promise.all([
        sentinelSays(t, sentinel.port, ['SENTINEL', 'REPLICAS', 'mymaster']),
        sentinelSays(t, sentinel.port, ['SENTINEL', 'SENTINELS', 'mymaster'])
      ])
      return replicas.length === 1 && others.length === 2
    }, 'the sentinels to know the replica and each other', { timeout: 30000, every: 200 })
  }
  const backend = await httpBackend(t, 'app')
  const url = `redis-sentinel://${sentinels.map(s => `127.0.0.1:${s.port}`).join(',')}/mymaster`
  const lilas = [await spawnMember(t, 2, memberArgs(backend, url)), await spawnMember(t, 3, memberArgs(backend, url))]
  await Promise.all(lilas.map(lila => lila.waitForLine(/fleet: "default" on Redis/)))
  for (const lila of lilas) t.equal((await statusJson(lila)).fleet.master, `127.0.0.1:${master.port}`, 'on the master')

  const running = load(lilas)
  await until(() => running.ok > 200, 'some requests through')
  await master.stop()
  const newMaster = new RegExp(`fleet: Redis at .* \\(master 127\\.0\\.0\\.1:${replica.port}\\) is back: `)
  await Promise.all(lilas.map(lila => lila.waitForLine(newMaster, { timeout: 60000 })))
  const after = running.ok
  await until(() => running.ok > after + 200, 'requests once the replica is master')
  const { ok, failed } = await running.stop()
  t.same(failed, [], `no request failed (${ok} served)`)
  for (const lila of lilas) {
    const { fleet } = await statusJson(lila)
    t.equal(fleet.master, `127.0.0.1:${replica.port}`, 'the lila follows the new master')
    t.ok(fleet.up)
  }
})
