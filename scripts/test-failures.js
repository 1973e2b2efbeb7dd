#!/usr/bin/env node
'use strict'

// After a failed `tap` run: the failing test files and, under each, the failing
// assertions with the subtests they are in, read from what tap keeps of the run
// (.tap/test-results/<file>.tap). It prints them last, so that a CI log ends with what
// failed rather than with npm's "command failed", and exits 1: it only runs when the
// run failed. (The full TAP output is above it, for the details.) With --forget, before
// a run: the results of earlier runs are removed (tap leaves those of files it did not
// run this time), so that none is taken for this run's.

const fs = require('fs')
const path = require('path')

const RESULTS = path.join(__dirname, '..', '.tap', 'test-results')

function resultFiles (dir) {
  let entries
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true })
  } catch {
    return []
  }
  return entries.flatMap(entry => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return resultFiles(full)
    return entry.name.endsWith('.tap') ? [full] : []
  }).sort()
}

// The failing points of one file's TAP: each "not ok" that is not a todo or a skip and
// has no failing point inside it, as "subtest > subtest > assertion".
function failuresOf (tap) {
  const failures = []
  const open = [] // [indent, name] of the subtests the current line is in
  for (const line of tap.split('\n')) {
    const indent = line.length - line.trimStart().length
    const subtest = /^\s*# Subtest: (.*)$/.exec(line)
    const result = /^\s*(not )?ok \d+ - (.*?)(?: # time=[\d.]+m?s)?$/.exec(line)
    if (!subtest && !result) continue
    // A subtest's comment and its result line share its indent; inside it is deeper.
    while (open.length > 0 && open[open.length - 1][0] >= indent) open.pop()
    if (subtest) open.push([indent, subtest[1]])
    if (!result || !result[1] || /# (TODO|SKIP)\b/i.test(line)) continue
    const point = [...open.map(([, name]) => name), result[2]].join(' > ')
    // A subtest's own "not ok" repeats what failed inside it: keep the innermost.
    if (!failures.some(failure => failure.startsWith(point + ' > '))) failures.push(point)
  }
  // A file killed or crashed before its end has no plan of its own.
  if (!/^1\.\.\d+/m.test(tap)) failures.push('(it ended before its plan: a crash, an exit or tap\'s timeout)')
  return failures
}

function main () {
  const failed = []
  for (const file of resultFiles(RESULTS)) {
    const failures = failuresOf(fs.readFileSync(file, 'utf8'))
    if (failures.length > 0) failed.push([path.relative(RESULTS, file).replace(/\.tap$/, ''), failures])
  }
  const out = ['', '# What failed']
  if (failed.length === 0) out.push('#   no failing assertion in .tap/test-results (a lint error, a crash before tap?)')
  for (const [file, failures] of failed) {
    out.push(`# ${file}`)
    for (const failure of failures) out.push(`#   ${failure}`)
  }
  console.log(out.join('\n'))
  process.exitCode = 1
}

if (require.main === module) {
  if (process.argv[2] === '--forget') fs.rmSync(RESULTS, { recursive: true, force: true })
  else main()
}

module.exports = { failuresOf }
