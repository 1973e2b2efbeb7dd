'use strict'

// Hostile input on the command line: thousands of generated argument lists, each of
// which must end in a clean exit 0, 1 or 2 with a one-line message (and "Try 'lila
// --help'." for usage errors), never a stack trace, never a hang. Valid ones start
// lila for real on a free port; they are stopped with SIGTERM once listening.
//   CLI_CASES=20000 CLI_SEED=3 npx tap test/fuzz-cli.test.js   (a longer run)

const t = require('tap')
const net = require('net')
const { EventEmitter } = require('events')
const { main } = require('../lib/cli/main')
const { OPTIONS } = require('../lib/config/options')
const { MODES } = require('../lib/upstream/balancers')
const { prng } = require('./fixtures/http-fuzz')
const { within, runLila, listenOn } = require('./fixtures/helpers')

const CASES = Number(process.env.CLI_CASES || 3000)
const SEED = Number(process.env.CLI_SEED || 1)

// eslint-disable-next-line no-template-curly-in-string -- a literal "${HOME}" is one of the junk values
const JUNK = ['', '-', '--', '---', ' ', '=', '-p', '--=', '\u00e9', 'x'.repeat(5000), '\0', '${HOME}', '0', '-1', '1e3', 'NaN', 'Infinity', '0x10', '80.5', '[', ']', ':', '::', ',', 'true', 'null', '{}']
const VALUES = {
  port: ['0', '65536', '-1', 'abc', '1.5', '', ' 0', '00', '99999999999999999999'],
  host: ['127.0.0.1', '::1', '[::1]', 'localhost', '192.0.2.1', 'bad host', '999.1.1.1', '', '::ffff:127.0.0.1', 'a'.repeat(300)],
  duration: ['1s', '500ms', '0s', '0ms', '5', '2x', '-1s', '1.5s', '.5s', '1e3ms', '1000h', '24d', 'ms', '1m', '1h', ''],
  count: ['0', '1', '2', '100', '101', '-1', 'x', '1.5', ''],
  positive: ['1', '0', '10', '-3', 'y', '1000000001', ''],
  protocol: ['tcp', 'http', 'udp', 'HTTP', ''],
  logLevel: ['error', 'warn', 'info', 'debug', 'loud', 'INFO', ''],
  // Only invalid ones: a valid --workers N would make this test process a cluster primary.
  workers: ['0', '257', 'x', '1.5', '-2', ''],
  proxyProtocol: ['v1', 'v2', 'v3', 'V1', ''],
  file: ['', 'missing.pem', 'test', 'package.json']
}

function generate (rand) {
  const pick = list => list[Math.floor(rand() * list.length)]
  const args = []
  const n = Math.floor(rand() * 7)
  const deadPort = () => String(1 + Math.floor(rand() * 3)) // ports 1-3: nothing listens there
  if (rand() < 0.6) args.push(pick(MODES.flatMap(m => [m.name, ...m.aliases]).concat(['demo', 'fastest', 'RR'])))
  for (let i = 0; i < n; i++) {
    const r = rand()
    if (r < 0.35) {
      // a backend, often valid
      const host = pick(['', '127.0.0.1', 'localhost', '[::1]', '[zz]', '999.1.1.1', 'a..b', 'name_with_underscore', '::1'])
      const port = pick([deadPort(), '0', '65536', 'x', ''])
      const settings = rand() < 0.5 ? '' : ',' + pick(['weight=0', 'weight=3', 'weight=1001', 'max-conn=1', 'max-conn=0', 'backup', 'backup=1', 'colour=red', ''])
      args.push(`${host}:${port}${settings}`)
    } else if (r < 0.8) {
      const option = pick(OPTIONS)
      const flag = option.short && rand() < 0.3 ? `-${option.short}` : `--${option.name}`
      if (option.type === 'boolean' || option.type === 'flag') {
        args.push(rand() < 0.8 ? flag : `${flag}=${pick(JUNK)}`)
      } else {
        const value = rand() < 0.75 ? pick(VALUES[option.type] || JUNK) : pick(JUNK)
        if (rand() < 0.2) args.push(`${flag}=${value}`)
        else if (rand() < 0.95) args.push(flag, value)
        else args.push(flag) // value missing
      }
    } else {
      args.push(pick(JUNK))
    }
  }
  // Keep runs off real ports: unless the case chose a port, take a free one.
  if (!args.some(a => /^(-p|--port)/.test(a))) args.push('--port', '0')
  if (!args.some(a => /^--host/.test(a))) args.push('--host', '127.0.0.1')
  return args
}

