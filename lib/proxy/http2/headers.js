'use strict'

// HTTP/2 header lists for lila's codec (wire/h2: [name, value, ...], lower-case names,
// pseudo-headers first): the fields message/rewrite.js decided (a Fields: its
// lower-case names and values) with what is HTTP/2's own: the pseudo-headers, and a response's
// content-length as the framing facts say. HTTP/2 carries no reason phrase, no
// Transfer-Encoding and no connection options: the codec frames the body itself.
// Pure, but for the Fields trailerListOf lists into.

const { originForm, FIELD, Fields, trailerFields } = require('../message/rewrite')

// The trailer fields being listed (trailerListOf): one for all streams.
const TRAILERS = new Fields()

// A request for an HTTP/2 backend: its first field is the Host (requestFields), here
// :authority; `scheme` the backend connection's ('http' or 'https').
function requestList (head, fields, scheme) {
  const from = fields.list
  const list = [':method', head.method, ':scheme', scheme, ':authority', from[2], ':path', originForm(head)]
  for (let i = FIELD; i < fields.length; i += FIELD) list.push(from[i + 1], from[i + 2])
  return list
}

// A response (or 1xx) head for an HTTP/2 client: its status, `fields`
// (responseFields), and `length` as content-length (-1: none).
function responseList (status, fields, length) {
  const from = fields.list
  const list = [':status', String(status)]
  for (let i = 0; i < fields.length; i += FIELD) list.push(from[i + 1], from[i + 2])
  if (length !== -1) list.push('content-length', String(length))
  return list
}

// Trailer fields (trailerFields) as a trailer list; null when there are none (the
// stream then ends with an empty DATA).
function trailerList (fields) {
  if (fields.length === 0) return null
  const from = fields.list
  const list = []
  for (let i = 0; i < fields.length; i += FIELD) list.push(from[i + 1], from[i + 2])
  return list
}

// Trailer fields as they go on (message/rewrite.js), as a list; null: none.
function trailerListOf (fields) {
  trailerFields(fields, TRAILERS)
  return trailerList(TRAILERS)
}

// A header list's size as HTTP/1.1 writes it (the access log counts it).
function sizeOf (list) {
  let size = 17 // "HTTP/1.1 200 \r\n" and the empty line
  for (let i = 2; i < list.length; i += 2) size += list[i].length + list[i + 1].length + 4
  return size
}

module.exports = { requestList, responseList, trailerList, trailerListOf, sizeOf }
