'use strict'

// The one attempt path on real sockets, the same table through a tcp and an http
// listener (in process): backends A, B, C that refuse, never answer the connect, or
// reset the connection before a byte, in round-robin order; then who served the
// client and which backends were blamed. (test/attempt.test.js plays the same path
// without sockets, with queues and ejection.)

const t = require('tap')
const { tcpBackend, httpBackend, deadPort, blackhole, exchange, request, startLila } = require('./fixtures/helpers')

// One backend of the table, as a "127.0.0.1:port" its part gives.
const PARTS = {
  ok: async (t, name, protocol) => (protocol === 'tcp' ? await tcpBackend(t, name) : await httpBackend(t, name)).address,
  refuse: async () => `127.0.0.1:${await deadPort()}`,
  hang: async t => `127.0.0.1:${await blackhole(t)}`, // the connect never completes
  reset: async (t, name) => (await tcpBackend(t, name, socket => socket.resetAndDestroy())).address
}

const CASES = [
  { parts: ['refuse', 'ok', 'ok'], served: 'B', blamed: ['A'] },
  { parts: ['hang', 'refuse', 'ok'], served: 'C', blamed: ['A', 'B'] },
  { parts: ['reset', 'ok'], served: 'B', blamed: ['A'] },
  { parts: ['refuse', 'refuse', 'refuse'], served: null, blamed: ['A', 'B', 'C'] },
  { parts: ['refuse', 'ok'], retries: 0, served: null, blamed: ['A'] },
  { parts: ['refuse', 'refuse', 'refuse', 'ok'], served: null, blamed: ['A', 'B', 'C'], why: '--retries 2: three tries' }
]

for (const protocol of ['tcp', 'http']) {
  for (const c of CASES) {
    const name = `${protocol}: ${c.parts.join(', ')}${c.retries === undefined ? '' : ` (--retries ${c.retries})`}`
    t.test(name, async t => {
      const names = c.parts.map((_, i) => String.fromCharCode(65 + i))
      const addresses = []
      for (let i = 0; i < c.parts.length; i++) addresses.push(await PARTS[c.parts[i]](t, names[i], protocol))
      const args = ['rr', ...addresses, '--protocol', protocol, '--connect-timeout', '300ms']
      if (c.retries !== undefined) args.push('--retries', String(c.retries))
      const { port, stats } = await startLila(t, args)

      let served
      if (protocol === 'tcp') {
        const { data } = await exchange(port)
        served = data === '' ? null : data.trim()
      } else {
        const res = await request(port)
        served = res.status === 200 ? res.body.toString().trim() : null
        if (served === null) t.equal(res.status, 502, 'the last failure is answered 502')
      }
      t.equal(served, c.served, c.served === null ? `nobody served it${c.why ? ` (${c.why})` : ''}` : `${c.served} served it`)
      const backends = stats().backends
      const blamed = backends.filter(b => b.failures > 0).map(b => names[addresses.indexOf(b.address)])
      t.same(blamed, c.blamed, 'blamed: the backends that failed it')
      t.equal(backends.reduce((sum, b) => sum + b.live, 0), 0, 'no slot left taken')
    })
  }
}
