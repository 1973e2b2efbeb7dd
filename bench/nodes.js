'use strict'

// lila on each Node line it is tested on (20, 22, 24, 26): the HTTP/1.1 row (W1) and
// the HTTP/2 rows (H1, to HTTP/1.1 and to h2c backends) of bench/run.js, lila beside
// HAProxy, once per Node in turn for a few rounds (so that the machine's noise falls on
// every version alike). The figure compared is lila's CPU per request over HAProxy's
// in the same run, a ratio the machine's speed and load mostly cancel out of; then each
// Node's over Node 20's. Node 20 is the `node` on the PATH; the others are the npm
// registry's binaries in .tools/nodeN (CONTRIBUTING.md), skipped when missing.
//
//   node bench/nodes.js [--rounds 3] [--seconds 3] [--versions 20,22,24,26]
//
// Writes bench/RESULTS-nodes.md and its summary as the last section of bench/RESULTS.md.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')
const { parseArgs } = require('util')

const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '3' },
    versions: { type: 'string', default: '20,22,24,26' }
  }
})
const ROOT = path.join(__dirname, '..')
const ROWS = [
  { key: 'W1 undefined', title: 'W1: HTTP/1.1 keep-alive, 50 connections' },
  { key: 'H1 h1', title: 'H1: HTTP/2 clients to HTTP/1.1 backends' },
  { key: 'H1 h2', title: 'H1: HTTP/2 clients to h2c backends' }
]
const arch = os.arch() === 'arm64' ? 'arm64' : 'x64'

// The PATH directory holding Node `version`'s binary, or null when it is not installed.
function binFor (version) {
  if (version === '20') return null // the machine's own
  const bin = path.join(ROOT, '.tools', `node${version}`, 'node_modules', `node-linux-${arch}`, 'bin')
  return fs.existsSync(path.join(bin, 'node')) ? bin : undefined
}

function runOnce (version, bin) {
  const json = path.join(os.tmpdir(), `lila-nodes-${process.pid}-${version}.json`)
  const env = bin ? { ...process.env, PATH: `${bin}:${process.env.PATH}` } : process.env
  const args = ['bench/run.js', '--quick', '--seconds', opts.seconds, '--only', 'W1,H1',
    '--contenders', 'lila-http,haproxy-http', '--no-probes', '--json', json]
  const r = spawnSync('node', args, { cwd: ROOT, env, encoding: 'utf8', timeout: 600000 })
  if (r.status !== 0) throw new Error(`bench/run.js on Node ${version}: ${(r.stderr || '').trim().split('\n').slice(-3).join(' | ')}`)
  const { meta, cells } = JSON.parse(fs.readFileSync(json, 'utf8'))
  fs.rmSync(json, { force: true })
  const out = {}
  for (const c of cells) {
    if (c.status !== 'ok' || c.lbCpuUsPerReq == null) continue
    const key = `${c.workload} ${c.backendProtocol}`
    out[key] = out[key] || {}
    out[key][c.contender] = c.lbCpuUsPerReq
  }
  return { out, load: meta.loadAverage }
}

const median = list => list.slice().sort((a, b) => a - b)[Math.floor(list.length / 2)]

function main () {
  const versions = opts.versions.split(',')
  const bins = Object.fromEntries(versions.map(v => [v, binFor(v)]))
  const missing = versions.filter(v => bins[v] === undefined)
  const present = versions.filter(v => bins[v] !== undefined)
  const exact = Object.fromEntries(present.map(v => [v, spawnSync(bins[v] ? path.join(bins[v], 'node') : 'node', ['--version'], { encoding: 'utf8' }).stdout.trim()]))
  const ratios = {} // version -> row -> [lila µs/req ÷ HAProxy's, per round]
  const loads = []
  for (let round = 0; round < Number(opts.rounds); round++) {
    for (const v of present) {
      const { out, load } = runOnce(v, bins[v])
      loads.push(load)
      for (const row of ROWS) {
        const cell = out[row.key]
        if (!cell || !cell['lila-http'] || !cell['haproxy-http']) continue
        ((ratios[v] ||= {})[row.key] ||= []).push(cell['lila-http'] / cell['haproxy-http'])
        process.stderr.write(`round ${round + 1}, Node ${exact[v]}, ${row.key}: lila ${cell['lila-http'].toFixed(1)} µs/req, ` +
          `HAProxy ${cell['haproxy-http'].toFixed(1)}\n`)
      }
    }
  }
  const base = present[0]
  const lines = [
    '# lila on each Node line', '',
    `\`node bench/nodes.js --rounds ${opts.rounds} --seconds ${opts.seconds}\`, ${new Date().toISOString().slice(0, 10)}, ` +
      `${os.cpus().length} cores, ${present.map(v => exact[v]).join(', ')}${missing.length ? ` (not installed: ${missing.join(', ')})` : ''}.`,
    '',
    'Each cell: lila\'s CPU per request over HAProxy\'s in the same run (the median of the rounds; lower is better), ' +
      `then that ratio over Node ${base}'s (under 1: faster on that Node). Rows of bench/run.js --quick, lila and HAProxy only.`,
    '',
    `| row | ${present.map(v => `Node ${v}`).join(' | ')} |`,
    `|---|${present.map(() => '---').join('|')}|`
  ]
  const summary = []
  for (const row of ROWS) {
    const cells = present.map(v => {
      const list = ratios[v] && ratios[v][row.key]
      if (!list) return 'n/a'
      const m = median(list)
      const b = ratios[base] && ratios[base][row.key] ? median(ratios[base][row.key]) : null
      return v === base || b === null ? `${m.toFixed(2)}× HAProxy` : `${m.toFixed(2)}× HAProxy, ${(m / b).toFixed(2)}× Node ${base}`
    })
    lines.push(`| ${row.title} | ${cells.join(' | ')} |`)
    for (const v of present.slice(1)) {
      const list = ratios[v] && ratios[v][row.key]
      const b = ratios[base] && ratios[base][row.key]
      if (list && b) summary.push({ v, row: row.title, change: median(list) / median(b) })
    }
  }
  lines.push('', `Load averages (1 minute) of the runs: ${loads.join('; ')}.`)
  const text = lines.join('\n') + '\n'
  fs.writeFileSync(path.join(__dirname, 'RESULTS-nodes.md'), text)
  process.stdout.write(text)

  // The summary, as the last section of RESULTS.md (run.js keeps it when it writes again).
  const words = present.slice(1).map(v => {
    const mine = summary.filter(s => s.v === v).map(s => s.change)
    if (mine.length === 0) return null
    const m = median(mine)
    const how = m < 0.95 ? 'faster' : m > 1.05 ? 'slower' : 'about as fast'
    return `Node ${v}: lila's CPU per request ${m.toFixed(2)}× Node ${base}'s (median of the rows: ${how})`
  }).filter(Boolean)
  const results = path.join(__dirname, 'RESULTS.md')
  const old = fs.readFileSync(results, 'utf8')
  const at = old.indexOf('\n## Node versions\n')
  const section = `\n## Node versions\n\nFrom \`node bench/nodes.js\` (${new Date().toISOString().slice(0, 10)}; the table in ` +
    '[RESULTS-nodes.md](RESULTS-nodes.md)), HTTP/1.1 and HTTP/2 rows, lila\'s CPU per request relative to HAProxy\'s in ' +
    `the same run: ${words.join('; ')}.\n`
  fs.writeFileSync(results, (at === -1 ? old.replace(/\n*$/, '\n') : old.slice(0, at + 1)) + section)
}

main()
