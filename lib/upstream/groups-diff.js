'use strict'

const { specAddress } = require('../address')

// What a reload changes in a membership's groups (group.js), before anything is
// touched (pure): each spec of the new config matched, by how it was given, to the group
// in force given so.
//   diffGroups(groups, specs) -> { matched: [{ spec, key, group }], removed: [group] }
//     group: the group in force with the spec's key, or null for a spec that joins;
//     removed: the groups in force that no spec names any more.
function diffGroups (groups, specs) {
  const old = new Map(groups.map(group => [group.key, group]))
  const matched = specs.map(spec => {
    const key = specAddress(spec)
    const group = old.get(key)
    if (group === undefined) return { spec, key, group: null }
    old.delete(key)
    return { spec, key, group }
  })
  return { matched, removed: [...old.values()] }
}

module.exports = { diffGroups }
