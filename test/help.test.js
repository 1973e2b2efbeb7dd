'use strict'

// Help as a terminal shows it: `lila --help` short (usage, modes, the common options,
// the topics), `lila help TOPIC` a topic with every option it holds, `lila help all`
// every topic; wrapped to the terminal's width (80 when stdout is not a terminal),
// defaults whole, examples that run. The exact text at 80 columns is pinned by
// test/golden/help.txt (usage.test.js) and test/golden/help-all.txt (here).

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { main } = require('../lib/cli/main')
const { helpText, topicText, helpWidth, formatDefault, findTopic, EXAMPLES } = require('../lib/cli/help')
const { OPTIONS, GROUPS } = require('../lib/config/options')
const { MODES } = require('../lib/upstream/balancers')
const { parseCommandLine } = require('../lib/config/argv')
const { runLila } = require('./fixtures/helpers')

const SHORT_MAX_LINES = 60 // the short page fits a terminal of 60 lines, as issue 28 asks
const WIDTHS = [10, 40, 45, 50, 55, 60, 61, 62, 63, 64, 70, 72, 79, 80, 81, 90, 100, 120, 200]

// What `lila ...args` writes to a stdout that is a terminal `columns` wide.
async function helpAt (args, columns) {
  let text = ''
  const stdout = { isTTY: true, columns, write: chunk => { text += chunk; return true } }
  t.equal(await main(args, { stdout, stderr: stdout }), 0, args.join(' '))
  return text
}

