'use strict'

// Every name a module of lib/ exports is imported somewhere (lib/, test/, bench/ or
// scripts/): scripts/dead-exports.js finds those that are not.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { deadExports } = require('../scripts/dead-exports')
const { tmpDir } = require('./fixtures/tmp')

t.test('no module of lib/ exports a name nothing imports', async t => {
  t.same(deadExports(), [])
})

t.test('the check finds a name nothing imports, and sees the ways one is imported', async t => {
  const root = tmpDir(t, 'lila-exports-')
  const write = (file, text) => {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
    fs.writeFileSync(path.join(root, file), text)
  }
  write('lib/a.js', 'module.exports = {\n  used, // a comment\n  property,\n  dead,\n  renamed: x,\n  chained\n}\n')
  write('lib/b.js', "const { used, renamed: y } = require('./a')\nconst a = require('./a')\na.property()\n" +
    "require('./a').chained\n")
  write('lib/c.js', 'module.exports = { handedOn }\n')
  write('test/c.test.js', "const c = require('../lib/c')\nuse(c)\n") // the object handed on: all used
  t.same(deadExports(root), ['lib/a.js: dead'])
})
