'use strict'

// ARCHITECTURE.md's tree of lib/ matches lib/: every file in lib/ is named in it, and
// every file it names exists. (A file's line: its name at the indentation of its
// folder's entries, several names on a line where it lists them so.)

const t = require('tap')
const fs = require('fs')
const path = require('path')

const ROOT = path.join(__dirname, '..')

// lib/'s files as the tree names them: 'lib/proxy/tcp.js', ...
function treeFiles (text) {
  const block = text.split('## Layout')[1].split('```')[1].split('\n')
  const start = block.indexOf('lib/')
  const folders = []
  const files = []
  for (const line of block.slice(start + 1)) {
    const indent = line.length - line.trimStart().length
    if (indent === 0 || indent % 2 !== 0 || indent > 12) continue // a description's line
    const level = indent / 2 - 1
    const names = []
    for (const word of line.trim().split(/ {2,}/)[0].split(' ')) {
      if (!/^[\w.-]+(\.js|\/)$/.test(word)) break
      names.push(word)
    }
    for (const name of names) {
      if (name.endsWith('/')) {
        folders[level] = name.slice(0, -1)
        folders.length = level + 1
      } else {
        files.push(['lib', ...folders.slice(0, level), name].join('/'))
      }
    }
  }
  return files
}

function libFiles (dir = 'lib') {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap(entry =>
    entry.isDirectory() ? libFiles(`${dir}/${entry.name}`) : entry.name.endsWith('.js') ? [`${dir}/${entry.name}`] : [])
}

t.test('ARCHITECTURE.md names every file in lib/, and only files that exist', async t => {
  const named = treeFiles(fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8'))
  const real = libFiles()
  t.ok(named.length > 100, `the tree was read (${named.length} files)`)
  t.same(real.filter(file => !named.includes(file)), [], 'files in lib/ the tree does not name')
  t.same(named.filter(file => !real.includes(file)), [], 'files the tree names that do not exist')
})

// No lib/ file over ~400 lines (CONTRIBUTING): past LINES_BOUND a file holds two concerns
// and one of them leaves along its seam. options.js is the one OPTIONS table by design.
const LINES_BOUND = 420
const OVER_BOUND = new Map([
  ['lib/config/options.js', 'the OPTIONS table: one table by design']
])

t.test(`no lib/ file is over ${LINES_BOUND} lines`, async t => {
  const files = libFiles()
  const over = files.filter(file => !OVER_BOUND.has(file))
    .map(file => [file, fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n').length - 1])
    .filter(([, lines]) => lines > LINES_BOUND)
  t.same(over, [], `files over ${LINES_BOUND} lines: split each along a seam`)
  t.same([...OVER_BOUND.keys()].filter(file => !files.includes(file)), [], 'exceptions that are no longer files')
})

// The map is what a newcomer reads first (issue 36): the choices made, with why, are
// docs/design.md's, so it stays short enough to read.
t.test('ARCHITECTURE.md is at most 750 lines', async t => {
  const lines = fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8').split('\n').length - 1
  t.ok(lines <= 750, `ARCHITECTURE.md has ${lines} lines`)
})
