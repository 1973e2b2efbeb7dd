'use strict'

// lila's own RESP client (lib/wire/resp.js, lib/fleet/redis.js) against the real
// redis-server: pipelining, errors, reconnects, pub/sub, AUTH with an ACL user, a
// database number, TLS.

const t = require('tap')
const { encodeCommand, ReplyParser, ReplyError } = require('../lib/wire/resp')
const { RedisClient } = require('../lib/fleet/redis')
const { parseFleetUrl } = require('../lib/config/fleet-url')
const { redisServer, MISSING } = require('./fixtures/redis')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { within } = require('./fixtures/helpers')

t.test('RESP: commands encoded, replies parsed in pieces of any size', async t => {
  t.equal(encodeCommand(['SET', 'k', 'é', 12]).toString(), '*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\né\r\n$2\r\n12\r\n')
  const wire = '+OK\r\n-ERR wrong\r\n:42\r\n$5\r\nhé\r\n\r\n$-1\r\n*3\r\n:1\r\n*2\r\n$1\r\na\r\n$0\r\n\r\n*-1\r\n*0\r\n'
  const bytes = Buffer.from(wire)
  for (const size of [1, 2, 3, 7, bytes.length]) {
    const replies = []
    const parser = new ReplyParser(reply => replies.push(reply))
    for (let i = 0; i < bytes.length; i += size) parser.feed(bytes.subarray(i, i + size))
    t.equal(replies.length, 7, `pieces of ${size}`)
    t.equal(replies[0], 'OK')
    t.ok(replies[1] instanceof ReplyError)
    t.equal(replies[1].prefix, 'ERR')
    t.equal(replies[2], 42)
    t.equal(replies[3], 'hé\r\n')
    t.equal(replies[4], null)
    t.same(replies[5], [1, ['a', ''], null])
    t.same(replies[6], [])
  }
  const parser = new ReplyParser(() => {})
  t.throws(() => parser.feed(Buffer.from('?what\r\n')), { name: 'ProtocolError' })
  t.throws(() => new ReplyParser(() => {}).feed(Buffer.from('$3\r\nabcd\r\n')), { name: 'ProtocolError' })
  t.throws(() => new ReplyParser(() => {}).feed(Buffer.from(':1x\r\n')), { name: 'ProtocolError' })
})

// A client of the URL, started; resolves once it is up. Its ups and downs are kept.
function connect (t, url, options = {}) {
  const events = { ups: 0, downs: [], waiters: [] }
  const notify = () => { for (const w of events.waiters.splice(0)) w() }
  const client = new RedisClient({ ...parseFleetUrl(url), ...options }, {
    onUp: () => { events.ups++; notify() },
    onDown: reason => { events.downs.push(reason); notify() },
    onMessage: options.onMessage,
    channels: options.channels || null
  })
  client.events = events
  client.next = (check, what) => within(10000, what, new Promise(resolve => {
    const look = () => check() ? resolve() : events.waiters.push(look)
    look()
  }))
  t.teardown(() => client.close())
  client.start()
  return client
}

t.test('against redis-server', { skip: MISSING }, async t => {
  const redis = await redisServer(t)
  const url = `redis://127.0.0.1:${redis.port}`

  t.test('pipelined: a thousand commands in one turn, answered in order', async t => {
    const client = connect(t, url)
    await client.next(() => client.up, 'up')
    await client.command(['DEL', 'counter'])
    const replies = await Promise.all(Array.from({ length: 1000 }, () => client.command(['INCR', 'counter'])))
    t.same(replies, Array.from({ length: 1000 }, (_, i) => i + 1))
    await t.rejects(client.command(['HGET', 'counter', 'x']), { name: 'ReplyError' }, 'Redis saying no rejects that command')
    t.equal(await client.command(['GET', 'counter']), '1000', 'and the next goes on')
    const before = client.snapshot()
    t.ok(before.roundTrips >= 1003)
    t.ok(before.errors >= 1)
  })

  t.test('down: commands fail at once; restarted: connected again, said once each', async t => {
    const client = connect(t, url)
    await client.next(() => client.up, 'up')
    await redis.stop()
    await client.next(() => client.events.downs.length > 0, 'down')
    await t.rejects(client.command(['PING']), { name: 'Unavailable' })
    await redis.start()
    await client.next(() => client.events.ups === 2, 'up again')
    t.equal(await client.command(['PING']), 'PONG')
  })

  t.test('pub/sub on a connection of its own', async t => {
    let heard
    const message = new Promise(resolve => { heard = resolve })
    const subscriber = connect(t, url, { channels: ['a', 'b'], onMessage: (channel, text) => heard([channel, text]) })
    const client = connect(t, url)
    await subscriber.next(() => subscriber.up, 'subscribed')
    await client.next(() => client.up, 'up')
    t.equal(await client.command(['PUBLISH', 'b', 'hello']), 1, 'one subscriber heard it')
    t.same(await within(5000, 'the message', message), ['b', 'hello'])
  })

  t.test('a database number: SELECT', async t => {
    const two = connect(t, `${url}/2`)
    const zero = connect(t, url)
    await two.next(() => two.up, 'up')
    await zero.next(() => zero.up, 'up')
    await two.command(['SET', 'where', 'two'])
    t.equal(await zero.command(['GET', 'where']), null)
    t.equal(await two.command(['GET', 'where']), 'two')
  })
})

