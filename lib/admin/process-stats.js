'use strict'

const fs = require('fs')

// The standard process_* figures of Prometheus' client libraries, for /metrics: from
// /proc where there is one (Linux), from process.* otherwise. Read when scraped. With
// --workers, they are the primary's own (each worker is its own process).
function processStats () {
  const cpu = process.cpuUsage()
  return {
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    residentBytes: process.memoryUsage.rss(),
    startTime: Date.now() / 1000 - process.uptime(),
    openFds: countOpenFds(),
    maxFds: maxFds()
  }
}

function countOpenFds () {
  try {
    return fs.readdirSync('/proc/self/fd').length
  } catch {
    return null // no /proc: not reported
  }
}

// The soft limit of open files ("Max open files  1024  524288  files").
function maxFds () {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find(l => l.startsWith('Max open files'))
    const soft = line === undefined ? NaN : Number(line.slice(14).trim().split(/\s+/)[0])
    return Number.isFinite(soft) ? soft : null
  } catch {
    return null
  }
}

module.exports = { processStats }
