'use strict'

// Formatting shared by the config side (--help, the reload log) and the runtime:
// nothing here parses or checks.

// 30000 -> "30s", 1500 -> "1500ms": the way a duration is written on the command line.
function formatDuration (ms) {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

// [3000, 3001, 3002, 3005] -> "3000-3002, 3005": ascending ports in runs, for people.
function formatPorts (ports) {
  const runs = []
  for (const port of ports) {
    const run = runs[runs.length - 1]
    if (run !== undefined && run[1] === port - 1) run[1] = port
    else runs.push([port, port])
  }
  return runs.map(([a, b]) => a === b ? String(a) : `${a}-${b}`).join(', ')
}

// { cookie: 'SID' } -> "cookie=SID", null -> null: --sticky as it is written.
function formatSticky (sticky) {
  return sticky === null ? null : `cookie=${sticky.cookie}`
}

module.exports = { formatDuration, formatPorts, formatSticky }
