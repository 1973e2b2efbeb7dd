'use strict'

// HPACK (RFC 7541), the two halves lila needs:
//
// - Decoding what a peer sends: the static table, the dynamic table (its size set by
//   the peer's updates, within what lila's SETTINGS allow), integers, raw and Huffman
//   strings. A header block is decoded whole even when its list is refused, since the
//   peer's table changes with it; past the list limits the fields are counted, not
//   kept (an HPACK bomb, a 1-byte reference to a 4 KiB entry repeated, costs a loop).
//   Each field's validity as HTTP/2 (RFC 9113 8.2.1) is checked once: on a literal as
//   it is read, on a dynamic entry when it is inserted, never on a reference.
// - Encoding what lila sends, without state (as HAProxy does): a field of the static
//   table by its index, any other as a literal not indexed, its name by index when the
//   static table has it; no Huffman. The peer's table then never holds lila's fields,
//   each header block is the same bytes whatever went before (so blocks may be encoded
//   in any order, or early), and an encode is a copy. What it costs is bytes: a
//   repeated request head is ~40 bytes longer than with a dynamic table; the figures
//   are in docs/http2.md.
//
// Strings are latin1 both ways: HTTP field octets as http1/parse.js reads them.

const huffman = require('./huffman')
const { ProtocolError, COMPRESSION_ERROR } = require('./constants')

// RFC 7541 Appendix A.
const STATIC = [
  null,
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'],
  [':path', '/index.html'], [':scheme', 'http'], [':scheme', 'https'], [':status', '200'],
  [':status', '204'], [':status', '206'], [':status', '304'], [':status', '400'],
  [':status', '404'], [':status', '500'], ['accept-charset', ''], ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''], ['accept-ranges', ''], ['accept', ''], ['access-control-allow-origin', ''],
  ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''],
  ['date', ''], ['etag', ''], ['expect', ''], ['expires', ''],
  ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''],
  ['link', ''], ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''],
  ['proxy-authorization', ''], ['range', ''], ['referer', ''], ['refresh', ''],
  ['retry-after', ''], ['server', ''], ['set-cookie', ''], ['strict-transport-security', ''],
  ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', '']
]
const STATIC_COUNT = STATIC.length - 1
const STATIC_NAMES = STATIC.map(e => e === null ? null : e[0])
const STATIC_VALUES = STATIC.map(e => e === null ? null : e[1])
// The first index of each name, for literals with an indexed name.
const NAME_INDEX = new Map()
for (let i = STATIC_COUNT; i >= 1; i--) NAME_INDEX.set(STATIC[i][0], i)

// An entry's size (RFC 7541 4.1), and a field's in a header list (RFC 9113 6.5.2): the
// same 32 octets of overhead.
const OVERHEAD = 32

// Bytes a lower-case field name may hold (RFC 9110 token, RFC 9113 8.2.1: no upper case).
const NAME_BYTE = new Uint8Array(256)
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz") NAME_BYTE[c.charCodeAt(0)] = 1

// Entry flags: the name is a valid field name (a pseudo-header's, ':' and letters,
// counts), the value a valid field value; and a valid value holds a control byte
// HTTP/2 allows but HTTP/1.1 does not (found by the same scan, so that whoever writes
// the field on in HTTP/1.1 need not scan again: `controls`).
const NAME_OK = 1
const VALUE_OK = 2
const CONTROL = 4

function nameFlag (name) {
  const n = name.length
  if (n === 0) return 0
  let i = name.charCodeAt(0) === 58 ? 1 : 0 // ":"
  if (i === 1 && n === 1) return 0
  for (; i < n; i++) if (NAME_BYTE[name.charCodeAt(i) & 0xff] === 0 || name.charCodeAt(i) > 0xff) return 0
  return NAME_OK
}

// RFC 9113 8.2.1: no NUL, CR or LF, no space or tab at either end.

// eslint-disable-next-line no-control-regex -- control bytes are what they look for
const ANY_CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/
const BAD_VALUE = /[\0\r\n]/
function valueFlag (value) {
  const n = value.length
  if (n === 0) return VALUE_OK
  const first = value.charCodeAt(0)
  const last = value.charCodeAt(n - 1)
  if (first === 32 || first === 9 || last === 32 || last === 9) return 0
  if (!ANY_CONTROL.test(value)) return VALUE_OK
  return BAD_VALUE.test(value) ? 0 : VALUE_OK | CONTROL
}

