'use strict'

// The first message of a TLS handshake, the ClientHello (RFC 8446 4.1.2), read from
// the bytes a client sent before any TLS library saw them: the name it asks for (SNI,
// RFC 6066 3) and the protocols it offers (ALPN, RFC 7301). lila reads them to answer
// an ACME TLS-ALPN-01 validation (RFC 8737), whose certificate must be chosen knowing
// both, which Node's SNICallback does not. Pure.
//
//   readClientHello(buf) -> null (not all of it yet), or { serverName, alpn }
//     (serverName null when none is sent; alpn [] when none); throws a RangeError when
//     the bytes are not a TLS ClientHello
// A ClientHello may span several records; it is read up to MAX_HELLO bytes.

const HANDSHAKE = 22
const CLIENT_HELLO = 1
const EXT_SERVER_NAME = 0
const EXT_ALPN = 16
const MAX_HELLO = 64 * 1024

function readClientHello (buf) {
  // The handshake message, put together from the records' fragments.
  const fragments = []
  let have = 0
  let need = -1 // the message's length with its 4-byte header, once known
  for (let at = 0; ;) {
    if (at + 5 > buf.length) return null
    if (buf[at] !== HANDSHAKE || buf[at + 1] !== 3) throw new RangeError('not a TLS handshake')
    const length = buf.readUInt16BE(at + 3)
    if (at + 5 + length > buf.length) return null
    fragments.push(buf.subarray(at + 5, at + 5 + length))
    have += length
    at += 5 + length
    if (need === -1 && have >= 4) {
      const head = Buffer.concat(fragments)
      if (head[0] !== CLIENT_HELLO) throw new RangeError('not a ClientHello')
      need = 4 + head.readUIntBE(1, 3)
      if (need > MAX_HELLO) throw new RangeError('ClientHello too large')
    }
    if (need !== -1 && have >= need) break
  }
  return parseHello(Buffer.concat(fragments).subarray(4, need))
}

function parseHello (body) {
  const r = reader(body)
  r.skip(2 + 32) // legacy_version, random
  r.skip(r.u8()) // legacy_session_id
  r.skip(r.u16()) // cipher_suites
  r.skip(r.u8()) // legacy_compression_methods
  const out = { serverName: null, alpn: [] }
  if (r.left() === 0) return out // no extensions
  const extensions = reader(r.bytes(r.u16()))
  while (extensions.left() > 0) {
    const type = extensions.u16()
    const data = reader(extensions.bytes(extensions.u16()))
    if (type === EXT_SERVER_NAME) out.serverName = serverName(data)
    else if (type === EXT_ALPN) out.alpn = protocols(data)
  }
  return out
}

function serverName (r) {
  const list = reader(r.bytes(r.u16()))
  while (list.left() > 0) {
    const type = list.u8()
    const name = list.bytes(list.u16())
    if (type === 0) return name.toString('latin1').toLowerCase() // host_name
  }
  return null
}

function protocols (r) {
  const list = reader(r.bytes(r.u16()))
  const out = []
  while (list.left() > 0) out.push(list.bytes(list.u8()).toString('latin1'))
  return out
}

function reader (buf) {
  let at = 0
  const take = n => {
    if (at + n > buf.length) throw new RangeError('ClientHello truncated')
    const start = at
    at += n
    return start
  }
  return {
    u8: () => buf[take(1)],
    u16: () => buf.readUInt16BE(take(2)),
    bytes: n => buf.subarray(take(n), at),
    skip: n => { take(n) },
    left: () => buf.length - at
  }
}

module.exports = { readClientHello, MAX_HELLO }
