'use strict'

// The exchange's two interfaces (lib/proxy/http/exchange.js CLIENT_SESSION, LEG): every
// client session and every leg lila makes provides them, and the exchange has what
// they call. Each kind is caught at work, in a real balancer between real clients
// (HTTP/1.1, HTTP/2 by prior knowledge and over TLS) and real backends (HTTP/1.1,
// HTTP/2) that hold their answer until the test has looked.

const t = require('tap')
const net = require('net')
const http2 = require('http2')
const { createBalancer } = require('../lib/index')
const { parseCommandLine } = require('../lib/config/argv')
const { Exchange } = require('../lib/proxy/http/exchange')
const { CLIENT_SESSION, LEG, LEG_REPORTS, SESSION_REPORTS } = require('../lib/proxy/http/interfaces')
const { httpBackend, captureLog, within, until } = require('./fixtures/helpers')
const { h2Backend } = require('./fixtures/h2')
const { certDir, makeCertificate } = require('./fixtures/certs')

// What `object` lacks of `spec` ({ methods, properties }), in words.
function lacking (object, spec) {
  const missing = spec.methods.filter(name => typeof object[name] !== 'function').map(name => `${name}()`)
  return missing.concat(spec.properties.filter(name => !(name in object) || object[name] === undefined))
}

t.test('the lists are frozen, and the exchange has what sessions and legs call', async t => {
  t.ok(CLIENT_SESSION.methods.length > 10 && LEG.methods.length > 5, 'the lists are there')
  t.ok(Object.isFrozen(CLIENT_SESSION.methods) && Object.isFrozen(LEG.properties), 'and frozen')
  t.same([...LEG_REPORTS, ...SESSION_REPORTS].filter(name => typeof Exchange.prototype[name] !== 'function'), [],
    'every report a leg or a session makes is a method of Exchange')
  t.same(lacking({ start () {}, connected: false }, LEG), ['write()', 'end()', 'pause()', 'resume()', 'abandon()',
    'again()', 'renew()', 'onSweep()', 'holdsBody()', 'gotBytes'], 'a leg short of its interface is caught')
})

// A balancer of one listener before `backend`, its requests held by the backend until
// `release()`: the session and leg of each request are looked at while it waits.
async function balancer (t, backend, more) {
  const { log } = captureLog('warn')
  const { config } = parseCommandLine(['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--check', 'none', ...more])
  const lb = createBalancer(config, { log })
  const [address] = await lb.listen()
  t.teardown(() => lb.close(0))
  return { listener: lb.listeners[0], port: Number(address.split(':').pop()) }
}

// The exchanges the listener's sessions serve now (HTTP/1.1: one, HTTP/2: a set).
function exchangesOf (listener) {
  const out = []
  for (const session of listener.sessions) {
    if (session.exchange) out.push(session.exchange)
    if (session.exchanges) out.push(...session.exchanges)
  }
  return out
}

t.test('each session and each leg implements its interface', async t => {
  const { cert, key, pem } = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const held = []
  const release = () => { for (const answer of held.splice(0)) answer() }
  const h1 = await httpBackend(t, 'h1', (req, res) => held.push(() => res.end('ok\n')))
  const h2 = await h2Backend(t, 'h2', stream => held.push(() => {
    stream.respond({ ':status': 200 })
    stream.end('ok\n')
  }))
  const seen = new Set()
  for (const [backend, more] of [[h1, []], [h2, ['--backend-protocol', 'h2']]]) {
    const plain = await balancer(t, backend, more)
    const secure = await balancer(t, backend, [...more, '--tls-cert', cert, '--tls-key', key])
    const clients = {
      'HTTP/1.1': () => {
        const socket = net.connect(plain.port, '127.0.0.1')
        socket.on('error', () => {})
        socket.resume() // the answer read and dropped, so that the close comes
        socket.end('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
        return { listener: plain.listener, done: new Promise(resolve => socket.on('close', resolve)) }
      },
      'HTTP/2 in the clear': () => h2Get(`http://127.0.0.1:${plain.port}`, {}, plain.listener),
      'HTTP/2 over TLS': () => h2Get(`https://127.0.0.1:${secure.port}`, { ca: pem, servername: 'localhost' }, secure.listener)
    }
    for (const [name, open] of Object.entries(clients)) {
      const before = backend.requests
      const { listener, done } = open()
      await until(() => backend.requests > before && exchangesOf(listener).some(x => x.leg !== null),
        `the ${name} request to reach the ${backend.name} backend`)
      const x = exchangesOf(listener).find(x => x.leg !== null)
      const session = x.client
      const leg = x.leg
      seen.add(session.constructor.name).add(leg.constructor.name)
      t.same(lacking(session, CLIENT_SESSION), [], `${name} client: ${session.constructor.name}`)
      t.same(lacking(leg, LEG), [], `to the ${backend.name} backend: ${leg.constructor.name}`)
      release()
      await within(5000, `the ${name} request to finish`, done)
    }
  }
  t.same([...seen].sort(), ['Http1Leg', 'Http2Leg', 'Http2Session', 'HttpSession'], 'every session and leg kind met')
})

function h2Get (url, options, listener) {
  const session = http2.connect(url, options)
  session.on('error', () => {})
  const stream = session.request({ ':path': '/' })
  stream.on('error', () => {})
  stream.resume()
  const done = new Promise(resolve => stream.on('close', resolve)).then(() => session.close())
  return { listener, done }
}
