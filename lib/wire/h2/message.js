'use strict'

// A decoded header list as lila's message head: the form http1/parse.js gives an
// HTTP/1.1 head (`fields` flat, three entries per field: name, lower-case name, value;
// the framing facts beside them), so that what works on heads does not know which
// protocol a message came on. And the other way: a head as the header list to encode.
//
// What makes a message malformed in HTTP/2 (RFC 9113 8.1.1, 8.2, 8.3) throws a stream
// ProtocolError (PROTOCOL_ERROR): pseudo-headers unknown, repeated, missing or after a
// field; connection-specific fields; TE but "trailers"; a Content-Length that is not
// a number. What lila refuses of a well-formed request (CONNECT, sizes, Host against
// :authority, control bytes HTTP/1.1 cannot carry) is the exchange's to answer.

const { ProtocolError, PROTOCOL_ERROR } = require('./constants')

// RFC 9113 8.2.2.
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'])
const STATUS = /^[1-9]\d\d$/

function malformed (stream, what) {
  return new ProtocolError(PROTOCOL_ERROR, `malformed: ${what}`, stream)
}

// A request's header list -> its head:
//   { method, scheme, target, path, authority, host, hosts, fields, contentLength,
//     bodyLength, contentType, grpcTimeout, expect, endStream, size, version: 2,
//     connection: null, chunked, asksUpgrade: false, isUpgrade: false, upgrade: null,
//     controls }
// `controls` (the decoder's): a value holds a control byte HTTP/2 allows and HTTP/1.1
// does not, for whoever writes the request on.
// `size`: the head's size as "name: value\r\n" lines (an HTTP/1.1 head's, for limits
// and logs). A body without a length would go to an HTTP/1.1 backend chunked
// (`chunked`), so that it can end when the stream does and carry trailers;
// `bodyLength` is what parse.js says of an HTTP/1.1 one: 0 for none, -1 when unknown.
function requestHead (list, endStream, stream, controls = false) {
  let method = null
  let scheme = null
  let target = null
  let authority = null
  let host = null
  let hosts = 0
  let contentLength = -1
  let contentType = null
  let grpcTimeout = null
  let expect = null
  let cookie = null
  let size = 0
  let regular = false
  const fields = []
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i]
    const value = list[i + 1]
    if (name.charCodeAt(0) === 58) { // ":"
      if (regular) throw malformed(stream, `pseudo-header ${name} after a field`)
      switch (name) {
        case ':method':
          if (method !== null) throw malformed(stream, 'repeated :method')
          method = value
          break
        case ':scheme':
          if (scheme !== null) throw malformed(stream, 'repeated :scheme')
          scheme = value
          break
        case ':path':
          if (target !== null) throw malformed(stream, 'repeated :path')
          target = value
          break
        case ':authority':
          if (authority !== null) throw malformed(stream, 'repeated :authority')
          authority = value
          break
        default:
          throw malformed(stream, `pseudo-header ${name} in a request`)
      }
      continue
    }
    regular = true
    size += name.length + value.length + 4 // "name: value\r\n"
    switch (name) {
      case 'te':
        if (value !== 'trailers') throw malformed(stream, 'TE other than "trailers"')
        break
      case 'host':
        host = value
        hosts++
        break
      case 'content-length':
        contentLength = lengthOf(stream, value, contentLength)
        break
      case 'content-type':
        contentType = value
        break
      case 'grpc-timeout':
        grpcTimeout = value
        break
      case 'expect':
        expect = value.toLowerCase()
        break
      case 'cookie':
        // RFC 9113 8.2.3: crumbs become one field again, as HTTP/1.1 has it.
        cookie = cookie === null ? value : `${cookie}; ${value}`
        continue
      default:
        if (CONNECTION_SPECIFIC.has(name)) throw malformed(stream, `connection-specific field ${name}`)
    }
    fields.push(name, name, value)
  }
  if (cookie !== null) fields.push('cookie', 'cookie', cookie)
  if (method === null) throw malformed(stream, 'no :method')
  if (method === 'CONNECT') {
    if (scheme !== null || target !== null || authority === null) {
      throw malformed(stream, 'CONNECT with :scheme or :path, or without :authority')
    }
  } else {
    if (scheme === null || target === null) throw malformed(stream, `no ${scheme === null ? ':scheme' : ':path'}`)
    if (target === '') throw malformed(stream, 'an empty :path')
  }
  const query = target === null ? -1 : target.indexOf('?')
  return {
    method,
    scheme,
    target,
    path: query === -1 ? target : target.slice(0, query),
    version: 2,
    fields,
    authority,
    host: authority !== null ? authority : host,
    hosts,
    connection: null,
    chunked: !endStream && contentLength === -1,
    contentLength,
    bodyLength: endStream ? 0 : contentLength,
    endStream,
    asksUpgrade: false,
    isUpgrade: false,
    upgrade: null,
    contentType,
    grpcTimeout,
    expect,
    size: size + method.length + (target === null ? 0 : target.length) + 12, // "METHOD target HTTP/1.1\r\n"
    controls
  }
}

// A response's (or a 1xx's) header list -> its head:
//   { status, reason: '', version: 2, fields, contentLength, contentType, endStream,
//     connection: null, chunked: false, size }
function responseHead (list, endStream, stream) {
  let status = -1
  let contentLength = -1
  let contentType = null
  let size = 0
  const fields = []
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i]
    const value = list[i + 1]
    if (name.charCodeAt(0) === 58) {
      if (name !== ':status' || status !== -1 || fields.length > 0) {
        throw malformed(stream, `pseudo-header ${name} in a response`)
      }
      if (!STATUS.test(value)) throw malformed(stream, `:status ${value}`)
      status = Number(value)
      continue
    }
    size += name.length + value.length + 4
    if (name === 'content-length') contentLength = lengthOf(stream, value, contentLength)
    else if (name === 'content-type') contentType = value
    else if (CONNECTION_SPECIFIC.has(name)) throw malformed(stream, `connection-specific field ${name}`)
    fields.push(name, name, value)
  }
  if (status === -1) throw malformed(stream, 'no :status')
  if (status < 200 && endStream) throw malformed(stream, `a ${status} that ends the stream`)
  return {
    status,
    reason: '',
    version: 2,
    fields,
    contentLength,
    contentType,
    endStream,
    connection: null,
    chunked: false,
    size: size + 17 // "HTTP/1.1 200 \r\n\r\n"
  }
}

// A trailer section -> fields, three entries each as in a head.
function trailerFields (list, stream) {
  const fields = []
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i]
    if (name.charCodeAt(0) === 58) throw malformed(stream, `pseudo-header ${name} in trailers`)
    if (CONNECTION_SPECIFIC.has(name)) throw malformed(stream, `connection-specific field ${name}`)
    fields.push(name, name, list[i + 1])
  }
  return fields
}

// Content-Length: digits, the same each time it is repeated (RFC 9110 8.6).
function lengthOf (stream, value, had) {
  if (value.length === 0 || value.length > 15) throw malformed(stream, `content-length ${value}`)
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c < 48 || c > 57) throw malformed(stream, `content-length ${value}`)
  }
  const n = Number(value)
  if (had !== -1 && had !== n) throw malformed(stream, 'differing content-lengths')
  return n
}

module.exports = { requestHead, responseHead, trailerFields }
