'use strict'

// Formatting shared by the config side (--help, the reload log) and the runtime:
// nothing here parses or checks.

// 30000 -> "30s", 1500 -> "1500ms": the way a duration is written on the command line.
function formatDuration (ms) {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

module.exports = { formatDuration }