// The text with its layout taken out: the examples' continuation backslashes and the
// "#" of their comments' lines, and every space and line break.
const content = text => text.replace(/ \\\n/g, '\n').replace(/#/g, '').replace(/\s+/g, '')

t.test('lila --help: short, 80 columns when not a terminal, no line wider', async t => {
  const help = await runLila(['--help'])
  t.equal(help.stdout, helpText(80))
  const lines = help.stdout.trimEnd().split('\n') // as wc -l counts them
  t.ok(lines.length <= SHORT_MAX_LINES, `${lines.length} lines, at most ${SHORT_MAX_LINES}`)
  t.same(lines.filter(line => line.length > 80), [], 'no line over 80 columns')
  t.match(help.stdout, /\n {2}lila completion bash\|zsh +tab completion: source <\(lila completion bash\)\n/,
    'the command to paste on one line')
  for (const mode of MODES) t.match(help.stdout, new RegExp(`\\n  ${mode.name}\\b`), `mode ${mode.name}`)
  const listed = new Set(lines.map(line => /^ {2}(?:-\w, | {4})--([a-z0-9-]+)/.exec(line)?.[1]).filter(Boolean))
  t.same([...listed], OPTIONS.filter(o => o.common).map(o => o.name), 'the common options, and only those, in order')
  for (const g of GROUPS) t.match(help.stdout, new RegExp(`\\n  ${g.name} +${g.summary.split(' ')[0]}`), `topic ${g.name}`)
})

t.test('every line fits the terminal, whatever its width, and nothing is lost', async t => {
  for (const args of [['--help'], ['help', 'all'], ...GROUPS.map(g => ['help', g.name])]) {
    const reference = content(await helpAt(args, 100))
    for (const columns of WIDTHS) {
      const text = await helpAt(args, columns)
      const width = helpWidth(columns)
      t.equal(width, Math.min(100, Math.max(40, columns)), `${columns} columns: wrapped to ${width}`)
      const wide = text.split('\n').filter(line => line.length > width)
      t.same(wide, [], `lila ${args.join(' ')}, ${columns} columns: no line over ${width}`)
      t.equal(content(text), reference, `lila ${args.join(' ')}, ${columns} columns: the same words in the same order`)
    }
  }
})

t.test('a default is never split: "(default X)" stays on one line', async t => {
  for (const columns of [40, 50, 60, 64, 72, 80, 90, 100]) {
    const lines = topicText('all', columns).split('\n')
    for (const o of OPTIONS.filter(o => o.default !== undefined)) {
      const shown = `(default ${formatDefault(o)})`
      t.ok(lines.some(line => line.includes(shown)), `${columns} columns: --${o.name} ${shown} on one line`)
    }
  }
  t.same(OPTIONS.filter(o => /\bdefault/.test(o.help)).map(o => o.name), [],
    'the default is said once, by "(default X)", not in the help text too')
})

t.test('lila help all: every topic, in order, each with its options', async t => {
  t.same(GROUPS.flatMap(g => g.options).sort((a, b) => OPTIONS.indexOf(a) - OPTIONS.indexOf(b)), OPTIONS,
    'every option is in exactly one topic')
  const all = await runLila(['help', 'all'])
  t.equal(all.code, 0)
  t.equal(all.stdout, topicText('all', 80))
  const golden = path.join(__dirname, 'golden', 'help-all.txt')
  if (process.env.UPDATE_GOLDEN) fs.writeFileSync(golden, all.stdout)
  t.equal(all.stdout, fs.readFileSync(golden, 'utf8'), 'lila help all matches test/golden/help-all.txt (UPDATE_GOLDEN=1 to accept a change)')

  const lines = all.stdout.split('\n')
  const headings = GROUPS.map(g => lines.findIndex(line => line.startsWith(`${g.title} (lila help ${g.name}):`)))
  t.notOk(headings.includes(-1), 'every topic has its heading')
  t.same(headings, headings.slice().sort((a, b) => a - b), 'in the order of GROUPS')
  GROUPS.forEach((group, i) => {
    const section = lines.slice(headings[i], headings[i + 1]).join('\n')
    for (const o of group.options) t.match(section, new RegExp(` --${o.name}\\b`), `${group.name}: --${o.name}`)
    // Its page alone says the same after the title (laid out on a left column of its own).
    t.ok(content(topicText(group.name, 80)).endsWith(content(section)), `${group.name}: lila help ${group.name} is its section`)
  })
})

t.test('lila help WORD: a topic, an option or a mode leads to its topic', async t => {
  const byName = new Map(GROUPS.map(g => [g.name, g]))
  for (const group of GROUPS) {
    t.equal(findTopic(group.name), group)
    t.equal(findTopic(group.name.toUpperCase()), group, 'in any case')
    for (const word of group.words) t.equal(findTopic(word), group, `${word}: ${group.name}`)
  }
  for (const o of OPTIONS) {
    t.equal(findTopic(o.name), byName.get(o.group), `${o.name}: ${o.group}`)
    t.equal(findTopic(`--${o.name}`), byName.get(o.group), `--${o.name}: ${o.group}`)
    if (o.short) t.equal(findTopic(`-${o.short}`), byName.get(o.group), `-${o.short}: ${o.group}`)
  }
  for (const mode of MODES) t.equal(findTopic(mode.name), byName.get('balancing'), `${mode.name}: balancing`)
  t.equal(findTopic('all'), 'all')

  const byOption = await runLila(['help', '--retries'])
  t.equal(byOption.code, 0, 'an option with its dashes is a word for lila help, not an option')
  t.equal(byOption.stdout, topicText('balancing', 80))
  t.same(await runLila(['help']), await runLila(['--help']), 'lila help is --help')
})

t.test('the examples are valid command lines, each on its topic\'s page', async t => {
  for (const [topic, , example] of EXAMPLES) {
    t.ok(findTopic(topic) !== undefined, `${topic} is a topic`)
    t.ok(topicText(topic, 80).includes(`  ${example}\n`), `shown whole on lila help ${topic} at 80 columns: ${example}`)
    const args = [...example.matchAll(/'([^']*)'|(\S+)/g)].map(m => m[1] ?? m[2]).slice(1) // as a shell splits it
    t.doesNotThrow(() => parseCommandLine(args), example)
  }
})

t.test('each topic points at docs that exist, at a heading they have', async t => {
  const ROOT = path.join(__dirname, '..')
  const slug = heading => heading.toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')
  for (const group of GROUPS) {
    for (const doc of group.docs) {
      const [file, fragment] = doc.split('#')
      t.ok(fs.existsSync(path.join(ROOT, file)), `${group.name}: ${file}`)
      if (fragment === undefined) continue
      const headings = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n')
        .filter(line => line.startsWith('#')).map(line => slug(line.replace(/^#+ /, '')))
      t.ok(headings.includes(fragment), `${group.name}: ${doc}`)
    }
  }
})
