'use strict'

// The docs hold together: every relative link in README.md, ARCHITECTURE.md,
// CONTRIBUTING.md, CHANGELOG.md and docs/*.md points at a file that exists (and, with a
// #fragment, at a heading that file has, as GitHub makes its anchors), each docs/ page
// links back to the README, and no code block is wider than 100 columns.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { ROOT } = require('./fixtures/helpers')

const DOCS = ['README.md', 'ARCHITECTURE.md', 'CONTRIBUTING.md', 'CHANGELOG.md']
  .concat(fs.readdirSync(path.join(ROOT, 'docs')).filter(f => f.endsWith('.md')).map(f => `docs/${f}`))

// The text outside fenced code blocks, and the code blocks' lines.
function split (text) {
  const prose = []
  const code = []
  let fence = null
  for (const line of text.split('\n')) {
    const open = /^\s*(`{3,}|~{3,})/.exec(line)
    if (fence === null && open) fence = open[1]
    else if (fence !== null && line.trim().startsWith(fence)) fence = null
    else (fence === null ? prose : code).push(line)
  }
  return { prose: prose.join('\n'), code }
}

// GitHub's anchors: lower case, punctuation but - and _ dropped, spaces to -, repeats -1, -2...
function anchors (text) {
  const seen = new Map()
  const out = new Set()
  for (const [, heading] of split(text).prose.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const n = seen.get(base) || 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

function links (text) {
  const prose = split(text).prose.replace(/`[^`\n]*`/g, '')
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map(m => m[1])
    .filter(target => !/^[a-z][a-z0-9+.-]*:/i.test(target))
}

t.test('every relative link points at a file, and a #fragment at a heading in it', async t => {
  let checked = 0
  for (const doc of DOCS) {
    const text = fs.readFileSync(path.join(ROOT, doc), 'utf8')
    for (const target of links(text)) {
      const [file, fragment] = target.split('#')
      const resolved = file === '' ? doc : path.posix.normalize(path.posix.join(path.posix.dirname(doc), file))
      const exists = fs.existsSync(path.join(ROOT, resolved))
      t.ok(exists, `${doc}: ${target} -> ${resolved} exists`)
      if (exists && fragment !== undefined && resolved.endsWith('.md')) {
        const heads = anchors(fs.readFileSync(path.join(ROOT, resolved), 'utf8'))
        t.ok(heads.has(fragment), `${doc}: ${target}: ${resolved} has a heading #${fragment}`)
      }
      checked++
    }
  }
  t.ok(checked > 100, `${checked} links checked`)
})

t.test('each docs/ page starts with its title and a summary that links back to the README', async t => {
  for (const doc of DOCS.filter(d => d.startsWith('docs/') && d !== 'docs/errors.md')) {
    const [title, blank, summary] = fs.readFileSync(path.join(ROOT, doc), 'utf8').split('\n')
    t.match(title, /^# \S/, `${doc} starts with a title`)
    t.equal(blank, '', `${doc}: a blank line after the title`)
    t.match(summary, /\]\(\.\.\/README\.md\)/, `${doc}: the summary links back to the README`)
  }
})

t.test('code blocks are at most 100 columns wide', async t => {
  for (const doc of DOCS) {
    const { code } = split(fs.readFileSync(path.join(ROOT, doc), 'utf8'))
    const wide = code.filter(line => [...line].length > 100)
    t.same(wide, [], `${doc}: no code line over 100 columns`)
  }
})

t.test('the README stays a front page: at most 350 lines', async t => {
  const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').length
  t.ok(lines <= 350, `README.md has ${lines} lines`)
})

// A test that needs a tool skips, saying "TOOL is not installed" (or "TOOL not
// installed"); CONTRIBUTING.md lists each such tool, and .ci/run installs it.
t.test('every outside tool a test skips without is in CONTRIBUTING.md and .ci/run', async t => {
  const tools = new Set()
  const toolsAsked = text => { for (const [, tool] of text.matchAll(/\btool\('([a-z][a-z0-9-]*)'\)/g)) tools.add(tool) }
  for (const file of fs.readdirSync(path.join(ROOT, 'test')).filter(f => f.endsWith('.test.js') && f !== 'docs.test.js')) {
    const text = fs.readFileSync(path.join(ROOT, 'test', file), 'utf8')
    // A whole word, not an npm package's name after its scope (@grpc/grpc-js: a dev
    // dependency, which npm installs).
    for (const [, tool] of text.matchAll(/(?<![\w/@-])(?!is )([a-z][a-z0-9-]*)(?: with [^'`]*)?:? (?:is )?not installed/g)) tools.add(tool)
    // and those asked of test/fixtures/tools.js, whose skip says the same.
    toolsAsked(text)
  }
  // A fixture that runs a tool for the tests (promtool's check, htpasswd) asks it too.
  for (const file of fs.readdirSync(path.join(ROOT, 'test', 'fixtures')).filter(f => f.endsWith('.js') && f !== 'tools.js')) {
    toolsAsked(fs.readFileSync(path.join(ROOT, 'test', 'fixtures', file), 'utf8'))
  }
  t.ok(tools.size >= 10, `found the tools: ${[...tools].join(', ')}`)
  const contributing = fs.readFileSync(path.join(ROOT, 'CONTRIBUTING.md'), 'utf8')
  const ci = fs.readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8')
  for (const tool of tools) {
    // A row may name several tools one package brings (`redis-server`, `redis-cli`).
    t.match(contributing, new RegExp(`^\\| (\`[a-z0-9-]+\`, )*\`${tool}\`(, \`[a-z0-9-]+\`)* \\|`, 'm'), `CONTRIBUTING.md's tables list ${tool}`)
    t.match(ci, new RegExp(`\\b${tool}\\b`), `.ci/run installs ${tool}`)
  }
})

// CONTRIBUTING.md's "No sleeps in tests": a test waits on an event, or polls with
// `until` (test/fixtures/helpers.js). A pause of its own is the subject (a client's
// pace, a silence) or proves an absence, and a comment on its line or the line above
// says which.
t.test('no sleeps in tests: every pause in a test file says why', async t => {
  const pause = /setTimeout\(resolve\b|\bsleep\(\d|\bsleep\([^)]*\)\s*(\/\/|$)/
  const files = fs.readdirSync(path.join(ROOT, 'test')).filter(f => f.endsWith('.test.js'))
  const silent = []
  for (const file of files) {
    const lines = fs.readFileSync(path.join(ROOT, 'test', file), 'utf8').split('\n')
    lines.forEach((line, i) => {
      if (!pause.test(line) || /^\s*(const|function)\b/.test(line)) return
      if (!line.includes('//') && !/^\s*\/\//.test(lines[i - 1])) silent.push(`test/${file}:${i + 1}: ${line.trim()}`)
    })
  }
  t.same(silent, [], 'a pause without a comment: wait on an event or poll with until() instead')
})

// README's "Reading the code" says how big lib/ is: within a tenth of the truth.
t.test('README says about how many lines and files lib/ has', async t => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ')
  const claim = /lila is about ([\d,]+) lines in some (\d+) files under `lib\/`/.exec(readme)
  t.ok(claim, 'the sentence is in README.md')
  const files = []
  const walk = dir => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(full)
      else if (entry.name.endsWith('.js')) files.push(full)
    }
  }
  walk(path.join(ROOT, 'lib'))
  const lines = files.reduce((sum, file) => sum + fs.readFileSync(file, 'utf8').split('\n').length - 1, 0)
  const near = (said, real) => Math.abs(said - real) <= real / 10
  t.ok(near(Number(claim[1].replace(/,/g, '')), lines), `${lines} lines; README says about ${claim[1]}`)
  t.ok(near(Number(claim[2]), files.length), `${files.length} files; README says some ${claim[2]}`)
})
