'use strict'

const { HttpError } = require('./parse')

// Follows a chunked body (RFC 9112 section 7.1) byte by byte through the chunk-size
// lines and trailers, and in strides through the data, to find where the body ends,
// refusing anything a strict parser would. lila forwards the bytes as they are (the
// framing stays chunked); `onData`, when given, receives just the data, for a client
// that cannot take chunked (HTTP/1.0). With `keepTrailers` it also keeps the trailer
// section's text (`trailers`, e.g. "Grpc-Status: 0\r\n"), for an HTTP/2 client, which
// gets trailers as fields of their own.

const SIZE = 0
const SIZE_LF = 1
const DATA = 2
const DATA_CR = 3
const DATA_LF = 4
const EXT_NAME_START = 5 // chunk-ext = *( ";" name [ "=" ( token / quoted-string ) ] )
const EXT_NAME = 6
const EXT_VALUE_START = 7
const EXT_VALUE = 8
const EXT_QUOTED = 9
const EXT_ESCAPE = 10
const EXT_QUOTED_END = 11
const TRAILER_START = 12 // trailer-section = *( field-name ":" field-value CRLF )
const TRAILER_NAME = 13
const TRAILER_VALUE = 14
const TRAILER_LF = 15
const FINAL_LF = 16

const MAX_SIZE_DIGITS = 12 // significant ones: 2^48 bytes; larger is an attack, not a body
const MAX_SIZE_LENGTH = 256 // leading zeros included: "0000000000000000005" is a legal 5
const MAX_EXTENSION = 4096
const MAX_TRAILERS = 16 * 1024

const HEX = new Int8Array(256).fill(-1)
for (let i = 0; i < 10; i++) HEX[48 + i] = i
for (let i = 0; i < 6; i++) { HEX[65 + i] = 10 + i; HEX[97 + i] = 10 + i }
const TCHAR = new Uint8Array(256)
const TCHARS = "!#$%&'*+-.^_`|~0123456789" + 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
for (const c of TCHARS) TCHAR[c.charCodeAt(0)] = 1

// No whitespace is taken around extensions: RFC 9112 allows some, parsers disagree on
// it, and disagreement about where a chunk ends is how bodies get smuggled.
class ChunkedReader {
  constructor (status = 400, { keepTrailers = false } = {}) {
    this.status = status // what to answer when the body is malformed
    this.trailers = keepTrailers ? '' : null // the trailer lines so far, when kept
    this.state = SIZE
    this.size = 0
    this.digits = 0 // significant digits of the chunk size so far
    this.length = 0 // all of them, leading zeros included
    this.remaining = 0
    this.data = 0 // the body's bytes so far, framing not counted
    this.extra = 0 // bytes of extension or trailers so far
  }

  fail (message) {
    throw new HttpError(this.status, `malformed chunked body: ${message}`)
  }

  // Read buf[start, end). Returns the index just past the body's last byte if the body
  // ends in this range, else -1 (more to come).
  read (buf, start, end, onData = null) {
    let i = start
    while (i < end) {
      const state = this.state
      if (state === DATA) {
        const n = Math.min(this.remaining, end - i)
        if (onData !== null) onData(buf, i, i + n)
        this.data += n
        this.remaining -= n
        i += n
        if (this.remaining === 0) this.state = DATA_CR
        continue
      }
      const c = buf[i++]
      switch (state) {
        case SIZE: {
          const v = HEX[c]
          if (v !== -1) {
            if (++this.length > MAX_SIZE_LENGTH) this.fail('chunk size line too long')
            if ((this.size !== 0 || v !== 0) && ++this.digits > MAX_SIZE_DIGITS) this.fail('chunk size too large')
            this.size = this.size * 16 + v
          } else if (this.length === 0) {
            this.fail('chunk size expected')
          } else if (c === 13) {
            this.state = SIZE_LF
          } else if (c === 59) { // ";"
            this.state = EXT_NAME_START
            this.extra = 0
          } else {
            this.fail('unexpected byte after chunk size')
          }
          break
        }
        case SIZE_LF:
          if (c !== 10) this.fail('CR without LF after chunk size')
          if (this.size === 0) {
            this.state = TRAILER_START
            this.extra = 0
          } else {
            this.state = DATA
            this.remaining = this.size
          }
          this.size = 0
          this.digits = 0
          this.length = 0
          break
        case DATA_CR:
          if (c !== 13) this.fail('chunk data longer than its size')
          this.state = DATA_LF
          break
        case DATA_LF:
          if (c !== 10) this.fail('CR without LF after chunk data')
          this.state = SIZE
          break
        case FINAL_LF:
          if (c !== 10) this.fail('CR without LF at the end of the body')
          return i
        default:
          if (state < TRAILER_START) {
            this.extension(c)
          } else {
            this.trailer(c)
            if (this.trailers !== null && this.state !== FINAL_LF) this.trailers += String.fromCharCode(c)
          }
      }
    }
    return -1
  }

  extension (c) {
    if (++this.extra > MAX_EXTENSION) this.fail('chunk extension too long')
    switch (this.state) {
      case EXT_NAME_START:
        if (TCHAR[c] === 0) this.fail('invalid chunk extension name')
        this.state = EXT_NAME
        return
      case EXT_NAME:
      case EXT_VALUE:
        if (TCHAR[c] === 1) return
        if (c === 61 && this.state === EXT_NAME) this.state = EXT_VALUE_START // "="
        else this.extensionEnd(c)
        return
      case EXT_VALUE_START:
        if (c === 34) this.state = EXT_QUOTED // '"'
        else if (TCHAR[c] === 1) this.state = EXT_VALUE
        else this.fail('invalid chunk extension value')
        return
      case EXT_QUOTED:
        if (c === 34) this.state = EXT_QUOTED_END
        else if (c === 92) this.state = EXT_ESCAPE // "\"
        else if (c < 32 && c !== 9) this.fail('control byte in a quoted chunk extension')
        else if (c === 127) this.fail('control byte in a quoted chunk extension')
        return
      case EXT_ESCAPE:
        if ((c < 32 && c !== 9) || c === 127) this.fail('control byte in a quoted chunk extension')
        this.state = EXT_QUOTED
        return
      case EXT_QUOTED_END:
        this.extensionEnd(c)
    }
  }

  // After an extension: another one, or the end of the chunk-size line.
  extensionEnd (c) {
    if (c === 59) this.state = EXT_NAME_START
    else if (c === 13) this.state = SIZE_LF
    else this.fail('invalid byte in a chunk extension')
  }

  trailer (c) {
    if (++this.extra > MAX_TRAILERS) this.fail('trailers too long')
    switch (this.state) {
      case TRAILER_START:
        if (c === 13) this.state = FINAL_LF
        else if (TCHAR[c] === 1) this.state = TRAILER_NAME
        else this.fail(c === 32 || c === 9 ? 'folded trailer line' : 'invalid trailer name')
        return
      case TRAILER_NAME:
        if (c === 58) this.state = TRAILER_VALUE // ":"
        else if (TCHAR[c] === 0) this.fail('invalid trailer name')
        return
      case TRAILER_VALUE:
        if (c === 13) this.state = TRAILER_LF
        else if ((c < 32 && c !== 9) || c === 127) this.fail('control byte in a trailer')
        return
      case TRAILER_LF:
        if (c !== 10) this.fail('CR without LF in trailers')
        this.state = TRAILER_START
    }
  }
}

module.exports = { ChunkedReader }
