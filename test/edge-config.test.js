'use strict'

// Rules at the edge as a user says them: the command line, the config file (a route's
// keys, relative files), LILA_ variables; and what is refused, by its JSON path.

const t = require('tap')
const { parseCommandLine } = require('../lib/config/argv')
const { parseConfigFile } = require('../lib/config/file')
const { describeChanges } = require('../lib/config/changes')

const fileOf = doc => parseConfigFile(JSON.stringify(doc), '/etc/lila/lila.json')
const L = (listener, top = {}) => ({ ...top, listeners: [{ port: 8080, protocol: 'http', backends: [':9001'], ...listener }] })

t.test('a route\'s rules: the same from --route words and from the file\'s keys', async t => {
  const argv = parseCommandLine(['--protocol', 'http', '--port', '8080', ':9001', '--route',
    '/admin=strip allow=10.0.0.0/8,::1 deny=10.9.0.0/16 basic-auth=/etc/lila/admins rr :9002']).config
  const file = fileOf(L({
    routes: [{ match: '/admin', strip: true, allow: ['10.0.0.0/8', '::1'], deny: '10.9.0.0/16', 'basic-auth': 'admins', mode: 'rr', backends: [':9002'] }]
  }))
  t.same(file.listeners[0].routes, argv.listeners[0].routes, 'one shape, the file\'s relative file resolved against its folder')
  t.match(argv.listeners[0].routes[0], { name: '/admin', strip: true, allow: ['10.0.0.0/8', '::1/128'], deny: ['10.9.0.0/16'], basicAuth: '/etc/lila/admins' })
  t.equal(argv.listeners[0].routes[0].pool.mode, 'round-robin', 'the words before the mode are the route\'s settings')
  const plain = parseCommandLine(['--protocol', 'http', '--route', '/x=:9002']).config.listeners[0].routes[0]
  t.match(plain, { strip: false, allow: [], deny: [], basicAuth: null })
  const listenerRules = parseCommandLine(['--protocol', 'http', ':9001', '--allow', '10.0.0.0/8', '--route', '/x=:9002']).config.listeners[0]
  t.same(listenerRules.routes[0].allow, [], 'a route does not inherit the listener\'s lists: they are judged first, once')
})

t.test('the listener\'s rules: lists flat, defaults, relative files, the environment', async t => {
  const l = parseCommandLine(['--protocol', 'http', ':9001', '--allow', '10.0.0.0/8,192.168.1.7', '--allow', '::1', '--compress', 'br,gzip', '--trace']).config.listeners[0]
  t.same(l.allow, ['10.0.0.0/8', '192.168.1.7/32', '::1/128'])
  t.same(l.compress, ['br', 'gzip'])
  t.equal(l.trace, true)
  t.match(parseCommandLine(['--protocol', 'http', ':9001', '--compress']).config.listeners[0], { compress: ['gzip', 'br'] }, 'bare: gzip,br')
  t.match(parseCommandLine(['--protocol', 'http', ':9001']).config.listeners[0], { allow: [], deny: [], basicAuth: null, basicAuthRealm: 'lila', basicAuthPass: false, compress: null, trace: false })
  const file = fileOf(L({ 'basic-auth': 'users', compress: true }, { 'status-port': 0, 'status-basic-auth': 'admins' }))
  t.equal(file.listeners[0].basicAuth, '/etc/lila/users')
  t.same(file.listeners[0].compress, ['gzip', 'br'], '"compress": true is a bare --compress')
  t.equal(file.status.basicAuth, '/etc/lila/admins', 'the status listener\'s file too')
  const env = parseCommandLine(['--protocol', 'http', ':9001'], { LILA_DENY: '10.0.0.0/8\n127.0.0.2', LILA_TRACE: '1', LILA_COMPRESS: '1' }).config.listeners[0]
  t.same(env.deny, ['10.0.0.0/8', '127.0.0.2/32'], 'LILA_DENY: one list a line')
  t.equal(env.trace, true)
  t.same(env.compress, ['gzip', 'br'])
})

t.test('the file: what is refused, named by its JSON path', async t => {
  const bad = [
    [L({ allow: '10.1.2.3/8' }), 'listeners[0].allow: invalid network "10.1.2.3/8": expected the network\'s own address, its host bits zero: 10.0.0.0/8'],
    [L({ allow: [10] }), 'listeners[0].allow[0]: expected a string, got 10'],
    [L({ deny: ['10.0.0.0/8', 'x'] }), 'listeners[0].deny[1]: invalid network "x": expected an IP address or a network such as 10.0.0.0/8 or 2001:db8::/32'],
    [L({ compress: 'zstd' }), 'listeners[0].compress: invalid compression "zstd": expected gzip, br or both separated by a comma, e.g. gzip,br'],
    [L({ 'compress-types': 'text/*' }), 'listeners[0].compress-types: needs "compress": true'],
    [L({ trace: 'yes' }), 'listeners[0].trace: expected true or false, got "yes"'],
    [L({ protocol: 'tcp', 'basic-auth': 'u' }), 'listeners[0].basic-auth: needs "protocol": "http"'],
    [L({ routes: [{ match: 'api.example.com', strip: true, backends: [':9002'] }] }), 'listeners[0].routes[0].strip: route "api.example.com" has no path prefix to strip: expected a match such as api.example.com/api'],
    [L({ routes: [{ match: '/api', strip: 'yes', backends: [':9002'] }] }), 'listeners[0].routes[0].strip: expected true or false, got "yes"'],
    [L({ routes: [{ match: '/api', alow: ['10.0.0.0/8'], backends: [':9002'] }] }), 'listeners[0].routes[0].alow: unknown key "alow" in a route: did you mean "allow"?'],
    [L({ routes: [{ match: '/api', trace: true, backends: [':9002'] }] }), 'listeners[0].routes[0].trace: unknown key "trace" in a route: expected "match", "backends", "name", "mode", "strip", "allow", "deny", "basic-auth" or an option of the balancing and health groups'],
    [{ listeners: [{ host: 'unix:/run/lila.sock', backends: [':9001'], allow: ['10.0.0.0/8'] }] }, 'listeners[0].allow: does not apply to a Unix socket ("host": "unix:/run/lila.sock"): its clients have no address, expected "accept-proxy": true to read theirs'],
    [L({}, { 'status-port': 0, 'status-token': 'abcdefgh1', 'status-basic-auth': 'x' }), 'status-basic-auth: contradicts "status-token": expected one of them (both ride in the Authorization header; the file\'s users may make changes)'],
    [L({ 'status-basic-auth': 'x' }), 'listeners[0].status-basic-auth: applies to the whole process: expected it at the top level, not in a listener']
  ]
  for (const [doc, message] of bad) {
    t.throws(() => fileOf(doc), { name: 'UsageError', message: `/etc/lila/lila.json: ${message}` }, message.slice(0, 60))
  }
  t.ok(fileOf({ listeners: [{ host: 'unix:/run/lila.sock', 'accept-proxy': true, allow: ['10.0.0.0/8'], backends: [':9001'] }] }), 'with --accept-proxy a Unix socket\'s clients have addresses')
})

t.test('a reload says what changed in the rules', async t => {
  const before = fileOf(L({ deny: ['10.0.0.0/8'] }))
  const after = fileOf(L({ deny: ['10.0.0.0/8', '127.0.0.2'], compress: 'br', trace: true, 'basic-auth': 'users' }))
  t.same(describeChanges(before, after), [
    'http:8080: deny 10.0.0.0/8 -> 10.0.0.0/8, 127.0.0.2/32, basic-auth none -> /etc/lila/users, compress none -> br, trace false -> true'
  ])
})
