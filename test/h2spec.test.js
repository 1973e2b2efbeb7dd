'use strict'

// h2spec (github.com/summerwind/h2spec, a Go tool: .ci/run installs it in .tools/), the
// HTTP/2 conformance suite, against lila's listener in the clear (h2c, on the port it
// shares with HTTP/1.1) and over TLS (ALPN h2): lila fails no case, as HAProxy (lila's
// own codec, lib/wire/h2; on Node's http2 it failed 8, bare Node 7 to 13).

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn } = require('child_process')
const { spawnLila, httpBackend, within } = require('./fixtures/helpers')
const { tool } = require('./fixtures/tools')
const { certDir, makeCertificate } = require('./fixtures/certs')

const H2SPEC = tool('h2spec').path

// h2spec's JUnit report -> Map 'package classname' -> 'passed' | 'failed' | 'skipped'.
// Read with a pattern: the report can hold bytes an XML parser refuses.
function results (file) {
  const text = fs.readFileSync(file, 'latin1')
  const out = new Map()
  const re = /<testcase package="([^"]*)" classname="([^"]*)"[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g
  let match
  while ((match = re.exec(text)) !== null) {
    const body = match[4] || ''
    out.set(`${match[1]} ${match[2]}`, /<(failure|error)\b/.test(body) ? 'failed' : /<skipped\b/.test(body) ? 'skipped' : 'passed')
  }
  return out
}

// Run h2spec against 127.0.0.1:port. Each case waits for lila's answer up to `-o`
// seconds (2 by default, which a busy machine can outlast); a case that passes never
// waits it out, so a generous one costs nothing.
function h2spec (t, port, { tls = false } = {}) {
  const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lila-h2spec-')), 'report.xml')
  t.teardown(() => fs.rmSync(path.dirname(report), { recursive: true, force: true }))
  const args = ['-o', '20', '-h', '127.0.0.1', '-p', String(port), '-j', report, ...(tls ? ['-t', '-k'] : [])]
  return within(180000, 'h2spec to finish', new Promise((resolve, reject) => {
    const child = spawn(H2SPEC, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', chunk => { stderr += chunk })
    child.on('close', () => {
      if (!fs.existsSync(report)) return reject(new Error(`h2spec wrote no report: ${stderr}`))
      resolve(results(report))
    })
  }))
}

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
    const ofLila = await h2spec(t, lila.port, { tls })
    t.ok(ofLila.size >= 145, `${kind}: h2spec ran its ${ofLila.size} cases`)
    const failed = [...ofLila].filter(([, state]) => state === 'failed').map(([name]) => name)
    t.same(failed, [], `${kind}: no case failed (${[...ofLila.values()].filter(s => s === 'skipped').length} skipped)`)
  }
})