function capture () {
  let text = ''
  const waiters = []
  return {
    write (chunk) {
      text += chunk
      for (const w of waiters.splice(0)) w()
      return true
    },
    get text () { return text },
    changed: () => new Promise(resolve => waiters.push(resolve))
  }
}

// Run main() like the process would, stopping a lila that started.
async function run (args) {
  const stdout = capture()
  const stderr = capture()
  const signals = new EventEmitter()
  const done = main(args, { stdout, stderr, signals })
  let settled = false
  done.then(() => { settled = true }, () => { settled = true })
  // eslint-disable-next-line no-unmodified-loop-condition -- set when `done` settles
  for (let i = 0; i < 200 && !settled; i++) {
    if (/listening on/.test(stderr.text)) {
      signals.emit('SIGTERM')
      break
    }
    await Promise.race([stderr.changed(), done.catch(() => {})])
  }
  const code = await within(20000, `lila ${JSON.stringify(args)} to finish`, done)
  return { code, stdout: stdout.text, stderr: stderr.text }
}

function problemsOf ({ code, stdout, stderr }) {
  const problems = []
  if (![0, 1, 2].includes(code)) problems.push(`exit code ${code}`)
  if (/\n\s+at .+:\d+:\d+/.test(stderr) || /internal error/.test(stderr)) problems.push('a stack trace or internal error')
  const lines = stderr.split('\n').filter(Boolean)
  if (code === 2) {
    if (lines.length !== 2 || !/^lila: \S/.test(lines[0]) || lines[1] !== "Try 'lila --help'.") problems.push(`usage error not one line + Try: ${JSON.stringify(stderr)}`)
    if (stdout !== '') problems.push('stdout on a usage error')
  }
  if (code === 1 && (lines.length !== 1 || !/^lila: cannot listen on /.test(lines[0]))) problems.push(`runtime failure not one line: ${JSON.stringify(stderr)}`)
  if (lines.some(l => !l.startsWith('lila: ') && l !== "Try 'lila --help'.")) problems.push(`a line without "lila: ": ${JSON.stringify(stderr)}`)
  return problems
}

t.test(`${CASES} generated command lines (seed ${SEED}), in-process`, async t => {
  // A port that is taken, for "port in use" cases.
  const taken = net.createServer()
  await listenOn(t, taken)
  VALUES.port.push(String(taken.address().port))

  const rand = prng(SEED)
  const tally = { 0: 0, 1: 0, 2: 0 }
  const failures = []
  for (let i = 0; i < CASES; i++) {
    const args = generate(rand)
    const started = Date.now()
    const result = await run(args)
    if (Date.now() - started > 2000) t.comment(`slow (${Date.now() - started} ms): ${JSON.stringify(args)} -> ${result.code} ${result.stderr}`)
    tally[result.code] = (tally[result.code] || 0) + 1
    const problems = problemsOf(result)
    if (problems.length) failures.push(`${JSON.stringify(args)}: ${problems.join('; ')}`)
  }
  t.same(failures.slice(0, 10), [], `every case ended cleanly (${failures.length} did not)`)
  t.comment(`exit 0: ${tally[0]}, exit 1: ${tally[1]}, exit 2: ${tally[2]}`)
  // A CLI that refused every argument list would end each one cleanly too.
  t.ok(tally[0] >= CASES / 50, `some command lines start lila (${tally[0]} of ${CASES})`)
})

t.test('a sample through the real executable', async t => {
  const rand = prng(SEED + 1)
  const failures = []
  for (let i = 0; i < 40; i++) {
    const args = generate(rand).filter(a => a !== 'demo' && !a.includes('\0')) // argv cannot carry NUL
    // Only cases that end by themselves: usage errors, --help, --version, port taken.
    const inProcess = await run(args)
    if (inProcess.code === 0 && !/^lila \d|Usage:/.test(inProcess.stdout)) continue
    const real = await runLila(args)
    if (real.code !== inProcess.code || real.stderr !== inProcess.stderr) failures.push(`${JSON.stringify(args)}: process said ${real.code} ${JSON.stringify(real.stderr)}, main() ${inProcess.code}`)
    const problems = problemsOf(real)
    if (problems.length) failures.push(`${JSON.stringify(args)}: ${problems.join('; ')}`)
  }
  t.same(failures, [])
})
