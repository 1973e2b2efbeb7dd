'use strict'

const LEVELS = { error: 0, warn: 1, info: 2, debug: 3 }

// The one logger. Messages go to stderr as "lila: <message>", one line each; messages
// below the chosen level cost one comparison. Write errors (a closed pipe) are ignored:
// losing a log line must never take the balancer down.
// `prefix` ("worker 2") goes before every message; setLevel() applies a reloaded
// --log-level.
function createLogger ({ level = 'info', stderr, prefix = '' }) {
  let threshold = LEVELS[level]
  const lead = prefix ? `lila: ${prefix}: ` : 'lila: '
  const write = line => {
    try {
      stderr.write(`${lead}${line}\n`)
    } catch {}
  }
  return {
    setLevel: name => { threshold = LEVELS[name] },
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

// The same logger, its messages led by prefix() (a listener's name) unless it returns
// null: whether a name is worth showing can change with a reload. A logger given to
// createBalancer() may lack enabled(): then every level is, and its functions decide.
function prefixed (log, prefix) {
  const lead = message => {
    const p = prefix()
    return p === null ? message : `${p}: ${message}`
  }
  const enabled = typeof log.enabled === 'function' ? log.enabled : everyLevel
  return {
    enabled,
    error: message => log.error(lead(message)),
    warn: message => log.warn(lead(message)),
    info: message => log.info(lead(message)),
    debug: message => { if (enabled('debug')) log.debug(lead(message)) }
  }
}

function everyLevel () {
  return true
}

// An error that can repeat thousands of times a second (accept failing for lack of
// descriptors): said at once, then at most once a second with how often it recurred.
function throttled (say, everyMs = 1000, now = Date.now) {
  let last = -Infinity
  let quiet = 0
  return message => {
    const t = now()
    if (t - last < everyMs) {
      quiet++
      return
    }
    say(quiet > 0 ? `${message} (and ${quiet} more like it in the last ${Math.round((t - last) / 1000)}s)` : message)
    last = t
    quiet = 0
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

module.exports = { createLogger, throttled, prefixed, silentLogger, formatTable }
