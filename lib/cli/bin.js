'use strict'

// The process glue, and the only place that touches process.exit.
const { main } = require('./main')

// A reader that went away (lila --help | head) is not an error worth a stack trace.
process.stdout.on('error', err => { if (err.code !== 'EPIPE') throw err })

process.on('uncaughtException', err => {
  try {
    process.stderr.write(`lila: internal error: ${err && err.message}\n`)
    if (process.env.LILA_DEBUG) process.stderr.write(`${err && err.stack}\n`)
  } finally {
    process.exit(1)
  }
})

// This process is lila's own: it may give memory back once traffic stops (heap.js).
main(process.argv.slice(2), { collectIdle: true, program: process.argv[1] }).then(code => {
  process.exitCode = code
  // Everything is closed by now, so the process ends by itself; if some handle is
  // still open, do not hang on it.
  setTimeout(() => process.exit(code), 1000).unref()
}, err => {
  process.stderr.write(`lila: internal error: ${err && err.message}\n`)
  process.exit(1)
})
