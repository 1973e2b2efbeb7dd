'use strict'

// What every parser of config/ shares (pure): quoting a value in a message, naming the
// flag it came from, durations, whole numbers, ports and Unix socket paths.

const { UsageError } = require('../errors')

const MAX_TIMER_MS = 2147483647 // setTimeout's ceiling, about 24.8 days
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/
const UNIT_MS = { ms: 1, s: 1000, m: 60000, h: 3600000 }
// The longest path a Unix socket address holds (sun_path, less its ending zero byte).
const MAX_SOCKET_PATH = process.platform === 'linux' ? 107 : 103

const quote = value => JSON.stringify(String(value))
// Parsers name the flag a value came from; a value from the JSON file is named by its
// path instead (flag null), which the caller puts in front of the message.
const forFlag = flag => flag ? ` for ${flag}` : ''

function parseDuration (text, flag, min = 0) {
  const match = DURATION.exec(text)
  if (!match) {
    throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: ` +
      'expected a number with a unit, e.g. 500ms, 2s or 1m')
  }
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2]])
  if (ms < min) throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: expected at least ${min}ms`)
  if (ms > MAX_TIMER_MS) throw new UsageError(`invalid duration ${quote(text)}${forFlag(flag)}: expected at most 24d`)
  return ms
}

function parseInteger (text, flag, min, max, expected) {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new UsageError(`invalid value ${quote(text)}${forFlag(flag)}: expected ${expected}`)
  }
  return Number(text)
}

// What is wrong with a Unix socket's path, in words after "expected", or null.
function socketPathProblem (path, example) {
  if (!path.startsWith('/')) return `unix: and an absolute path, e.g. unix:/run/${example}`
  if (path.endsWith('/')) return `the path of a socket file after unix:, not a folder, e.g. unix:/run/${example}`
  if (path.includes('\0')) return 'a path without a NUL byte after unix:'
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    return `a path of at most ${MAX_SOCKET_PATH} bytes after unix: (what a Unix socket address holds here)`
  }
  return null
}

const isPort = text => /^\d+$/.test(text) && Number(text) >= 1 && Number(text) <= 65535

function range (from, to) {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i)
}

module.exports = { quote, forFlag, parseDuration, parseInteger, socketPathProblem, isPort, range, DURATION }
