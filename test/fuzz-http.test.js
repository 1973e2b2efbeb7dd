'use strict'

// Hostile input: generated malformed and adversarial requests (fixtures/http-fuzz.js)
// go to lila in HTTP mode, and the same bytes go straight to a reference server with
// Node's strict parser. For every case lila must either forward what the strict parser
// reads, request by request and body by body, or refuse with a 4xx (505 for a foreign
// version); never forward a request the strict parser would not read, never more
// requests than the client sent, never hang, never crash, never leak a count.
//   FUZZ_CASES=20000 FUZZ_SEED=7 npx tap test/fuzz-http.test.js   (a longer run)

const t = require('tap')
const net = require('net')
const { createBalancer } = require('../lib/index')
const { parseCommandLine } = require('../lib/config/argv')
const { fuzzCase } = require('./fixtures/http-fuzz')
const { within, until } = require('./fixtures/helpers')
const { recordingBackend } = require('./fixtures/recording')

const CASES = Number(process.env.FUZZ_CASES || 1500)
const SEED = Number(process.env.FUZZ_SEED || 1)

const shown = r => JSON.stringify({ method: r.method, url: r.url, body: r.body.toString('latin1') }).slice(0, 200)

// Send bytes, half-close, collect the answer until the server closes.
function send (port, bytes) {
  return within(10000, 'an answer (a hang?)', new Promise(resolve => {
    const chunks = []
    const socket = net.connect(port, '127.0.0.1')
    socket.on('data', c => chunks.push(c))
    socket.on('error', () => {})
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')))
    socket.end(bytes)
  }))
}

t.test(`${CASES} generated requests (seed ${SEED})`, async t => {
  const reference = await recordingBackend(t)
  const backend = await recordingBackend(t)
  const { config } = parseCommandLine(['rr', `127.0.0.1:${backend.port}`, '--protocol', 'http', '--host', '127.0.0.1', '--port', '0', '--timeout', '5s', '--header-timeout', '2s'])
  const lb = createBalancer(config)
  const [address] = await lb.listen()
  t.teardown(() => lb.close(0))
  const port = Number(address.split(':').pop())

  const failures = []
  const tally = { forwarded: 0, refused: 0 }
  for (let i = 0; i < CASES; i++) {
    const { name, bytes } = fuzzCase(SEED, i)
    const ref0 = reference.requests.length
    const refErr0 = reference.errors.length
    await send(reference.port, bytes)
    const expected = reference.requests.slice(ref0)
    const refRejected = reference.errors.length > refErr0

    const got0 = backend.requests.length
    const err0 = backend.errors.length
    const answer = await send(port, bytes)
    const got = backend.requests.slice(got0)
    const statuses = [...answer.matchAll(/(?:^|\r\n\r\n|ok)HTTP\/1\.1 (\d{3}) /g)].map(m => Number(m[1]))

    const problems = []
    // A request the client cut short reaches the backend cut short: its parser then
    // meets the end of the stream mid-message, which says nothing about lila.
    // lila takes any method token (RFC 9110); Node's parser knows a fixed list. Where
    // both read the same unknown method at the same place, they agree on framing.
    const methodAgreed = code => code === 'HPE_INVALID_METHOD' && reference.errors.slice(refErr0).includes(code)
    const backendErrors = backend.errors.slice(err0).filter(code => code !== 'HPE_INVALID_EOF_STATE' && !methodAgreed(code))
    if (backendErrors.length > 0) problems.push(`the backend's strict parser rejected what lila sent (${backendErrors})`)
    const refused = statuses.some(s => s >= 400)
    if (got.length < expected.length && !refused) problems.push(`${expected.length} complete requests sent, ${got.length} forwarded, none refused`)
    if (got.length > expected.length) problems.push(`${got.length} requests forwarded where a strict parser reads ${expected.length}${refRejected ? ' (then rejects)' : ''}`)
    got.forEach((r, k) => {
      const e = expected[k]
      if (e && (r.method !== e.method || r.url !== e.url || !r.body.equals(e.body))) {
        problems.push(`request ${k + 1} differs: lila sent ${shown(r)}, strict parser read ${shown(e)}`)
      }
    })
    for (const status of statuses) {
      const fromBackendRefusal = status === 502 && backend.errors.slice(err0).some(methodAgreed)
      if (status !== 200 && !(status >= 400 && status < 500) && status !== 505 && !fromBackendRefusal) problems.push(`answered ${status}`)
    }
    if (statuses.filter(s => s === 200).length !== got.length) problems.push(`${got.length} forwarded but ${statuses.filter(s => s === 200).length} answered 200`)
    if (problems.length > 0) failures.push(`case ${i} [${name}] ${JSON.stringify(bytes.toString('latin1').slice(0, 300))}: ${problems.join('; ')}`)
    if (got.length > 0) tally.forwarded++
    if (refused) tally.refused++
  }
  if (process.env.FUZZ_SHOW) console.error(failures.join('\n'))
  t.same(failures.slice(0, 20), [], `no case broke a rule (${failures.length} did)`)
  t.comment(`${CASES} cases: ${tally.forwarded} forwarded, ${tally.refused} refused`)
  // A lila that refused everything would break no rule: a fair share must get through.
  t.ok(tally.forwarded >= CASES / 20, `a fair share forwarded (${tally.forwarded} of ${CASES})`)
  const counts = () => {
    const stats = lb.stats().listeners[0]
    return { active: stats.active, live: stats.backends.map(b => b.live) }
  }
  const zero = { active: 0, live: counts().live.map(() => 0) }
  // Wait (bounded) for them to settle, then say what they are.
  await until(() => JSON.stringify(counts()) === JSON.stringify(zero), 'counts to return to zero').catch(() => {})
  t.same(counts(), zero, 'every live count is back to zero')
})
