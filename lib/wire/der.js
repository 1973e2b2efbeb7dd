'use strict'

// ASN.1 DER, the little of it certificates, CSRs and keys need (X.690): a writer whose
// functions each return one encoded element as a Buffer, and a strict reader that
// turns a Buffer into a tree of elements. Pure. Node can verify and parse certificates
// (crypto.X509Certificate) but not make them; x509.js makes them with this.

// Universal tags.
const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31
}

// ---- writing ----

function length (n) {
  if (n < 0x80) return Buffer.from([n])
  const bytes = []
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

// One element: its tag byte, its length, its contents.
function element (tag, contents) {
  return Buffer.concat([Buffer.from([tag]), length(contents.length), contents])
}

const sequence = (...items) => element(TAG.SEQUENCE, Buffer.concat(items.filter(Boolean)))

// A SET OF: DER orders its elements by their encodings.
const set = (...items) => element(TAG.SET, Buffer.concat(items.filter(Boolean).sort(Buffer.compare)))

// An INTEGER from a number, a bigint or the big-endian bytes of a non-negative one
// (a serial number): the fewest bytes, a leading zero when the top bit is set.
function integer (value) {
  let bytes
  if (Buffer.isBuffer(value)) {
    let start = 0
    while (start < value.length - 1 && value[start] === 0) start++
    bytes = value.subarray(start)
    if (bytes.length === 0) bytes = Buffer.from([0])
  } else {
    let v = BigInt(value)
    if (v < 0n) throw new RangeError('negative INTEGERs are not written here')
    const out = []
    do {
      out.unshift(Number(v & 0xffn))
      v >>= 8n
    } while (v > 0n)
    bytes = Buffer.from(out)
  }
  if (bytes[0] & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes])
  return element(TAG.INTEGER, bytes)
}

const boolean = value => element(TAG.BOOLEAN, Buffer.from([value ? 0xff : 0x00]))
const octetString = bytes => element(TAG.OCTET_STRING, bytes)
const utf8String = text => element(TAG.UTF8_STRING, Buffer.from(text, 'utf8'))

// A BIT STRING of whole bytes (a key, a signature).
const bitString = bytes => element(TAG.BIT_STRING, Buffer.concat([Buffer.from([0]), bytes]))

// A named BIT STRING (key usage) from the numbers of the bits set: DER drops the
// trailing zero bits and says how many bits of the last byte are unused.
function namedBits (bits) {
  if (bits.length === 0) return element(TAG.BIT_STRING, Buffer.from([0]))
  const highest = Math.max(...bits)
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1)
  for (const bit of bits) bytes[bit >> 3] |= 0x80 >> (bit & 7)
  const unused = 7 - (highest & 7)
  return element(TAG.BIT_STRING, Buffer.concat([Buffer.from([unused]), bytes]))
}

// "1.2.840.10045.2.1" -> an OBJECT IDENTIFIER.
function oid (dotted) {
  const arcs = dotted.split('.').map(BigInt)
  const out = []
  for (const arc of [arcs[0] * 40n + arcs[1], ...arcs.slice(2)]) {
    const groups = []
    let v = arc
    do {
      groups.unshift(Number(v & 0x7fn))
      v >>= 7n
    } while (v > 0n)
    for (let i = 0; i < groups.length - 1; i++) groups[i] |= 0x80
    out.push(...groups)
  }
  return element(TAG.OID, Buffer.from(out))
}

// A time as RFC 5280 wants it: UTCTime through 2049, GeneralizedTime from 2050, to the
// second, in UTC.
function time (date) {
  const iso = date.toISOString() // 2026-11-26T10:20:30.000Z
  const digits = iso.slice(0, 19).replace(/[-T:]/g, '') + 'Z' // 20261126102030Z
  const year = date.getUTCFullYear()
  if (year >= 1950 && year < 2050) return element(TAG.UTC_TIME, Buffer.from(digits.slice(2), 'latin1'))
  return element(TAG.GENERALIZED_TIME, Buffer.from(digits, 'latin1'))
}

