'use strict'

// --help as a terminal shows it: wrapped to the terminal's width (80 when stdout is not
// a terminal), defaults whole, options under their group's heading, examples that run.
// The exact text at 80 columns is pinned by test/golden/help.txt (usage.test.js).

const t = require('tap')
const { main } = require('../lib/cli/main')
const { helpText, helpWidth, formatDefault, EXAMPLES } = require('../lib/cli/help')
const { OPTIONS, GROUPS } = require('../lib/config/options')
const { parseCommandLine } = require('../lib/config/argv')
const { runLila } = require('./fixtures/helpers')

// What `lila --help` writes to a stdout that is a terminal `columns` wide.
async function helpAt (columns) {
  let text = ''
  const stdout = { isTTY: true, columns, write: chunk => { text += chunk; return true } }
  t.equal(await main(['--help'], { stdout, stderr: stdout }), 0)
  return text
}

// The text with its layout taken out: the examples' continuation backslashes and the
// "#" of their comments' lines, and every space and line break.
const content = text => text.replace(/ \\\n/g, '\n').replace(/#/g, '').replace(/\s+/g, '')

t.test('not a terminal: 80 columns, no line wider', async t => {
  const help = await runLila(['--help'])
  t.equal(help.stdout, helpText(80))
  const wide = help.stdout.split('\n').filter(line => line.length > 80)
  t.same(wide, [], 'no line over 80 columns')
  t.match(help.stdout, /\n {2}lila completion bash\|zsh +tab completion: source <\(lila completion bash\)\n/,
    'the command to paste on one line')
})

t.test('every line fits the terminal, whatever its width, and nothing is lost', async t => {
  const reference = content(helpText(100))
  for (const columns of [10, 40, 45, 50, 55, 60, 61, 62, 63, 64, 70, 72, 79, 80, 81, 90, 100, 120, 200]) {
    const text = await helpAt(columns)
    const width = helpWidth(columns)
    t.equal(width, Math.min(100, Math.max(40, columns)), `${columns} columns: wrapped to ${width}`)
    const wide = text.split('\n').filter(line => line.length > width)
    t.same(wide, [], `${columns} columns: no line over ${width}`)
    t.equal(content(text), reference, `${columns} columns: the same words in the same order`)
  }
})

t.test('a default is never split: "(default X)" stays on one line', async t => {
  for (const columns of [40, 50, 60, 64, 72, 80, 90, 100]) {
    const lines = (await helpAt(columns)).split('\n')
    for (const o of OPTIONS.filter(o => o.default !== undefined)) {
      const shown = `(default ${formatDefault(o)})`
      t.ok(lines.some(line => line.includes(shown)), `${columns} columns: --${o.name} ${shown} on one line`)
    }
  }
  t.same(OPTIONS.filter(o => /\bdefault/.test(o.help)).map(o => o.name), [],
    'the default is said once, by "(default X)", not in the help text too')
})

t.test('options are listed under their group, the groups in order', async t => {
  t.same(GROUPS.flatMap(g => g.options).sort((a, b) => OPTIONS.indexOf(a) - OPTIONS.indexOf(b)), OPTIONS,
    'every option is in exactly one group')
  const lines = helpText(80).split('\n')
  const headings = GROUPS.map(g => lines.indexOf(`${g.title}:`))
  t.notOk(headings.includes(-1), 'every group has its heading')
  t.same(headings, headings.slice().sort((a, b) => a - b), 'in the order of GROUPS')
  GROUPS.forEach((group, i) => {
    const end = i + 1 < GROUPS.length ? headings[i + 1] : lines.indexOf('', headings[i] + 1)
    const section = lines.slice(headings[i], end).join('\n')
    for (const o of group.options) t.match(section, new RegExp(` --${o.name}\\b`), `${group.title}: --${o.name}`)
  })
})

t.test('the examples are valid command lines', async t => {
  const help = helpText(80)
  t.match(help, /\nExamples:\n/)
  for (const [, example] of EXAMPLES) {
    t.ok(help.includes(`  ${example}\n`), `shown whole at 80 columns: ${example}`)
    const args = example.split(' ').slice(1)
    t.doesNotThrow(() => parseCommandLine(args), example)
  }
})
