'use strict'

// A browser over TLS (issue 12): headless Chromium loads a page through lila, which
// terminates TLS and offers h2 by ALPN; the browser takes it (the access log says the
// request came as HTTP/2.0) and the page is the backend's.

const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnLila, httpBackend, within, outputOf } = require('./fixtures/helpers')
const { certDir, makeCertificate } = require('./fixtures/certs')
const { tool } = require('./fixtures/tools')

t.test('headless Chromium over TLS gets h2 by ALPN and the backend\'s page', async t => {
  const chromium = tool('chromium')
  if (chromium.skip) return t.skip(chromium.skip)
  const backend = await httpBackend(t, 'page', (req, res) => {
    res.setHeader('content-type', 'text/html')
    res.end(`<!doctype html><title>through lila</title><p id=p>served over ${req.httpVersion} to lila</p>`)
  })
  const { cert, key } = makeCertificate(certDir(t), 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
  const lila = await spawnLila(t, ['rr', backend.address, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0',
    '--tls-cert', cert, '--tls-key', key, '--access-log', 'json'])

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-chromium-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const args = ['--headless', '--no-sandbox', '--disable-gpu', `--user-data-dir=${dir}`, '--ignore-certificate-errors']
  const dom = await outputOf(chromium.path, [...args, '--dump-dom', `https://127.0.0.1:${lila.port}/`])
  t.match(dom, '<p id="p">served over 1.1 to lila</p>', 'the backend\'s page, reached over HTTP/1.1 behind lila')

  // The access log is written once per tick: wait for the page's line on stdout.
  await within(5000, 'the page\'s access log line', new Promise(resolve => {
    const check = () => {
      if (!/"target":"\/"/.test(lila.stdout)) return
      lila.child.stdout.off('data', check)
      resolve()
    }
    lila.child.stdout.on('data', check) // after spawnLila's own listener, which keeps lila.stdout
    check()
  }))
  const page = lila.stdout.split('\n').filter(Boolean).map(line => JSON.parse(line)).find(r => r.target === '/')
  t.ok(page, 'the access log has the page\'s request')
  t.equal(page?.version, 'HTTP/2.0', 'the browser spoke HTTP/2 to lila (ALPN h2)')
  t.equal(page?.status, 200)
})