// Context-specific tags: [n] EXPLICIT wraps an element; [n] IMPLICIT replaces the tag
// of one (its contents kept; constructed when the element was).
const explicit = (n, item) => element(0xa0 | n, item)
function implicit (n, item) {
  const constructed = item[0] & 0x20
  return Buffer.concat([Buffer.from([0x80 | constructed | n]), item.subarray(1)])
}
// [n] IMPLICIT with raw contents, primitive (a dNSName, an iPAddress, a key identifier).
const contextPrimitive = (n, contents) => element(0x80 | n, contents)

// ---- reading ----

// A parsed element: { tag, constructed, contextNumber (null unless context-specific),
// contents (Buffer), bytes (the whole encoding), children (constructed only) }.
// Strict DER: definite, minimal lengths; single-byte tags (all X.509 uses). Throws a
// RangeError on anything else, or on bytes after the element when `whole`.
function read (buf, { whole = true } = {}) {
  const node = readAt(buf, 0, 0)
  if (whole && node.end !== buf.length) throw new RangeError(`DER: ${buf.length - node.end} bytes after the element`)
  return node
}

const MAX_DEPTH = 32

function readAt (buf, at, depth) {
  if (depth > MAX_DEPTH) throw new RangeError('DER: nested too deep')
  if (at + 2 > buf.length) throw new RangeError('DER: truncated element')
  const tag = buf[at]
  if ((tag & 0x1f) === 0x1f) throw new RangeError('DER: multi-byte tags are not supported')
  let len = buf[at + 1]
  let start = at + 2
  if (len & 0x80) {
    const n = len & 0x7f
    if (n === 0 || n > 4) throw new RangeError('DER: indefinite or oversized length')
    if (start + n > buf.length) throw new RangeError('DER: truncated length')
    len = 0
    for (let i = 0; i < n; i++) len = len * 256 + buf[start + i]
    if (len < 0x80 || buf[start] === 0) throw new RangeError('DER: length not in its shortest form')
    start += n
  }
  const end = start + len
  if (end > buf.length) throw new RangeError('DER: truncated contents')
  const constructed = (tag & 0x20) !== 0
  const node = {
    tag,
    constructed,
    contextNumber: (tag & 0xc0) === 0x80 ? tag & 0x1f : null,
    contents: buf.subarray(start, end),
    bytes: buf.subarray(at, end),
    end,
    children: null
  }
  if (constructed) {
    node.children = []
    for (let p = start; p < end;) {
      const child = readAt(buf, p, depth + 1)
      node.children.push(child)
      p = child.end
    }
  }
  return node
}

// An OBJECT IDENTIFIER's contents -> "1.2.840.10045.2.1".
function readOid (contents) {
  const arcs = []
  let v = 0n
  for (const byte of contents) {
    v = (v << 7n) | BigInt(byte & 0x7f)
    if ((byte & 0x80) === 0) {
      if (arcs.length === 0) {
        const first = v < 80n ? v / 40n : 2n
        arcs.push(first, v - first * 40n)
      } else {
        arcs.push(v)
      }
      v = 0n
    }
  }
  return arcs.join('.')
}

// A UTCTime or GeneralizedTime element -> a Date.
function readTime (node) {
  const text = node.contents.toString('latin1')
  const full = node.tag === TAG.UTC_TIME ? `${Number(text.slice(0, 2)) < 50 ? '20' : '19'}${text}` : text
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(full)
  if (m === null) throw new RangeError(`DER: a time not in DER form: ${text}`)
  return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]))
}

module.exports = {
  TAG,
  sequence,
  set,
  integer,
  boolean,
  octetString,
  utf8String,
  bitString,
  namedBits,
  oid,
  time,
  explicit,
  implicit,
  contextPrimitive,
  read,
  readOid,
  readTime
}