t.test('AUTH with an ACL user; a wrong password said without it', { skip: MISSING }, async t => {
  const redis = await redisServer(t, {
    args: ['--user', 'default', 'off', '--user', 'lila', 'on', '>s3cret-pass', '~*', '&*', '+@all']
  })
  const good = connect(t, `redis://lila:s3cret-pass@127.0.0.1:${redis.port}`)
  await good.next(() => good.up, 'up')
  t.equal(await good.command(['SET', 'k', 'v']), 'OK')
  const bad = connect(t, `redis://lila:wrong-pass@127.0.0.1:${redis.port}`)
  await bad.next(() => bad.events.downs.length > 0, 'refused')
  t.match(bad.events.downs[0], /WRONGPASS/)
  t.notMatch(bad.events.downs[0], /wrong-pass|s3cret/)
  t.notOk(bad.up)
})

t.test('TLS: rediss:// with the CA that signed Redis', { skip: MISSING }, async t => {
  const dir = certDir(t)
  const { cert, key, pem: ca } = makeCertificate(dir, 'redis', ['IP:127.0.0.1'])
  const redis = await redisServer(t, { tls: { cert, key } })
  const client = connect(t, `rediss://127.0.0.1:${redis.port}`, { ca })
  await client.next(() => client.up, 'up')
  t.equal(await client.command(['PING']), 'PONG')
  const untrusting = connect(t, `rediss://127.0.0.1:${redis.port}`)
  await untrusting.next(() => untrusting.events.downs.length > 0, 'refused')
  t.match(untrusting.events.downs[0], /certificate/)
})

t.test('--fleet from the command line, the config file and LILA_FLEET: the URL read, its password never said', async t => {
  const { parseCommandLine } = require('../lib/config/argv')
  const { parseConfigFile } = require('../lib/config/file')
  const { config } = parseCommandLine([':8080', '--fleet', 'redis-sentinel://lila:p%40ss@a:26380,[::1]/shop/2', '--fleet-name', 'x'])
  t.match(config.fleet, { name: 'x', ca: null, key: null })
  t.match(config.fleet.target, {
    scheme: 'redis-sentinel',
    username: 'lila',
    password: 'p@ss',
    db: 2,
    master: 'shop',
    tls: false,
    hosts: [{ host: 'a', port: 26380 }, { host: '::1', port: 26379 }],
    display: 'redis-sentinel://lila:***@a:26380,[::1]/shop/2'
  })
  t.equal(parseCommandLine([':8080', '--fleet', 'redis://h']).config.fleet.target.hosts[0].port, 6379)
  t.equal(parseCommandLine([':8080']).config.fleet, null)
  const file = parseConfigFile('{ "fleet": "rediss://:pw@h:6380", "fleet-name": "shop", "listeners": [{ "backends": [":8080"] }] }', 'lila.json')
  t.match(file.fleet, { name: 'shop', target: { tls: true, password: 'pw', display: 'rediss://:***@h:6380' } })
  t.throws(() => parseConfigFile('{ "fleet": "redis://u:secret@h/x", "listeners": [{ "backends": [":8080"] }] }', 'lila.json'),
    { message: /^lila\.json: fleet: invalid URL "redis:\/\/u:\*\*\*@h\/x": a database number "x"/ })
  const env = parseCommandLine([':8080'], { LILA_FLEET: 'redis://h:7000' }).config.fleet
  t.equal(env.target.hosts[0].port, 7000)
  t.throws(() => parseCommandLine([':8080'], { LILA_FLEET: 'redis://:secret@h:0' }),
    {
      message: 'invalid LILA_FLEET URL "redis://:***@h:0": a port "0", where 1 to 65535 goes; expected ' +
      'redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... (TLS) or redis-sentinel://HOST[:PORT],.../MASTER[/DB]'
    })
})
