'use strict'

// h2spec (github.com/summerwind/h2spec, a Go tool: .ci/run installs it in .tools/), the
// HTTP/2 conformance suite, against lila's listener in the clear (h2c, on the port it
// shares with HTTP/1.1) and over TLS (ALPN h2): lila fails no case, as HAProxy (lila's
// own codec, lib/wire/h2; on Node's http2 it failed 8, bare Node 7 to 13).

const t = require('tap')
const { spawnLila, httpBackend } = require('./fixtures/helpers')
const { tool } = require('./fixtures/tools')
const { h2spec } = require('./fixtures/h2spec')
const { certDir, makeCertificate } = require('./fixtures/certs')

t.test('h2spec: lila fails no case, h2c and over TLS', { skip: tool('h2spec').skip }, async t => {
  // The app answers once the request is whole, as most do. One that answered at once
  // would race h2spec: 6.9.1's HEADERS (no END_STREAM) then two WINDOW_UPDATEs, when
  // the updates come in a later read, find the stream answered and reset NO_ERROR
  // (RFC 9113 8.1), so no FLOW_CONTROL_ERROR is owed: right, and a failed case.
  const backend = await httpBackend(t, 'app', (req, res) => {
    req.resume()
    req.on('end', () => res.end('app\n'))
  })
  const dir = certDir(t)
  const cert = makeCertificate(dir, 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const base = [backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--log-level', 'error']
  for (const tls of [false, true]) {
    const kind = tls ? 'h2' : 'h2c'
    const lila = await spawnLila(t, tls ? [...base, '--tls-cert', cert.cert, '--tls-key', cert.key] : base)
    const result = await h2spec(t, lila.port, { tls })
    t.ok(result.total >= 145, `${kind}: h2spec ran its ${result.total} cases`)
    t.same(result.failed, [], `${kind}: no case failed (${result.skipped} skipped)`)
  }
})
