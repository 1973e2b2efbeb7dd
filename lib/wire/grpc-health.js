'use strict'

// The standard gRPC health service (grpc.health.v1.Health/Check), by hand: its two
// messages have one field each, so a protobuf library would be all weight. Pure; for
// --check grpc (upstream/health.js).

const HEALTH_PATH = '/grpc.health.v1.Health/Check'
const SERVING_STATUS = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN']

// HealthCheckRequest { string service = 1 } in a gRPC message frame: a flag byte (not
// compressed), the length (4 bytes), then the message: field 1, wire type 2 (0x0a),
// the length as a varint, the UTF-8 bytes. An empty service is an empty message (the
// server as a whole).
function healthRequest (service) {
  const text = Buffer.from(service)
  const message = text.length === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a]), varint(text.length), text])
  const prefix = Buffer.alloc(5)
  prefix.writeUInt32BE(message.length, 1)
  return Buffer.concat([prefix, message])
}

function varint (n) {
  const bytes = []
  while (n > 0x7f) {
    bytes.push((n & 0x7f) | 0x80)
    n >>>= 7
  }
  bytes.push(n)
  return Buffer.from(bytes)
}

// The HealthCheckResponse's status from the answer's DATA (one gRPC message frame):
// its name ('SERVING', 'NOT_SERVING', ...), or null when it cannot be read. Field 1 is
// an enum (wire type 0, tag 0x08); other fields are skipped; none means UNKNOWN
// (proto3's default).
function healthStatus (body) {
  if (body.length < 5 || body[0] !== 0) return null // compressed, or no frame
  const end = 5 + body.readUInt32BE(1)
  if (end > body.length) return null
  let status = 0
  let i = 5
  while (i < end) {
    const [key, next] = readVarint(body, i, end)
    if (next === -1) return null
    i = next
    const wireType = key & 7
    if (wireType === 0) {
      const [value, after] = readVarint(body, i, end)
      if (after === -1) return null
      if (key >>> 3 === 1) status = value
      i = after
    } else if (wireType === 2) {
      const [length, after] = readVarint(body, i, end)
      if (after === -1) return null
      i = after + length
    } else if (wireType === 5) {
      i += 4
    } else if (wireType === 1) {
      i += 8
    } else {
      return null
    }
  }
  if (i !== end) return null
  return SERVING_STATUS[status] || `status ${status}`
}

// -> [value, index after it], or [0, -1] when it runs past `end` (or past 32 bits).
function readVarint (buf, i, end) {
  let value = 0
  for (let shift = 0; shift < 35 && i < end; shift += 7) {
    const byte = buf[i++]
    value += (byte & 0x7f) * 2 ** shift
    if ((byte & 0x80) === 0) return [value, i]
  }
  return [0, -1]
}

module.exports = { HEALTH_PATH, healthRequest, healthStatus }
