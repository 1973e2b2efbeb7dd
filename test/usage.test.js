'use strict'

// Every usage error, pinned: test/golden/usage.txt lists the cases. Each runs twice:
// in-process through main() (fast, exact) and through the real executable, which must
// print the same single line and exit 2, never a stack trace.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { main } = require('../lib/cli/main')
const { helpText } = require('../lib/cli/help')
const { runLila, listenOn } = require('./fixtures/helpers')

function split (command) {
  const words = []
  const re = /'([^']*)'|(\S+)/g
  let match
  while ((match = re.exec(command)) !== null) words.push(match[1] !== undefined ? match[1] : match[2])
  return words
}

function loadCases (file) {
  const text = fs.readFileSync(path.join(__dirname, 'golden', file), 'utf8')
  return text.split(/\n\s*\n/).map(block => block.split('\n').filter(line => line && !line.startsWith('#')))
    .filter(lines => lines.length > 0)
    .map(([command, code, ...stderr]) => {
      if (!command.startsWith('$ lila')) throw new Error(`bad golden case: ${command}`)
      return { command, args: split(command.slice(6)), code: Number(code), stderr: stderr.join('\n') + '\n' }
    })
}

function capture () {
  let text = ''
  return { write: chunk => { text += chunk; return true }, get text () { return text } }
}

const cases = loadCases('usage.txt')

t.test('in-process: exact message and exit code', async t => {
  for (const c of cases) {
    const stdout = capture()
    const stderr = capture()
    const code = await main(c.args, { stdout, stderr })
    t.equal(code, c.code, `${c.command}: exit code`)
    t.equal(stderr.text, c.stderr, `${c.command}: stderr`)
    t.equal(stdout.text, '', `${c.command}: nothing on stdout`)
  }
})

// Run `task` over `items`, at most `limit` at once (so that many cases do not start
// dozens of node processes at the same moment on a busy CI machine).
async function mapLimit (items, limit, task) {
  const results = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await task(items[i])
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

// The executable adds to main() only bin.js: how a code and a line leave the process,
// the same for every case. So it runs a spread of them (each exit code's first, then
// every SPREAD-th), not all ~200: a spawn costs ~0.2 s of CPU, and on a busy 2-core
// machine all of them outlasted tap's timeout.
const SPREAD = 8
const spread = cases.filter((c, i) => i % SPREAD === 0 || cases.findIndex(o => o.code === c.code) === i)

t.test('the real executable says the same', async t => {
  t.ok(spread.length >= cases.length / SPREAD, `${spread.length} of ${cases.length} cases`)
  const results = await mapLimit(spread, 4, c => runLila(c.args))
  spread.forEach((c, i) => {
    t.equal(results[i].code, c.code, `${c.command}: exit code`)
    t.equal(results[i].stderr, c.stderr, `${c.command}: stderr`)
  })
})

t.test('--help and --version', async t => {
  const help = await runLila(['--help'])
  t.equal(help.code, 0)
  t.equal(help.stdout, helpText())
  const golden = path.join(__dirname, 'golden', 'help.txt')
  if (process.env.UPDATE_GOLDEN) fs.writeFileSync(golden, help.stdout)
  t.equal(help.stdout, fs.readFileSync(golden, 'utf8'), '--help matches test/golden/help.txt (UPDATE_GOLDEN=1 to accept a change)')
  t.same(await runLila(['-h']), help, '-h is --help')

  const version = await runLila(['--version'])
  t.equal(version.code, 0)
  t.equal(version.stdout, `lila ${require('../package.json').version}\n`)
  t.same(await runLila(['-v']), version, '-v is --version')
  t.same(await runLila(['rr', ':80', '--version']), version, '--version wins over everything else')

  // The words a newcomer types first (they used to be taken for unknown modes).
  t.same(await runLila(['help']), help, 'lila help is --help')
  t.same(await runLila(['version']), version, 'lila version is --version')
})

t.test('did you mean: the nearest word, and none for a word near nothing', async t => {
  const { closest, distance } = require('../lib/config/suggest')
  t.equal(distance('retires', 'retries'), 1, 'two neighbours swapped are one edit')
  t.equal(closest('retires', ['retry-on', 'retries']), 'retries')
  t.equal(closest('Port', ['host', 'port']), 'port', 'case is no edit')
  t.equal(closest('x', ['rr', 'lc']), null, 'a short word is not taken for another short one')
  t.equal(closest('ab', ['rr', 'lc']), null)
  t.equal(closest('foo', ['rr', 'lc', 'random']), null)
  t.equal(closest('lcc', ['rr', 'lc']), 'lc')
  t.equal(closest('connnect-timout', ['connect-timeout']), 'connect-timeout', 'two edits in a long word')
  t.equal(closest('c'.repeat(41), ['c'.repeat(41)]), null, 'long words are not compared')
  t.equal(closest('--proto', ['--port', '--protocol']), '--protocol', 'the one word it begins, before a nearer one')
  t.equal(closest('--ret', ['--retries', '--retry-on']), null, 'a beginning of two words: neither')
  t.equal(closest('--po', ['--protocol', '--port']), null, 'two letters are no abbreviation')
})

t.test('a port already taken exits 1 with one line', async t => {
  const net = require('net')
  const server = net.createServer()
  await listenOn(t, server)
  const { port } = server.address()
  const result = await runLila([':9', '--host', '127.0.0.1', '--port', String(port)])
  t.equal(result.code, 1)
  t.equal(result.stderr, `lila: cannot listen on 127.0.0.1:${port}: address already in use\n`)
})

t.test('a status port already taken exits 1 with one line, before anything else', async t => {
  const net = require('net')
  const server = net.createServer()
  await listenOn(t, server)
  const { port } = server.address()
  const result = await runLila([':9', '--host', '127.0.0.1', '--port', '0', '--status-port', String(port)])
  t.equal(result.code, 1)
  t.equal(result.stderr, `lila: cannot listen on 127.0.0.1:${port} (--status-port): address already in use\n`)
})

t.test('an address not on this machine exits 1 with one line', async t => {
  const result = await runLila([':9', '--host', '192.0.2.1', '--port', '0'])
  t.equal(result.code, 1)
  t.equal(result.stderr, 'lila: cannot listen on 192.0.2.1:0: address not available on this machine\n')
})