class HpackDecoder {
  // `limit`: the table size lila's SETTINGS_HEADER_TABLE_SIZE allows the peer.
  constructor (limit = 4096) {
    this.limit = limit
    this.max = limit // the size the peer's last update set
    this.size = 0
    // The dynamic table, a ring: slot (head - k + 1) & mask is entry k (1 the newest).
    const slots = 1 << Math.ceil(Math.log2(Math.floor(limit / OVERHEAD) + 2))
    this.mask = slots - 1
    this.names = new Array(slots).fill(null)
    this.values = new Array(slots).fill(null)
    this.flags = new Uint8Array(slots)
    this.head = 0
    this.count = 0
    this.at = 0 // the read position inside decode()
    // What the last decode found besides its list:
    this.listSize = 0 // the list's size as RFC 9113 counts it, fields past the limits too
    this.overflow = false // past maxListSize or maxFields: the list holds none of it
    this.invalid = null // the first field that is not valid HTTP/2 (8.2.1), as a reason
    this.controls = false // a value holds a control byte HTTP/1.1 refuses (CONTROL)
  }

  // One header block, buf[start, end), as [name, value, name, value, ...]. Throws a
  // ProtocolError (COMPRESSION_ERROR: the connection cannot go on) when it is not valid
  // HPACK. Past `maxListSize` octets or `maxFields` fields, the list is emptied and
  // `overflow` set; decoding goes on to the end, for the table's sake.
  decode (buf, start, end, maxListSize, maxFields) {
    let list = []
    let size = 0
    let fields = 0
    let invalid = null
    let controls = false
    let overflow = false
    let updates = true // table size updates come first (RFC 7541 4.2)
    this.at = start
    while (this.at < end) {
      const byte = buf[this.at]
      let name
      let value
      let flags
      if (byte >= 0x80) { // indexed field
        const index = this.integer(buf, end, 7)
        if (index <= STATIC_COUNT) {
          if (index === 0) throw compression('index 0')
          name = STATIC_NAMES[index]
          value = STATIC_VALUES[index]
          flags = NAME_OK | VALUE_OK
        } else {
          const slot = this.slot(index)
          name = this.names[slot]
          value = this.values[slot]
          flags = this.flags[slot]
        }
      } else if (byte >= 0x20 && byte < 0x40) { // dynamic table size update
        if (!updates) throw compression('a table size update after a field')
        const max = this.integer(buf, end, 5)
        if (max > this.limit) throw compression(`a table size of ${max} over the ${this.limit} allowed`)
        this.max = max
        this.evict(0)
        continue
      } else { // a literal: with incremental indexing (01), without (0000), never (0001)
        const indexing = byte >= 0x40
        const index = this.integer(buf, end, indexing ? 6 : 4)
        if (index === 0) {
          name = this.string(buf, end)
          flags = nameFlag(name)
        } else if (index <= STATIC_COUNT) {
          name = STATIC_NAMES[index]
          flags = NAME_OK
        } else {
          const slot = this.slot(index)
          name = this.names[slot]
          flags = this.flags[slot] & NAME_OK
        }
        value = this.string(buf, end)
        flags |= valueFlag(value)
        if (indexing) this.insert(name, value, flags)
      }
      updates = false
      size += name.length + value.length + OVERHEAD
      fields++
      if ((flags & CONTROL) !== 0) controls = true
      if ((flags & (NAME_OK | VALUE_OK)) !== (NAME_OK | VALUE_OK) && invalid === null) {
        invalid = (flags & NAME_OK) === 0
          ? `invalid field name ${JSON.stringify(name)}`
          : `invalid value in field ${name}`
      }
      if (overflow) continue
      if (size > maxListSize || fields > maxFields) {
        overflow = true
        list = []
      } else {
        list.push(name, value)
      }
    }
    this.listSize = size
    this.overflow = overflow
    this.invalid = invalid
    this.controls = controls
    return list
  }

