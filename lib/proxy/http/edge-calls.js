'use strict'

// The exchange's side of the rules at the edge (proxy/edge/rules.js; ARCHITECTURE.md,
// "How the exchange calls the rules"): a head's fields read as the rules ask for them,
// the edits they answer applied to a copy of a head, and a response body sent on
// compressed. Only for a pool that has rules: without, the exchange calls nothing here.
// Heads are lila's message form (http1/parse.js, wire/h2/message.js): `fields` is
// name, lower-case name, value, repeated.

// A field's value by lower-case name, repeated fields joined with ", "; undefined when
// the head has none (the rules' `get`).
function fieldOf (fields, lower) {
  let value
  for (let i = 1; i < fields.length; i += 3) {
    if (fields[i] !== lower) continue
    value = value === undefined ? fields[i + 1] : `${value}, ${fields[i + 1]}`
  }
  return value
}

// `fields` with `edits` ([[lower-case name, value | null]]) applied: every field of an
// edited name out, then the values that are not null in, written as HTTP/1.1 heads
// usually spell them.
function editedFields (fields, edits) {
  const names = new Set()
  for (const [lower] of edits) names.add(lower)
  const out = []
  for (let i = 0; i < fields.length; i += 3) {
    if (!names.has(fields[i + 1])) out.push(fields[i], fields[i + 1], fields[i + 2])
  }
  for (const [lower, value] of edits) if (value !== null) out.push(spelt(lower), lower, value)
  return out
}

// "x-forwarded-prefix" -> "X-Forwarded-Prefix"
function spelt (lower) {
  return lower.replace(/(^|-)([a-z])/g, (all, dash, letter) => dash + letter.toUpperCase())
}

// The request as it goes on: a copy of the client's head with rewriteRequest's edits
// (`path`: the target to send; `fields`). The client's head stays as it came, for the
// access log and lila's own answers.
function editedRequest (head, { path, fields }) {
  const out = { ...head }
  if (path !== null) out.target = path
  if (fields.length > 0) out.fields = editedFields(head.fields, fields)
  return out
}

// What the rules at the edge do to the response to exchange `x` (responseTransform's
// plan: field edits, a compression), seeing its status and fields `res`.
function responsePlan (x, status, res) {
  const accepts = fieldOf(x.head.fields, 'accept-encoding')
  return x.rules.responseTransform(x.head.method, accepts, status, name => fieldOf(res.fields, name))
}

// The response head as the client gets it: responseTransform's field edits; with its
// body compressed, no length (the framing's now: chunked, or the end of the stream).
function editedResponse (res, fields, compressed) {
  const out = { ...res, fields: editedFields(res.fields, fields) }
  if (compressed) out.contentLength = -1
  return out
}

// A response body on its way compressed: the backend's bytes in (unframed), the
// Compressor's (edge/compressor.js) out to the exchange's client, back-pressure both
// ways; the backend's trailers follow the last compressed bytes.
class CompressedBody {
  constructor (x, rules, encoding) {
    this.trailers = null
    this.compressor = rules.compressor(encoding, new ToClient(x, this))
  }

  // A piece of the backend's body; false: hold the backend until the exchange's
  // compressorDrained().
  write (piece) {
    return this.compressor.write(piece)
  }

  // The backend's body is whole.
  end (trailers) {
    this.trailers = trailers
    this.compressor.end()
  }

  // The client drained.
  resume () {
    this.compressor.resume()
  }

  destroy () {
    this.compressor.destroy()
  }
}

// The Compressor's sink: the exchange's.
class ToClient {
  constructor (x, body) {
    this.x = x
    this.body = body
  }

  data (chunk) {
    return this.x.sendCompressed(chunk)
  }

  drain () {
    this.x.compressorDrained()
  }

  end () {
    this.x.compressedDone(this.body.trailers)
  }

  error (err) {
    this.x.compressFailed(err)
  }
}

module.exports = { fieldOf, editedRequest, responsePlan, editedResponse, CompressedBody }
