'use strict'

// W3C Trace Context (https://www.w3.org/TR/trace-context/): the traceparent field, read
// and written, and random trace and span IDs. Pure but for the random IDs; used by
// --trace (proxy/edge/trace.js) and by the spans of --otlp (telemetry/).
//
//   parseTraceparent(value) -> { traceId, parentId, flags } or null
//   traceparentOf(traceId, spanId, sampled) -> '00-...-...-01'
//   randomTraceId(), randomSpanId() -> hex (never all zeros)

const crypto = require('crypto')

const HEX = /^[0-9a-f]+$/
const ZEROS_32 = '0'.repeat(32)
const ZEROS_16 = '0'.repeat(16)

function parseTraceparent (value) {
  // version "-" trace-id "-" parent-id "-" flags: 2, 32, 16 and 2 lower-case hex digits.
  // A later version may add fields after a "-"; version 00 is exactly this, ff is none.
  if (typeof value !== 'string' || value.length < 55) return null
  const version = value.slice(0, 2)
  if (version === 'ff' || (version === '00' && value.length !== 55) || (value.length > 55 && value[55] !== '-')) {
    return null
  }
  if (value[2] !== '-' || value[35] !== '-' || value[52] !== '-') return null
  const traceId = value.slice(3, 35)
  const parentId = value.slice(36, 52)
  const flags = value.slice(53, 55)
  if (!HEX.test(version) || !HEX.test(traceId) || !HEX.test(parentId) || !HEX.test(flags)) return null
  if (traceId === ZEROS_32 || parentId === ZEROS_16) return null
  return { traceId, parentId, flags }
}

function traceparentOf (traceId, spanId, sampled) {
  return `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`
}

const randomTraceId = () => randomHex(16, ZEROS_32)
const randomSpanId = () => randomHex(8, ZEROS_16)

// Random IDs from a pool refilled a few KiB at a time, kept as hex: crypto's generator
// and one conversion per refill, not a call into either per ID.
const POOL = Buffer.alloc(4096)
let hex = ''
let used = 0

function randomHex (bytes, zeros) {
  const chars = bytes * 2
  for (;;) {
    if (used + chars > hex.length) {
      crypto.randomFillSync(POOL)
      hex = POOL.toString('hex')
      used = 0
    }
    const id = hex.slice(used, used + chars)
    used += chars
    if (id !== zeros) return id // all zeros is no ID
  }
}

module.exports = { parseTraceparent, traceparentOf, randomTraceId, randomSpanId }
