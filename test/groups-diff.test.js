'use strict'

// What a reload changes in a membership's groups (upstream/groups-diff.js), as a table.

const t = require('tap')
const { diffGroups } = require('../lib/upstream/groups-diff')
const { Group } = require('../lib/upstream/group')

const spec = (host, port, more = {}) => ({ host, port, weight: 1, backup: false, ...more })

t.test('groups are matched to the new specs by how they were given', async t => {
  const a = new Group(spec('127.0.0.1', 3001))
  const b = new Group(spec('127.0.0.1', 3002))
  const range = new Group(spec('127.0.0.1', 3000, { range: { first: 3000, last: 3009 } }))
  const cases = [
    ['nothing changes', [a, b], [a.spec, b.spec], [a, b], []],
    ['one added', [a], [a.spec, b.spec], [a, null], []],
    ['one removed', [a, b], [b.spec], [b], [a]],
    ['new settings, the same group', [a], [spec('127.0.0.1', 3001, { weight: 5 })], [a], []],
    ['the order of the new config', [a, b], [b.spec, a.spec], [b, a], []],
    ['a name given twice: the second joins', [a], [a.spec, a.spec], [a, null], []],
    ['a port range changed: a new group', [range], [spec('127.0.0.1', 3000, { range: { first: 3000, last: 3019 } })], [null], [range]]
  ]
  for (const [name, groups, specs, matched, removed] of cases) {
    const diff = diffGroups(groups, specs)
    t.same(diff.matched.map(m => m.group), matched, `${name}: matched`)
    t.same(diff.matched.map(m => m.spec), specs, `${name}: every spec, in order`)
    t.same(diff.removed, removed, `${name}: removed`)
  }
})
