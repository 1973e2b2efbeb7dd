'use strict'

// lila on each Node line it is tested on (22, 24, 26) against Node 20: the same ./lila
// run by two Nodes at once (bench/ab.js: two lilas side by side, one backend each, the
// same client on both in the same interval, each one's CPU time per request from
// /proc), so that the shared machine's noise falls on both alike; run one after the
// other, the two would differ by the neighbours more than by V8. The rows: W1's shape
// (HTTP/1.1 keep-alive clients, wrk) and H1's (HTTP/2 clients, h2load -c10 -m10), each
// to HTTP/1.1 and to h2c backends. The newer Nodes are the npm registry's binaries in
// .tools/nodeN (CONTRIBUTING.md); one that is missing is skipped.
//
//   node bench/nodes.js [--rounds 4] [--seconds 5] [--versions 22,24,26]
//
// Writes bench/RESULTS-nodes.md, and its summary as the last section of bench/RESULTS.md.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')
const { parseArgs } = require('util')

const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '5' },
    versions: { type: 'string', default: '22,24,26' }
  }
})
const ROOT = path.join(__dirname, '..')
const LILA = path.join(ROOT, 'lila')
const ROWS = [
  { title: 'W1: HTTP/1.1 clients (wrk), HTTP/1.1 backends', flags: [] },
  { title: 'W1h2: HTTP/1.1 clients (wrk), h2c backends', flags: ['--backend-protocol', 'h2'] },
  { title: 'H1: HTTP/2 clients (h2load), HTTP/1.1 backends', flags: ['--client', 'h2load'] },
  { title: 'H1: HTTP/2 clients (h2load), h2c backends', flags: ['--client', 'h2load', '--backend-protocol', 'h2'] }
]
const arch = os.arch() === 'arm64' ? 'arm64' : 'x64'
const nodeOf = version => path.join(ROOT, '.tools', `node${version}`, 'node_modules', `node-linux-${arch}`, 'bin', 'node')

// An executable that runs ./lila on `node` (ab.js starts lilas by path).
function runner (dir, name, node) {
  const file = path.join(dir, `lila-${name}`)
  fs.writeFileSync(file, `#!/bin/sh\nexec ${node} ${LILA} "$@"\n`, { mode: 0o755 })
  return file
}

const median = list => {
  const sorted = list.slice().sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

function main () {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-nodes-'))
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  const base = runner(dir, 'base', process.execPath)
  const baseVersion = process.version
  const versions = opts.versions.split(',').filter(v => fs.existsSync(nodeOf(v)))
  const missing = opts.versions.split(',').filter(v => !versions.includes(v))
  const exact = {}
  const ratios = {} // version -> row title -> new/old per round
  const loads = []
  for (const v of versions) {
    exact[v] = spawnSync(nodeOf(v), ['--version'], { encoding: 'utf8' }).stdout.trim()
    const other = runner(dir, v, nodeOf(v))
    for (const row of ROWS) {
      loads.push(os.loadavg()[0])
      const r = spawnSync('node', [path.join(__dirname, 'ab.js'), base, other, opts.rounds, opts.seconds, ...row.flags],
        { cwd: ROOT, encoding: 'utf8', timeout: 600000 })
      const rounds = [...(r.stdout || '').matchAll(/new\/old (\d+\.\d+)/g)].map(m => Number(m[1]))
      if (rounds.length === 0) throw new Error(`ab.js, Node ${exact[v]}, ${row.title}: ${(r.stderr || r.stdout || '').trim().slice(-300)}`)
      ;(ratios[v] ||= {})[row.title] = rounds
      process.stderr.write(`${exact[v]} / ${baseVersion}, ${row.title}: ${rounds.map(x => x.toFixed(3)).join(' ')}\n`)
    }
  }
  const date = new Date().toISOString().slice(0, 10)
  const lines = [
    '# lila on each Node line', '',
    `\`node bench/nodes.js --rounds ${opts.rounds} --seconds ${opts.seconds}\`, ${date}, ${os.cpus().length} cores, ` +
      `${baseVersion} against ${versions.map(v => exact[v]).join(', ')}${missing.length ? ` (not installed: ${missing.join(', ')})` : ''}; ` +
      `1-minute load average ${Math.min(...loads).toFixed(1)} to ${Math.max(...loads).toFixed(1)}.`,
    '',
    `Each cell: lila's CPU time per request on that Node over the same lila's on ${baseVersion}, both run at once ` +
      '(bench/ab.js), the median of the rounds (each round\'s in brackets); under 1, cheaper on the newer Node. ' +
      'Two lilas on the same Node differ by 0.97 to 1.03 here (bench/README.md).',
    '',
    `| row | ${versions.map(v => exact[v]).join(' | ')} |`,
    `|---|${versions.map(() => '---').join('|')}|`
  ]
  for (const row of ROWS) {
    lines.push(`| ${row.title} | ${versions.map(v => {
      const rounds = ratios[v][row.title]
      return `**${median(rounds).toFixed(2)}** (${rounds.map(x => x.toFixed(2)).join(', ')})`
    }).join(' | ')} |`)
  }
  const words = versions.map(v => {
    const m = median(ROWS.map(row => median(ratios[v][row.title])))
    const how = m < 0.95 ? 'cheaper' : m > 1.05 ? 'dearer' : 'within the noise'
    return `${exact[v]} ${m.toFixed(2)}× (${how})`
  })
  lines.push('', `The median of the rows, lila's CPU per request against ${baseVersion}: ${words.join('; ')}.`)
  const text = lines.join('\n') + '\n'
  fs.writeFileSync(path.join(__dirname, 'RESULTS-nodes.md'), text)
  process.stdout.write(text)

  // The summary, as the last section of RESULTS.md (run.js keeps it when it writes again).
  const results = path.join(__dirname, 'RESULTS.md')
  const old = fs.readFileSync(results, 'utf8')
  const at = old.indexOf('\n## Node versions\n')
  const section = `\n## Node versions\n\nFrom \`node bench/nodes.js\` (${date}; the table in [RESULTS-nodes.md](RESULTS-nodes.md)): ` +
    'the same lila on two Nodes at once, W1\'s and H1\'s shapes, HTTP/1.1 and h2c backends; lila\'s CPU per request ' +
    `against ${baseVersion}: ${words.join('; ')}.\n`
  fs.writeFileSync(results, (at === -1 ? old.replace(/\n*$/, '\n') : old.slice(0, at + 1)) + section)
}

main()
