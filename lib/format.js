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

// An injected fault (upstream/fault.js snapshot) in words, for the log, the status page
// and the dashboard: "error 503 on 50% (25s left)", "delay 2s then reset (until
// cleared)". `now` (ms since the epoch) says what is left; null leaves it out.
function describeFault (fault, now = null) {
  const what = []
  if (fault.delayMs > 0) what.push(`delay ${formatDuration(fault.delayMs)}`)
  if (fault.errorStatus > 0) what.push(`error ${fault.errorStatus}`)
  if (fault.reset) what.push('reset')
  let text = what.join(' then ')
  if (fault.rate < 1) text += ` on ${Math.round(fault.rate * 1000) / 10}%`
  if (now === null) return text
  if (fault.endsAt === null) return `${text} (until cleared)`
  return `${text} (${Math.ceil(Math.max(0, fault.endsAt - now) / 1000)}s left)`
}

// { cookie: 'SID' } -> "cookie=SID", null -> null: --sticky as it is written.
function formatSticky (sticky) {
  return sticky === null ? null : `cookie=${sticky.cookie}`
}

// --mirror (config/parsers.js parseMirror, or a snapshot's) in words: "127.0.0.1:9000",
// "127.0.0.1:9000 (10%)".
function describeMirror ({ address, percent }) {
  return percent < 100 ? `${address} (${percent}%)` : address
}

module.exports = { formatDuration, formatPorts, describeFault, formatSticky, describeMirror }
