'use strict'

// A protobuf writer (proto3 wire format), just what OTLP's messages take: varints,
// fixed64, double, length-delimited strings, bytes and nested messages. Pure. One
// growing buffer per message: a nested message is written in place and its length put
// in front of it when it ends (the bytes moved by the length's size), so a request of
// thousands of spans allocates a few buffers, not one per field. Fields are written in
// the order the caller gives them; what proto3 leaves out (an empty string, a zero) is
// the caller's to leave out, so that the output is what protobufjs and Go write.
//
//   const w = new ProtoWriter()
//   w.begin(1); w.string(1, 'x'); w.end()   a message in field 1 of the outer one
//   w.finish() -> Buffer

const VARINT = 0
const FIXED64 = 1
const DELIMITED = 2
const FIXED32 = 5

const TWO_32 = 2 ** 32
const HEX = new Uint8Array(128)
for (let i = 0; i < 16; i++) HEX['0123456789abcdef'.charCodeAt(i)] = HEX['0123456789ABCDEF'.charCodeAt(i)] = i

// A large message (a batch of spans) is written into one scratch buffer kept from batch
// to batch, and only its bytes copied out: no fresh buffer of hundreds of KiB a batch.
// (Writing is synchronous, and a large writer's finish() comes before the next starts.)
const LARGE = 16384
let scratch = Buffer.allocUnsafe(LARGE)

class ProtoWriter {
  // shared: a large message may write into the scratch buffer (false: its own)
  constructor (size = 4096, shared = true) {
    this.large = shared && size >= LARGE
    this.buf = this.large ? scratch : Buffer.allocUnsafe(size)
    this.pos = 0
    this.starts = [] // where each open nested message's content begins
  }

  room (n) {
    if (this.pos + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n))
    this.buf.copy(next, 0, 0, this.pos)
    this.buf = next
    if (this.large) scratch = next
  }

  // A non-negative integer up to 2^53.
  varint (n) {
    this.room(10)
    const { buf } = this
    while (n >= 0x80) {
      buf[this.pos++] = (n % 0x80) | 0x80
      n = Math.floor(n / 0x80)
    }
    buf[this.pos++] = n
  }

  tag (field, wireType) {
    this.varint(field * 8 + wireType)
  }

  uint (field, n) {
    this.tag(field, VARINT)
    this.varint(n)
  }

  // int64 as a varint: a negative one is its two's complement, ten bytes.
  int64 (field, n) {
    if (n >= 0) return this.uint(field, n)
    this.tag(field, VARINT)
    let v = BigInt.asUintN(64, BigInt(n))
    this.room(10)
    while (v >= 0x80n) {
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80
      v >>= 7n
    }
    this.buf[this.pos++] = Number(v)
  }

  bool (field, value) {
    this.uint(field, value ? 1 : 0)
  }

  double (field, value) {
    this.tag(field, FIXED64)
    this.room(8)
    this.buf.writeDoubleLE(value, this.pos)
    this.pos += 8
  }

  fixed32 (field, n) {
    this.tag(field, FIXED32)
    this.room(4)
    this.buf.writeUInt32LE(n, this.pos)
    this.pos += 4
  }

  // fixed64 (or sfixed64) of a non-negative integer up to 2^53.
  fixed64 (field, n) {
    this.tag(field, FIXED64)
    this.raw64(n % TWO_32, Math.floor(n / TWO_32))
  }

  // sfixed64 of an integer within +-2^53: a negative one as its two's complement.
  sfixed64 (field, n) {
    if (n >= 0) return this.fixed64(field, n)
    const v = BigInt.asUintN(64, BigInt(n))
    this.tag(field, FIXED64)
    this.raw64(Number(v & 0xffffffffn), Number(v >> 32n))
  }

  // fixed64 of nanoseconds since the epoch, from milliseconds to the microsecond: past
  // 2^53, so in 32-bit halves, exactly (ms = high * 2^32 + low; low * 1e6 < 2^53).
  nanos (field, ms) {
    let whole = Math.floor(ms)
    let micros = Math.round((ms - whole) * 1000)
    if (micros === 1000) {
      whole++
      micros = 0
    }
    const high = Math.floor(whole / TWO_32)
    const low = whole - high * TWO_32
    const x = low * 1e6 + micros * 1000
    const carry = Math.floor(x / TWO_32)
    this.tag(field, FIXED64)
    this.raw64(x - carry * TWO_32, high * 1e6 + carry)
  }

  raw64 (low, high) {
    this.room(8)
    this.buf.writeUInt32LE(low, this.pos)
    this.buf.writeUInt32LE(high, this.pos + 4)
    this.pos += 8
  }

  // A short ASCII string is copied here, char by char: cheaper than a call into
  // Buffer's C++ for the many small keys and values of a batch of spans.
  string (field, text) {
    this.tag(field, DELIMITED)
    const n = text.length
    if (n < 128) {
      this.room(n + 1)
      const { buf } = this
      const start = this.pos
      buf[start] = n
      let i = 0
      for (; i < n; i++) {
        const c = text.charCodeAt(i)
        if (c >= 0x80) break
        buf[start + 1 + i] = c
      }
      if (i === n) {
        this.pos = start + 1 + n
        return
      }
    }
    const length = Buffer.byteLength(text)
    this.varint(length)
    this.room(length)
    this.pos += this.buf.write(text, this.pos)
  }

  // bytes given as hex (trace and span IDs).
  hex (field, text) {
    const length = text.length >> 1
    this.tag(field, DELIMITED)
    this.varint(length)
    this.room(length)
    const { buf } = this
    const at = this.pos
    for (let i = 0; i < length; i++) {
      buf[at + i] = (HEX[text.charCodeAt(2 * i)] << 4) | HEX[text.charCodeAt(2 * i + 1)]
    }
    this.pos = at + length
  }

  // An embedded message already encoded (its content): `field`, its length, its bytes.
  message (field, bytes) {
    this.tag(field, DELIMITED)
    const n = bytes.length
    this.varint(n)
    this.room(n)
    const { buf } = this
    const at = this.pos
    this.pos = at + n
    if (n > 16) buf.set(bytes, at)
    else for (let i = 0; i < n; i++) buf[at + i] = bytes[i]
  }

  // A packed repeated field of doubles, or of fixed64s (non-negative integers).
  packedDoubles (field, values) {
    this.tag(field, DELIMITED)
    this.varint(values.length * 8)
    this.room(values.length * 8)
    for (const v of values) {
      this.buf.writeDoubleLE(v, this.pos)
      this.pos += 8
    }
  }

  packedFixed64 (field, values) {
    this.tag(field, DELIMITED)
    this.varint(values.length * 8)
    for (const v of values) this.raw64(v % TWO_32, Math.floor(v / TWO_32))
  }

  // Bytes as they are (an encoded part of a message).
  raw (bytes) {
    this.room(bytes.length)
    this.buf.set(bytes, this.pos)
    this.pos += bytes.length
  }

  // A nested message in `field`: its content follows, until end().
  begin (field) {
    this.tag(field, DELIMITED)
    this.starts.push(this.pos)
  }

  end () {
    const start = this.starts.pop()
    const length = this.pos - start
    let size = 1
    for (let n = length; n >= 0x80; n = Math.floor(n / 0x80)) size++
    this.room(size)
    this.buf.copyWithin(start + size, start, this.pos)
    const end = this.pos + size
    this.pos = start
    this.varint(length)
    this.pos = end
  }

  finish () {
    return Buffer.from(this.buf.subarray(0, this.pos))
  }
}

module.exports = { ProtoWriter }
