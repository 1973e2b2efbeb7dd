'use strict'

// The PROXY protocol: the pure format/parse functions against the spec's examples, then
// the real executable sending headers (byte-exact, as a raw backend reads them) and
// reading them (--accept-proxy) in tcp and http mode.

const t = require('tap')
const net = require('net')
const { formatProxyHeader, parseProxyHeader, V2_SIGNATURE } = require('../lib/wire/proxy-protocol')
const { tcpBackend, httpBackend, deadPort, spawnLila, within } = require('./fixtures/helpers')

const v2 = (...bytes) => Buffer.concat([V2_SIGNATURE, Buffer.from(bytes.flat())])
const ends = (source, sport, destination, dport) => ({
  source: { address: source, port: sport },
  destination: { address: destination, port: dport }
})

t.test('v1: the spec\'s examples', async t => {
  const tcp4 = 'PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n'
  t.same(parseProxyHeader(Buffer.from(tcp4 + 'GET /')), { length: 56, version: 1, local: false, ...ends('255.255.255.255', 65535, '255.255.255.255', 65535) }, 'the longest TCP4 line')
  const f = 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'
  const tcp6 = `PROXY TCP6 ${f} ${f} 65535 65535\r\n`
  t.equal(tcp6.length, 104)
  t.same(parseProxyHeader(Buffer.from(tcp6)), { length: 104, version: 1, local: false, ...ends(f, 65535, f, 65535) }, 'the longest TCP6 line')
  t.same(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n')), { length: 15, version: 1, local: true, source: null, destination: null })
  const unknown = `PROXY UNKNOWN ${f} ${f} 65535 65535\r\n`
  t.equal(unknown.length, 107, 'the longest line the spec allows')
  t.same(parseProxyHeader(Buffer.from(unknown)), {
    length: 107, version: 1, local: true, source: null, destination: null
  })
  t.same(parseProxyHeader(Buffer.from('PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n')), { length: 47, version: 1, local: false, ...ends('192.168.0.1', 56324, '192.168.0.11', 443) })
})

t.test('v1: formatting', async t => {
  t.equal(formatProxyHeader('v1', ends('192.168.0.1', 56324, '192.168.0.11', 443)).toString(), 'PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n')
  t.equal(formatProxyHeader('v1', ends('2001:db8::1', 1, '2001:db8::2', 2)).toString(), 'PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n')
  t.equal(formatProxyHeader('v1', ends('10.0.0.1', 1, '2001:db8::2', 2)).toString(), 'PROXY TCP6 ::ffff:10.0.0.1 2001:db8::2 1 2\r\n', 'one family: IPv4 mapped to IPv6')
  t.equal(formatProxyHeader('v1', { source: null, destination: null }).toString(), 'PROXY UNKNOWN\r\n')
})

t.test('v2: formatting and parsing, byte for byte', async t => {
  const ipv4 = formatProxyHeader('v2', ends('192.168.0.1', 56324, '192.168.0.11', 443))
  t.same(ipv4, v2(0x21, 0x11, 0x00, 0x0c, [192, 168, 0, 1], [192, 168, 0, 11], [0xdc, 0x04], [0x01, 0xbb]))
  t.same(parseProxyHeader(ipv4), { length: 28, version: 2, local: false, ...ends('192.168.0.1', 56324, '192.168.0.11', 443) })

  const ipv6 = formatProxyHeader('v2', ends('2001:db8::1', 80, '::1', 8080))
  const ipv6Source = [0x20, 0x01, 0x0d, 0xb8, ...new Array(11).fill(0), 1] // 2001:db8::1
  const ipv6Destination = [...new Array(15).fill(0), 1] // ::1
  t.same(ipv6, v2(0x21, 0x21, 0x00, 0x24, ipv6Source, ipv6Destination, [0, 80], [0x1f, 0x90]))
  t.same(parseProxyHeader(ipv6), { length: 52, version: 2, local: false, ...ends('2001:db8::1', 80, '::1', 8080) })

  const local = formatProxyHeader('v2', { source: null, destination: null })
  t.same(local, v2(0x20, 0x00, 0x00, 0x00), 'LOCAL, no address')
  t.same(parseProxyHeader(local), { length: 16, version: 2, local: true, source: null, destination: null })

  // TLVs after the addresses are skipped; what follows the header is left alone.
  const withTlv = Buffer.concat([v2(0x21, 0x11, 0x00, 0x11, [10, 0, 0, 1], [10, 0, 0, 2], [0, 1], [0, 2], [0x04, 0x00, 0x02, 0xab, 0xcd]), Buffer.from('GET')])
  t.same(parseProxyHeader(withTlv), { length: 33, version: 2, local: false, ...ends('10.0.0.1', 1, '10.0.0.2', 2) })
  t.same(parseProxyHeader(v2(0x21, 0x31, 0x00, 0x00)), { length: 16, version: 2, local: true, source: null, destination: null }, 'unix sockets: no address to use')
  t.same(parseProxyHeader(v2(0x21, 0x12, 0x00, 0x0c, new Array(12).fill(1))).local, true, 'UDP: no address to use')
})

t.test('a header arriving in pieces: every prefix asks for more', async t => {
  const headers = [
    Buffer.from('PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n'),
    formatProxyHeader('v2', ends('2001:db8::1', 80, '::1', 8080))
  ]
  for (const header of headers) {
    for (let n = 0; n < header.length; n++) t.equal(parseProxyHeader(header.subarray(0, n)), null, `${n} of ${header.length} bytes`)
    t.equal(parseProxyHeader(header).length, header.length)
  }
})

t.test('malformed headers are refused', async t => {
  const refused = [
    [Buffer.from('GET / HTTP/1.1\r\n'), /no PROXY protocol header/],
    [Buffer.from('\x16\x03\x01'), /no PROXY protocol header/], // a TLS ClientHello
    [Buffer.from(`PROXY TCP4 ${'1'.repeat(120)}`), /longer than 107 bytes/],
    [Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n'), /without CRLF/],
    [Buffer.from('PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n'), /expected PROXY TCP4\|TCP6/],
    [Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n'), /expected PROXY TCP4\|TCP6/],
    [Buffer.from('PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n'), /expected PROXY TCP4\|TCP6/],
    [Buffer.from('PROXY TCP4 ::1 5.6.7.8 1 2\r\n'), /expected TCP4 addresses/],
    [Buffer.from('PROXY TCP6 1.2.3.4 ::1 1 2\r\n'), /expected TCP6 addresses/],
    [Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n'), /expected ports/],
    [Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n'), /expected ports/],
    [v2(0x11, 0x11, 0x00, 0x0c, new Array(12).fill(0)), /version 1: expected 2/],
    [v2(0x22, 0x11, 0x00, 0x0c, new Array(12).fill(0)), /command 2/],
    [v2(0x21, 0x11, 0x00, 0x04, [1, 2, 3, 4]), /too short for IPv4/],
    [v2(0x21, 0x21, 0x00, 0x0c, new Array(12).fill(0)), /too short for IPv6/]
  ]
  for (const [buf, message] of refused) {
    t.throws(() => parseProxyHeader(buf), { name: 'ProxyHeaderError', message }, JSON.stringify(buf.toString('latin1')))
  }
})

// ---- end to end ----

const base = ['--host', '127.0.0.1', '--port', '0', '--check', 'none']

// A raw backend that keeps every byte of each connection (until the client's FIN).
async function recordingBackend (t, name) {
  const received = []
  const backend = await tcpBackend(t, name, socket => {
    const chunks = []
    socket.on('data', chunk => chunks.push(chunk))
    socket.on('end', () => {
      received.push(Buffer.concat(chunks))
      socket.end('bye\n')
    })
  })
  backend.received = received
  return backend
}

// Connect, send `data`, half-close; resolves with the client's own port and what came back.
function send (port, data) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
    const chunks = []
    socket.on('error', reject)
    socket.on('connect', () => {
      const localPort = socket.localPort
      socket.end(data)
      socket.on('data', chunk => chunks.push(chunk))
      socket.on('close', () => resolve({ localPort, reply: Buffer.concat(chunks).toString() }))
    })
  })
}

t.test('--proxy-protocol v1 and v2: the backend reads the header, then the client\'s bytes', async t => {
  for (const version of ['v1', 'v2']) {
    const backend = await recordingBackend(t, version)
    const lila = await spawnLila(t, ['rr', backend.address, ...base, '--proxy-protocol', version])
    const { localPort, reply } = await send(lila.port, 'hello')
    t.equal(reply, 'bye\n')
    const header = formatProxyHeader(version, ends('127.0.0.1', localPort, '127.0.0.1', lila.port))
    t.same(backend.received, [Buffer.concat([header, Buffer.from('hello')])], `${version}: byte-exact`)
    if (version === 'v1') t.equal(header.toString(), `PROXY TCP4 127.0.0.1 127.0.0.1 ${localPort} ${lila.port}\r\n`)
    await lila.stop()
  }
})

t.test('--proxy-protocol with failover: the backend that answers reads one header, then the held bytes', async t => {
  const backend = await recordingBackend(t, 'good')
  const dead = await deadPort()
  const lila = await spawnLila(t, ['rr', `127.0.0.1:${dead}`, backend.address, ...base, '--proxy-protocol', 'v1'])
  for (let i = 0; i < 4; i++) {
    const { localPort } = await send(lila.port, `early ${i}`)
    t.same(backend.received[i].toString(), `PROXY TCP4 127.0.0.1 127.0.0.1 ${localPort} ${lila.port}\r\nearly ${i}`)
  }
  t.equal(backend.received.length, 4)
})

t.test('--accept-proxy (tcp): the address from the header goes on, to the backend\'s header and the log', async t => {
  const backend = await recordingBackend(t, 'b')
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--accept-proxy', '--proxy-protocol', 'v2', '--log-level', 'debug'])
  const header = formatProxyHeader('v1', ends('203.0.113.7', 5555, '198.51.100.1', 443))
  await send(lila.port, Buffer.concat([header, Buffer.from('payload')]))
  t.same(backend.received, [Buffer.concat([formatProxyHeader('v2', ends('203.0.113.7', 5555, '198.51.100.1', 443)), Buffer.from('payload')])], 'v1 in, v2 out, same addresses')
  await lila.waitForLine(/203\.0\.113\.7 -> 127\.0\.0\.1:\d+: closed/)

  // A LOCAL header (the balancer's own health check): the connection's own address.
  const { localPort } = await send(lila.port, Buffer.concat([formatProxyHeader('v2', { source: null, destination: null }), Buffer.from('x')]))
  t.same(backend.received[1], Buffer.concat([formatProxyHeader('v2', ends('127.0.0.1', localPort, '127.0.0.1', lila.port)), Buffer.from('x')]))
})

t.test('--accept-proxy: ip-hash keys on the address from the header', async t => {
  const backends = await Promise.all(['a', 'b'].map(name => tcpBackend(t, name)))
  const lila = await spawnLila(t, ['ip-hash', ...backends.map(b => b.address), ...base, '--accept-proxy'])
  const served = new Map()
  for (let i = 0; i < 24; i++) {
    const client = `203.0.113.${i % 8}`
    const { reply } = await send(lila.port, formatProxyHeader('v1', ends(client, 1000 + i, '198.51.100.1', 443)))
    if (!served.has(client)) served.set(client, new Set())
    served.get(client).add(reply.trim())
  }
  t.ok([...served.values()].every(set => set.size === 1), 'each address sticks to one backend')
  t.same(new Set([...served.values()].map(set => [...set][0])), new Set(['a', 'b']), 'the addresses spread over both (all connections come from 127.0.0.1)')
})

t.test('--accept-proxy (http): X-Forwarded-For is the address from the header', async t => {
  const backend = await httpBackend(t, 'h', (req, res) => res.end(`${req.headers['x-forwarded-for']}\n`))
  const lila = await spawnLila(t, ['rr', backend.address, ...base, '--protocol', 'http', '--accept-proxy', '--header-timeout', '300ms', '--log-level', 'debug'])
  const request = 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
  for (const version of ['v1', 'v2']) {
    const header = formatProxyHeader(version, ends('2001:db8::7', 5555, '2001:db8::1', 443))
    const { reply } = await send(lila.port, Buffer.concat([header, Buffer.from(request)]))
    t.match(reply, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n2001:db8::7\n$/, version)
  }
  // The header and the request in separate writes (pieces: see the unit tests above).
  const socket = net.connect({ port: lila.port, host: '127.0.0.1', noDelay: true })
  const got = []
  socket.on('data', chunk => got.push(chunk))
  socket.write(formatProxyHeader('v1', ends('192.0.2.9', 1, '192.0.2.1', 2)), () => socket.end(request))
  await within(5000, 'the response', new Promise(resolve => socket.on('close', resolve)))
  t.match(Buffer.concat(got).toString(), /\r\n\r\n192\.0\.2\.9\n$/)

  // No header, a malformed one, or none in time: closed, and nothing reaches the backend.
  const before = backend.requests
  for (const bad of [request, 'PROXY TCP4 1.2.3.4\r\n' + request, formatProxyHeader('v2', ends('1.2.3.4', 1, '5.6.7.8', 2)).subarray(0, 20)]) {
    const { reply } = await send(lila.port, bad)
    t.equal(reply, '', `refused: ${JSON.stringify(bad.toString().slice(0, 20))}`)
  }
  const silent = net.connect({ port: lila.port, host: '127.0.0.1' })
  silent.on('error', () => {})
  await within(5000, 'a silent client to be closed after --header-timeout', new Promise(resolve => silent.on('close', resolve)))
  await lila.waitForLine(/closed: no PROXY protocol header in time/)
  t.equal(backend.requests, before, 'nothing reached the backend')
})
