'use strict'

const LEVELS = { error: 0, warn: 1, info: 2, debug: 3 }

// The one logger. Messages go to stderr as "lila: <message>", one line each; messages
// below the chosen level cost one comparison. Write errors (a closed pipe) are ignored:
// losing a log line must never take the balancer down.
function createLogger ({ level = 'info', stderr }) {
  const threshold = LEVELS[level]
  const write = line => {
    try {
      stderr.write(`lila: ${line}\n`)
    } catch {}
  }
  return {
    level,
    enabled: name => LEVELS[name] <= threshold,
    error: message => { if (threshold >= 0) write(message) },
    warn: message => { if (threshold >= 1) write(message) },
    info: message => { if (threshold >= 2) write(message) },
    debug: message => { if (threshold >= 3) write(message) },
    // Whatever the level: the line saying where lila listens (scripts using --port 0
    // read the port from it).
    always: write
  }
}

// Rows of cells -> lines with the columns aligned (the start-up table).
function formatTable (rows) {
  const widths = []
  for (const row of rows) row.forEach((cell, i) => { widths[i] = Math.max(widths[i] || 0, cell.length) })
  return rows.map(row => row.map((cell, i) => i === row.length - 1 ? cell : cell.padEnd(widths[i] + 2)).join(''))
}

// For the programmatic API and tests that want silence.
const silentLogger = createLogger({ level: 'error', stderr: { write () {} } })

module.exports = { createLogger, silentLogger, formatTable, LEVELS }
