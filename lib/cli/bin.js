'use strict'

// The process glue, and the only place that touches process.exit.

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

const argv = process.argv.slice(2)
// `lila --version` alone is answered before the rest of lila loads (main.js answers it
// too): then it costs little more than `node -e 0` (bench/startup.js).
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === 'version')) {
  process.stdout.write(`lila ${require('../version')}\n`)
} else {
  run()
}

// This process is lila's own: it may give memory back once traffic stops (heap.js).
function run () {
  require('./main').main(argv, { collectIdle: true, program: process.argv[1] }).then(code => {
    process.exitCode = code
    // Everything is closed by now, so the process ends by itself; if some handle is
    // still open, do not hang on it.
    setTimeout(() => process.exit(code), 1000).unref()
  }, err => {
    process.stderr.write(`lila: internal error: ${err && err.message}\n`)
    process.exit(1)
  })
}
