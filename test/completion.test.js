'use strict'

// `lila completion bash|zsh`: the script comes from lila's own options and modes, and
// bash completes with it as a user's shell would (COMP_WORDS, then the function).

const t = require('tap')
const { spawnSync } = require('child_process')
const { OPTIONS, GROUPS } = require('../lib/config/options')
const { MODES } = require('../lib/upstream/balancers')
const { LILA, runLila } = require('./fixtures/helpers')
const { tool } = require('./fixtures/tools')

// What the shell offers for the words typed so far (the last one being completed). zsh
// runs the function as its bashcompinit's compgen does: under `emulate sh`, whose
// arrays count from 0 as bash's.
function complete (shell, words) {
  const array = words.map(w => `'${w}'`).join(' ')
  const call = shell === 'zsh' ? 'emulate sh -c _lila' : '_lila'
  const script = `source <("${LILA}" completion ${shell}); COMP_WORDS=(${array}); COMP_CWORD=${words.length - 1}; ` +
    `${call}; printf "%s\\n" "$` + '{COMPREPLY[@]}"' // the shell's, not a template
  const run = spawnSync(shell, ['-c', script], { encoding: 'utf8' })
  if (run.error) throw run.error
  const offered = run.stdout.split('\n').filter(Boolean).sort()
  // zsh's compgen (bashcompinit) offers every word; compadd then keeps those that
  // start with what was typed.
  return shell === 'zsh' ? offered.filter(w => w.startsWith(words.at(-1))) : offered
}

t.test('bash: options, values, modes, commands and help topics', async t => {
  t.same(complete('bash', ['lila', '--retr']), ['--retries', '--retry-budget', '--retry-on'], 'options by prefix')
  t.same(complete('bash', ['lila', 'rr', ':9001', '--protocol', '']), ['grpc', 'http', 'tcp'], 'an option\'s values')
  t.same(complete('bash', ['lila', '--log-level', 'd']), ['debug'])
  t.same(complete('bash', ['lila', '--access-log', '']), ['combined', 'json', 'text'])
  t.same(complete('bash', ['lila', 'r']), ['random', 'restart-app', 'round-robin', 'rr', 'run'], 'modes and commands')
  t.same(complete('bash', ['lila', 'comp']), ['completion'], 'and commands')
  t.same(complete('bash', ['lila', 'completion', '']), ['bash', 'zsh'])
  t.same(complete('bash', ['lila', 'help', '']), [...GROUPS.map(g => g.name), 'all'].sort(), 'the topics of lila help')
  t.same(complete('bash', ['lila', 'help', 'h']), ['headers', 'health', 'http', 'http2'])
  const all = complete('bash', ['lila', '--'])
  t.same(all, OPTIONS.map(o => o.flag).sort(), 'every option lila has, and only those')
  t.same(complete('bash', ['lila', '']).filter(w => !['run', 'demo', 'help', 'version', 'completion', 'upgrade', 'restart-app'].includes(w)),
    MODES.flatMap(m => [m.name, ...m.aliases]).sort())
})

t.test('zsh loads the same script through bashcompinit', async t => {
  if (tool('zsh').skip) return t.skip(tool('zsh').skip)
  t.same(complete('zsh', ['lila', '--retr']), ['--retries', '--retry-budget', '--retry-on'])
  t.same(complete('zsh', ['lila', 'rr', ':9001', '--protocol', '']), ['grpc', 'http', 'tcp'], 'an option\'s values')
  t.same(complete('zsh', ['lila', 'r']), ['random', 'restart-app', 'round-robin', 'rr', 'run'], 'modes and commands')
})

t.test('a shell lila does not know: exit 2, one line', async t => {
  for (const args of [['completion', 'fish'], ['completion'], ['completion', 'bash', 'extra']]) {
    const { code, stdout, stderr } = await runLila(args)
    t.equal(code, 2, args.join(' '))
    t.equal(stdout, '')
    t.match(stderr, /^lila: (unknown shell "fish"|no shell given|unexpected argument "extra")/)
  }
})
