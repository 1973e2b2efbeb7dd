'use strict'

const fs = require('fs')
const { descriptorLimit } = require('../descriptors')

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
    maxFds: descriptorLimit()
  }
}

function countOpenFds () {
  try {
    return fs.readdirSync('/proc/self/fd').length
  } catch {
    return null // no /proc: not reported
  }
}

module.exports = { processStats }
