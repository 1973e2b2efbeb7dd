'use strict'

// --compress: whether a response is compressed on its way to the client, and how its
// head changes. Pure. (The compressing itself: compressor.js.)
//
//   compressible(method, status, get, types) -> true when the response may be
//       compressed: not to a HEAD, not a 1xx, 204, 206 or 304; no Content-Encoding
//       already; no Cache-Control: no-transform; a type on `types` (typeMatcher); a
//       body of at least MIN_LENGTH bytes or of unknown length
//   compressedFields(get, encoding) -> [[name, value | null], ...]: what to set (or
//       remove, null) in the head: Content-Encoding; Content-Length and Accept-Ranges
//       out (the length is the framing's now: chunked or the end of the stream); Vary
//       with Accept-Encoding; a strong ETag made weak (the bytes differ, the meaning
//       does not). With `encoding` null, only Vary: the client did not ask for a
//       coding, but the next one may, and caches must know.
//   typeMatcher(types) -> (contentType) -> boolean: "text/*", "application/*+json" or
//       a whole type, parameters and case aside
//
// `get(name)`: a response field's value (name in lower case), or undefined.

const MIN_LENGTH = 1024

function compressible (method, status, get, types) {
  if (method === 'HEAD' || status < 200 || status === 204 || status === 206 || status === 304) return false
  const coding = get('content-encoding')
  if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') return false
  const type = get('content-type')
  if (type === undefined || !types(type)) return false
  const cacheControl = get('cache-control')
  if (cacheControl !== undefined && /(?:^|,)\s*no-transform\s*(?:$|,|=)/i.test(cacheControl)) return false
  const length = get('content-length')
  return length === undefined || !(Number(length) < MIN_LENGTH)
}

function compressedFields (get, encoding) {
  const fields = []
  const vary = varyWith(get('vary'))
  if (vary !== null) fields.push(['vary', vary])
  if (encoding === null) return fields
  fields.push(['content-encoding', encoding], ['content-length', null], ['accept-ranges', null])
  const etag = get('etag')
  if (etag !== undefined && etag.startsWith('"')) fields.push(['etag', `W/${etag}`])
  return fields
}

// Vary with Accept-Encoding in it, or null when it needs no change ("*", or named).
function varyWith (vary) {
  if (vary === undefined || vary.trim() === '') return 'Accept-Encoding'
  const names = vary.split(',').map(name => name.trim().toLowerCase())
  if (names.includes('*') || names.includes('accept-encoding')) return null
  return `${vary}, Accept-Encoding`
}

function typeMatcher (types) {
  const exact = new Set()
  const prefixes = [] // "text/"
  const suffixes = [] // "+json", under a given top-level type: ['application/', '+json']
  for (const type of types) {
    const lower = type.toLowerCase()
    const star = lower.indexOf('*')
    if (star === -1) exact.add(lower)
    else if (star === lower.length - 1) prefixes.push(lower.slice(0, -1))
    else suffixes.push([lower.slice(0, star), lower.slice(star + 1)])
  }
  return contentType => {
    const semicolon = contentType.indexOf(';')
    const type = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase()
    if (exact.has(type)) return true
    for (const prefix of prefixes) if (type.startsWith(prefix)) return true
    for (const [top, suffix] of suffixes) {
      if (type.startsWith(top) && type.endsWith(suffix) && type.length > top.length + suffix.length) return true
    }
    return false
  }
}

module.exports = { compressible, compressedFields, typeMatcher, MIN_LENGTH }
