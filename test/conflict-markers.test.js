'use strict'

// No merge conflict marker is ever committed (one reached main twice, in
// Formula/lila.rb): every file git tracks is read for a line that opens, divides or
// closes a conflict. The markers are written here by repetition, so that this file
// holds none.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { execFileSync } = require('child_process')

const ROOT = path.join(__dirname, '..')
const MARKER = new RegExp(`^(${'<'.repeat(7)}|${'>'.repeat(7)})( |$)|^${'='.repeat(7)}$|^${'\\|'.repeat(7)} `)

// The lines of `text` that are conflict markers, as "LINE: text".
function markers (text) {
  const found = []
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) if (MARKER.test(lines[i].replace(/\r$/, ''))) found.push(`${i + 1}: ${lines[i]}`)
  return found
}

t.test('no file git tracks holds a conflict marker', async t => {
  let files
  try {
    files = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean)
  } catch {
    return t.skip('not a git checkout: nothing committed to read')
  }
  t.ok(files.length > 100, `git's files were read (${files.length})`)
  const found = []
  for (const file of files) {
    const full = path.join(ROOT, file)
    let stat
    try {
      stat = fs.lstatSync(full)
    } catch {
      continue // deleted in the work tree, not yet in a commit
    }
    if (!stat.isFile()) continue
    const bytes = fs.readFileSync(full)
    if (bytes.includes(0)) continue // binary
    for (const line of markers(bytes.toString('utf8'))) found.push(`${file}:${line}`)
  }
  t.same(found, [], 'conflict markers')
})

t.test('the check finds each marker, and no look-alike', async t => {
  const text = ['a', `${'<'.repeat(7)} HEAD`, 'b', '='.repeat(7), 'c', `${'>'.repeat(7)} 1234567 (a commit)`,
    `${'|'.repeat(7)} base`, '='.repeat(8), `${'<'.repeat(6)} x`, 'x ' + '='.repeat(7), `${'>'.repeat(7)}\r`].join('\n')
  t.same(markers(text).map(line => Number(line.split(':')[0])), [2, 4, 6, 7, 11])
})
