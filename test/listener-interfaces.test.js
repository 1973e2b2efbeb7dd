'use strict'

// The listener's two interfaces (lib/proxy/listener-interfaces.js PROTOCOL, SESSION):
// the protocol object of a tcp and of an http listener, as a balancer makes them, and
// every session class lila has provide them; the listener calls nothing else.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { createBalancer } = require('../lib/index')
const { parseCommandLine } = require('../lib/config/argv')
const { PROTOCOL, SESSION } = require('../lib/proxy/listener-interfaces')
const { TcpSession } = require('../lib/proxy/tcp')
const { HttpSession } = require('../lib/proxy/http1/session')
const { Http2Session } = require('../lib/proxy/http2/session')
const { captureLog } = require('./fixtures/helpers')

// What `object` lacks of `spec` ({ methods, properties }), in words.
function lacking (object, spec) {
  const missing = spec.methods.filter(name => typeof object[name] !== 'function').map(name => `${name}()`)
  return missing.concat(spec.properties.filter(name => !(name in object)))
}

t.test('the lists are frozen, and a protocol short of one is caught', async t => {
  t.ok(Object.isFrozen(PROTOCOL.methods) && Object.isFrozen(SESSION.methods), 'frozen')
  t.same(lacking({ name: 'x', newSession () {} }, PROTOCOL), ['reconfigure()', 'timeouts()', 'sweep()', 'drained()',
    'snapshot()', 'snapshotBackend()', 'alpn', 'limitsRequests'], 'what a half protocol lacks, said')
})

t.test('tcp and http listeners get protocols that implement PROTOCOL', async t => {
  for (const protocol of ['tcp', 'http']) {
    const { log } = captureLog('warn')
    const { config } = parseCommandLine(['rr', '127.0.0.1:1', '--protocol', protocol, '--host', '127.0.0.1',
      '--port', '0', '--check', 'none'])
    const lb = createBalancer(config, { log })
    await lb.listen()
    t.teardown(() => lb.close(0))
    const made = lb.listeners[0].protocol
    t.equal(made.name, protocol, `${protocol}: its name`)
    t.same(lacking(made, PROTOCOL), [], `${protocol}: nothing lacking`)
  }
})

t.test('every session class implements SESSION', async t => {
  for (const Session of [TcpSession, HttpSession, Http2Session]) {
    t.same(lacking(Session.prototype, SESSION), [], `${Session.name}: nothing lacking`)
  }
})

t.test('the listener calls nothing of a protocol or a session outside the lists', async t => {
  const source = fs.readFileSync(path.join(__dirname, '../lib/proxy/listener.js'), 'utf8')
  const used = new Set([...source.matchAll(/this\.protocol\.(\w+)/g)].map(m => m[1]))
  const listed = new Set([...PROTOCOL.methods, ...PROTOCOL.properties, 'rewrite'])
  t.same([...used].filter(name => !listed.has(name)), [], 'every protocol member used is listed (rewrite: http\'s, for --mirror)')
  const calls = new Set([...source.matchAll(/session\.(\w+)\(/g)].map(m => m[1]))
  t.same([...calls].filter(name => !SESSION.methods.includes(name)), [], 'every session method called is listed')
})
