'use strict'

// HPACK's Huffman code (RFC 7541 5.2 and Appendix B): decoding, which every peer may
// use on any string, and encoding, which lila's encoder does not use (hpack.js says
// why) but the tests and the fuzzer do.
//
// Decoding walks the code tree four bits at a time through a table built once at load
// (as nghttp2 does): from each of the tree's 256 inner nodes, each nibble leads to an
// inner node, having emitted at most one symbol on the way (no code is shorter than 5
// bits). A string ends well only on a symbol's end or inside the first 7 bits of EOS's
// all-ones code (its padding); EOS itself may not appear.

// The code of each symbol 0..255, and its length in bits (RFC 7541 Appendix B). EOS,
// symbol 256, is 30 one bits.
const CODES = [
  0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7,
  0xfffffe8, 0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec,
  0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3,
  0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb,
  0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa,
  0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
  0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
  0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc,
  0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62,
  0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a,
  0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72,
  0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22,
  0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26,
  0x27, 0x6, 0x74, 0x75, 0x28, 0x29, 0x2a, 0x7,
  0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78,
  0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc,
  0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4, 0x3fffd5, 0x7fffd9,
  0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf,
  0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
  0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef,
  0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde,
  0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec,
  0x1fffe0, 0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef,
  0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4, 0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1,
  0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8, 0x1ffffec,
  0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed,
  0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2,
  0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5,
  0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
  0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4,
  0x3ffffeb, 0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea,
  0x7ffffeb, 0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee
]
const LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26
]
const EOS = 256

// The tree: inner nodes 0..255 (0 the root), child[node * 2 + bit] an inner node, or a
// leaf when negative: -1 - symbol.
const child = new Int16Array(512).fill(0x7fff)
{
  let inner = 1
  const add = (code, length, symbol) => {
    let node = 0
    for (let i = length - 1; i >= 0; i--) {
      const slot = node * 2 + ((code >>> i) & 1)
      if (i === 0) {
        child[slot] = -1 - symbol
      } else {
        if (child[slot] === 0x7fff) child[slot] = inner++
        node = child[slot]
      }
    }
  }
  for (let s = 0; s < 256; s++) add(CODES[s], LENGTHS[s], s)
  add(0x3fffffff, 30, EOS)
}

// STEP[node * 16 + nibble]: the inner node reached (bits 0-7), a symbol emitted (bit 8
// set, the symbol in bits 9-16), or FAIL (EOS decoded).
const EMIT = 0x100
const FAIL = 0x20000
const STEP = new Int32Array(256 * 16)
// ACCEPT[node]: a string may end there (the root, or up to 7 one bits into EOS).
const ACCEPT = new Uint8Array(256)
{
  for (let node = 0; node < 256; node++) {
    for (let nibble = 0; nibble < 16; nibble++) {
      let at = node
      let out = 0
      for (let i = 3; i >= 0; i--) {
        const next = child[at * 2 + ((nibble >>> i) & 1)]
        if (next < 0) {
          const symbol = -1 - next
          if (symbol === EOS) {
            out = FAIL
            break
          }
          out = EMIT | (symbol << 9)
          at = 0
        } else {
          at = next
        }
      }
      STEP[node * 16 + nibble] = out === FAIL ? FAIL : out | at
    }
  }
  let node = 0
  ACCEPT[0] = 1
  for (let depth = 1; depth <= 7; depth++) {
    node = child[node * 2 + 1]
    ACCEPT[node] = 1
  }
}

// Scratch space for decoded strings: a Huffman string of n bytes decodes to at most
// 8n/5 bytes; longer strings get a buffer of their own.
let scratch = Buffer.allocUnsafeSlow(4096)

// buf[start, end) decoded, as a latin1 string (HTTP field octets, as http1/parse.js
// reads them); null when it is not a valid Huffman string.
function decode (buf, start, end) {
  const most = ((end - start) * 8 / 5) | 0
  if (most > scratch.length) scratch = Buffer.allocUnsafeSlow(Math.max(most, scratch.length * 2))
  const out = scratch
  let n = 0
  let node = 0
  for (let i = start; i < end; i++) {
    const byte = buf[i]
    let step = STEP[node * 16 + (byte >>> 4)]
    if (step & FAIL) return null
    if (step & EMIT) out[n++] = (step >>> 9) & 0xff
    step = STEP[(step & 0xff) * 16 + (byte & 15)]
    if (step & FAIL) return null
    if (step & EMIT) out[n++] = (step >>> 9) & 0xff
    node = step & 0xff
  }
  if (ACCEPT[node] === 0) return null
  return out.latin1Slice(0, n)
}

// The Huffman length in bytes of a latin1 string.
function encodedLength (text) {
  let bits = 0
  for (let i = 0; i < text.length; i++) bits += LENGTHS[text.charCodeAt(i) & 0xff]
  return (bits + 7) >>> 3
}

// Write text Huffman-coded at buf[at]; returns the end. The bits not yet written are
// under 8 + 30, kept in a double (exact to 53 bits), not a 32-bit integer.
function encode (text, buf, at) {
  let pending = 0
  let count = 0
  for (let i = 0; i < text.length; i++) {
    const symbol = text.charCodeAt(i) & 0xff
    const length = LENGTHS[symbol]
    pending = pending * (1 << length) + CODES[symbol]
    count += length
    while (count >= 8) {
      count -= 8
      buf[at++] = Math.floor(pending / 2 ** count) & 0xff
      pending = pending % 2 ** count
    }
  }
  if (count > 0) buf[at++] = ((pending << (8 - count)) | (0xff >>> count)) & 0xff
  return at
}

module.exports = { decode, encode, encodedLength }
