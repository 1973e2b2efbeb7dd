'use strict'

// What `lila --version` loads, held to what ARCHITECTURE.md says of it ("The start of a
// process"): about N of lila's modules (within a few: a new config/ file need not
// change the sentence), those Node built-ins exactly, and none of the balancer, the
// listeners or the status listener.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawnSync } = require('child_process')
const { ROOT } = require('./fixtures/helpers')

const TOLERANCE = 4
// Folders and files only a serving lila needs.
const SERVING = /^(balancer|admin|net|tls|fleet|telemetry|app)\/|^proxy\/(listener|tcp|http\/protocol|http\/exchange)\.js$|^index\.js$/

t.test('lila --version loads what ARCHITECTURE.md says', async t => {
  const doc = fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8').replace(/\s+/g, ' ')
  const claim = /`lila --version` loads none of the balancer, the listeners or the status listener: about (\d+) of lila's modules \(.*?\) and (?:Node's ([a-z, ]+?)|none of Node's) \(/.exec(doc)
  t.ok(claim, 'the sentence is in ARCHITECTURE.md')
  const [, count, names] = claim
  const builtins = names === undefined ? [] : names.split(/, | and /)

  const run = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'loaded-modules.js'), '--version'],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, timeout: 30000 })
  t.equal(run.status, 0, 'exit 0')
  t.match(run.stdout, /^lila \d+\.\d+\.\d+/, 'it says its version')
  const { lib, builtins: required } = JSON.parse(run.stderr.trim().split('\n').pop())
  t.ok(Math.abs(lib.length - Number(count)) <= TOLERANCE,
    `${lib.length} of lila's modules, the doc says about ${count} (within ${TOLERANCE})`)
  t.same(required, builtins.sort(), 'the Node built-ins the doc names')
  t.same(lib.filter(file => SERVING.test(file)), [], 'nothing only a serving lila needs')
})
