'use strict'

// An HTTP/2 request's header block as the head the HTTP/1.1 side works with: the same
// shape parse.js parseRequestHead gives (fields, framing facts, host, path), so that
// rewrite.js requestHead writes what the backend gets and viaLoops reads it, as for
// an HTTP/1.1 request. Pure: header list in, a head out, or an HttpError with the
// status to answer (RFC 9113 8.1.1: a malformed request).
//
// Node's http2 (nghttp2) has already refused what HTTP/2 itself forbids (upper-case
// names, pseudo-headers out of place, a Content-Length the DATA frames contradict,
// CR, LF or NUL in a value); this adds what lila refuses of HTTP/1.1 heads too, since
// the fields are written on in HTTP/1.1: control bytes in values, connection-specific
// fields, CONNECT, a target over 8 KiB, more than 100 fields or a head over 16 KiB.

const { HttpError } = require('../../errors')
const { TOKEN, BAD_VALUE, MAX_HEAD, MAX_TARGET } = require('../http1/parse')
const { isGrpcType } = require('../grpc')

const MAX_HEADERS = 100
// RFC 9113 8.2.2: fields that only make sense for a connection; a request with one is
// malformed. (TE is allowed, saying "trailers" only.)
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'])

// rawHeaders: [name, value, name, value, ...] as they came (pseudo-headers first);
// endStream: the header block ended the stream (no body).
//   -> { method, target, path, version: 2, fields, authority, host, connection: null,
//        chunked, contentLength, endStream, isUpgrade: false, upgrade: null, grpc,
//        grpcTimeout, size }
// A body without a length goes to the backend chunked (`chunked`), so that it can end
// when the client's stream does and carry the client's trailers.
function requestFromHeaders (rawHeaders, endStream) {
  let method = null
  let target = null
  let authority = null
  let host = null
  let hosts = 0
  let contentLength = -1
  let cookie = null
  let grpc = null
  let grpcTimeout = null
  let expect = null
  let size = 0
  const fields = []
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]
    const value = rawHeaders[i + 1]
    size += name.length + value.length + 4 // as "name: value\r\n"
    if (name.charCodeAt(0) === 58) { // ":"
      if (name === ':method') method = value
      else if (name === ':path') target = value
      else if (name === ':authority') authority = value
      else if (name !== ':scheme') throw new HttpError(400, `pseudo-header ${name} is not supported`)
      continue
    }
    if (!TOKEN.test(name)) throw new HttpError(400, `invalid header name ${JSON.stringify(name)}`)
    if (BAD_VALUE.test(value)) throw new HttpError(400, `control character in header ${name}`)
    if (CONNECTION_SPECIFIC.has(name)) throw new HttpError(400, `connection-specific header ${name} in HTTP/2`)
    switch (name) {
      case 'te':
        if (value.toLowerCase() !== 'trailers') throw new HttpError(400, 'TE other than "trailers" in HTTP/2')
        break
      case 'host':
        host = value
        hosts++
        break
      case 'content-length':
        if (contentLength !== -1) throw new HttpError(400, 'more than one Content-Length header')
        if (!/^\d{1,15}$/.test(value)) throw new HttpError(400, `invalid Content-Length ${JSON.stringify(value)}`)
        contentLength = Number(value)
        break
      case 'content-type':
        if (isGrpcType(value)) grpc = value
        break
      case 'grpc-timeout':
        grpcTimeout = value
        break
      case 'expect':
        expect = value.toLowerCase()
        break
      case 'cookie':
        // RFC 9113 8.2.3: cookie crumbs become one field again for HTTP/1.1.
        cookie = cookie === null ? value : `${cookie}; ${value}`
        continue
    }
    fields.push(name, name, value)
  }
  if (cookie !== null) fields.push('cookie', 'cookie', cookie)
  if (fields.length / 3 > MAX_HEADERS) throw new HttpError(431, 'too many header fields')
  if (size > MAX_HEAD) throw new HttpError(431, 'request head too large')
  if (method === null || !TOKEN.test(method)) throw new HttpError(400, 'missing or invalid :method')
  if (method === 'CONNECT') throw new HttpError(405, 'CONNECT is not supported by a reverse proxy')
  if (target === null) throw new HttpError(400, 'missing :path')
  if (target.length > MAX_TARGET) throw new HttpError(414, 'request target too long')
  if (!/^[!-~]+$/.test(target)) throw new HttpError(400, 'invalid :path')
  if (target.charCodeAt(0) !== 47 && !(target === '*' && method === 'OPTIONS')) {
    throw new HttpError(400, 'a :path not in origin form')
  }
  if (hosts > 1) throw new HttpError(400, 'more than one Host header')
  if (authority !== null) {
    if (!/^[!-~]+$/.test(authority) || authority.includes('@')) throw new HttpError(400, 'invalid :authority')
    // RFC 9113 8.3.1: a Host that names another server than :authority is malformed.
    if (host !== null && host.toLowerCase() !== authority.toLowerCase()) {
      throw new HttpError(400, 'Host and :authority differ')
    }
  } else if (host === null) {
    throw new HttpError(400, 'missing :authority and Host')
  }
  const query = target.indexOf('?')
  return {
    method,
    target,
    path: query === -1 ? target : target.slice(0, query), // uri-hash keys on it
    version: 2,
    fields,
    authority, // written as Host (rewrite.js), any Host field dropped
    host: authority !== null ? authority : host,
    connection: null,
    chunked: !endStream && contentLength === -1,
    contentLength,
    endStream,
    isUpgrade: false,
    upgrade: null,
    grpc, // the content-type when it says a gRPC call (grpc.js), else null
    grpcTimeout,
    expect, // "100-continue" when the client waits for a 100 before its body
    size: size + method.length + target.length + 12 // and "METHOD target HTTP/1.1\r\n"
  }
}

// The client's trailers (Node's header object) as [name, value, ...] for the end of a
// chunked body; what may not be a trailer (framing, routing, connection fields) is
// left out. Throws an HttpError for a name or value HTTP/1.1 cannot carry.
const NOT_TRAILERS = new Set(['content-length', 'host', 'trailer', 'te', ...CONNECTION_SPECIFIC])

function trailerFields (headers) {
  const out = []
  for (const name of Object.keys(headers)) {
    if (name.charCodeAt(0) === 58 || NOT_TRAILERS.has(name)) continue
    if (!TOKEN.test(name)) throw new HttpError(400, `invalid trailer name ${JSON.stringify(name)}`)
    const values = headers[name]
    for (const value of Array.isArray(values) ? values : [values]) {
      if (BAD_VALUE.test(String(value))) throw new HttpError(400, `control character in trailer ${name}`)
      out.push(name, String(value))
    }
  }
  return out.length === 0 ? null : out
}

module.exports = { requestFromHeaders, trailerFields, MAX_HEADERS }