  // An HPACK integer with an N-bit prefix at this.at (RFC 7541 5.1); at most 2^28.
  integer (buf, end, bits) {
    const mask = (1 << bits) - 1
    let value = buf[this.at++] & mask
    if (value < mask) return value
    let shift = 0
    for (;;) {
      if (this.at >= end) throw compression('a truncated integer')
      const byte = buf[this.at++]
      value += (byte & 0x7f) * 2 ** shift
      if (byte < 0x80) break
      shift += 7
      if (shift > 21) throw compression('an integer over 2^28')
    }
    return value
  }

  string (buf, end) {
    if (this.at >= end) throw compression('a truncated field')
    const huffmanCoded = buf[this.at] >= 0x80
    const length = this.integer(buf, end, 7)
    const from = this.at
    if (end - from < length) throw compression('a string past the end of the block')
    this.at = from + length
    if (!huffmanCoded) return buf.latin1Slice(from, from + length)
    const text = huffman.decode(buf, from, from + length)
    if (text === null) throw compression('an invalid Huffman string')
    return text
  }

  slot (index) {
    const k = index - STATIC_COUNT
    if (k > this.count) throw compression(`index ${index} past the tables`)
    return (this.head - k + 1) & this.mask
  }

  insert (name, value, flags) {
    const size = name.length + value.length + OVERHEAD
    this.evict(size)
    if (size > this.max) return // RFC 7541 4.4: the table is left empty
    this.head = (this.head + 1) & this.mask
    this.names[this.head] = name
    this.values[this.head] = value
    this.flags[this.head] = flags
    this.count++
    this.size += size
  }

  // Drop the oldest entries until `room` more octets fit.
  evict (room) {
    while (this.count > 0 && this.size + room > this.max) {
      const oldest = (this.head - this.count + 1) & this.mask
      this.size -= this.names[oldest].length + this.values[oldest].length + OVERHEAD
      this.names[oldest] = null
      this.values[oldest] = null
      this.count--
    }
  }
}

function compression (what) {
  return new ProtocolError(COMPRESSION_ERROR, `HPACK: ${what}`)
}

// --- Encoding ---

// The most bytes a field can take encoded: a 5-byte integer for each of the index and
// the two lengths, and the strings.
function fieldBound (name, value) {
  return name.length + value.length + 11
}

// Write one field at buf[at]; returns the end.
function encodeField (buf, at, name, value) {
  const full = fullIndex(name, value)
  if (full !== 0) {
    buf[at] = 0x80 | full // every full match is under 127
    return at + 1
  }
  const index = NAME_INDEX.get(name)
  if (index === undefined) {
    buf[at++] = 0 // a literal without indexing, new name
    at = writeString(buf, at, name)
  } else {
    at = writeInteger(buf, at, 4, 0, index)
  }
  return writeString(buf, at, value)
}

// A raw string (no Huffman): its length, its bytes.
function writeString (buf, at, text) {
  at = writeInteger(buf, at, 7, 0, text.length)
  return at + buf.latin1Write(text, at)
}

// The static table's index of (name, value), or 0.
function fullIndex (name, value) {
  if (name.charCodeAt(0) !== 58) return name === 'accept-encoding' && value === 'gzip, deflate' ? 16 : 0
  switch (name) {
    case ':method': return value === 'GET' ? 2 : value === 'POST' ? 3 : 0
    case ':path': return value === '/' ? 4 : value === '/index.html' ? 5 : 0
    case ':scheme': return value === 'http' ? 6 : value === 'https' ? 7 : 0
    case ':status':
      switch (value) {
        case '200': return 8
        case '204': return 9
        case '206': return 10
        case '304': return 11
        case '400': return 12
        case '404': return 13
        case '500': return 14
      }
  }
  return 0
}

// An integer with an N-bit prefix, its first byte's high bits `high`.
function writeInteger (buf, at, bits, high, value) {
  const mask = (1 << bits) - 1
  if (value < mask) {
    buf[at] = high | value
    return at + 1
  }
  buf[at++] = high | mask
  value -= mask
  while (value >= 0x80) {
    buf[at++] = (value & 0x7f) | 0x80
    value = Math.floor(value / 0x80)
  }
  buf[at] = value
  return at + 1
}

module.exports = { HpackDecoder, encodeField, fieldBound, writeInteger, STATIC }
