'use strict'

const { HttpError } = require('./parse')

// Follows a chunked body (RFC 9112 section 7.1) byte by byte through the chunk-size
// lines and trailers, and in strides through the data, to find where the body ends,
// refusing anything a strict parser would. lila forwards the bytes as they are (the
// framing stays chunked); `onData`, when given, receives just the data, for a client
// that cannot take chunked (HTTP/1.0).

const SIZE = 0
const EXTENSION = 1
const SIZE_LF = 2
const DATA = 3
const DATA_CR = 4
const DATA_LF = 5
const TRAILER_START = 6
const TRAILER = 7
const TRAILER_LF = 8
const FINAL_LF = 9

const MAX_SIZE_DIGITS = 12 // 2^48 bytes: larger is an attack, not a body
const MAX_EXTENSION = 4096
const MAX_TRAILERS = 16 * 1024

const HEX = new Int8Array(256).fill(-1)
for (let i = 0; i < 10; i++) HEX[48 + i] = i
for (let i = 0; i < 6; i++) { HEX[65 + i] = 10 + i; HEX[97 + i] = 10 + i }

class ChunkedReader {
  constructor (status = 400) {
    this.status = status // what to answer when the body is malformed
    this.state = SIZE
    this.size = 0
    this.digits = 0
    this.remaining = 0
    this.extra = 0 // bytes of extension or trailers so far
    this.done = false
  }

  fail (message) {
    throw new HttpError(this.status, `malformed chunked body: ${message}`)
  }

  // Read buf[start, end). Returns the index just past the body's last byte if the body
  // ends in this range, else -1 (more to come).
  read (buf, start, end, onData = null) {
    let i = start
    while (i < end) {
      switch (this.state) {
        case DATA: {
          const n = Math.min(this.remaining, end - i)
          if (onData !== null) onData(buf, i, i + n)
          this.remaining -= n
          i += n
          if (this.remaining === 0) this.state = DATA_CR
          continue
        }
        case SIZE: {
          const c = buf[i]
          const v = HEX[c]
          if (v !== -1) {
            if (++this.digits > MAX_SIZE_DIGITS) this.fail('chunk size too large')
            this.size = this.size * 16 + v
          } else if (this.digits === 0) {
            this.fail('chunk size expected')
          } else if (c === 13) {
            this.state = SIZE_LF
          } else if (c === 59) { // ";"
            this.state = EXTENSION
            this.extra = 0
          } else {
            this.fail('unexpected byte after chunk size')
          }
          break
        }
        case EXTENSION: {
          const c = buf[i]
          if (c === 13) this.state = SIZE_LF
          else if ((c < 32 && c !== 9) || c === 127) this.fail('control byte in chunk extension')
          else if (++this.extra > MAX_EXTENSION) this.fail('chunk extension too long')
          break
        }
        case SIZE_LF:
          if (buf[i] !== 10) this.fail('CR without LF after chunk size')
          if (this.size === 0) {
            this.state = TRAILER_START
            this.extra = 0
          } else {
            this.state = DATA
            this.remaining = this.size
          }
          this.size = 0
          this.digits = 0
          break
        case DATA_CR:
          if (buf[i] !== 13) this.fail('chunk data longer than its size')
          this.state = DATA_LF
          break
        case DATA_LF:
          if (buf[i] !== 10) this.fail('CR without LF after chunk data')
          this.state = SIZE
          break
        case TRAILER_START: {
          const c = buf[i]
          if (c === 13) this.state = FINAL_LF
          else if (c === 32 || c === 9) this.fail('folded trailer line')
          else this.trailerByte(c)
          break
        }
        case TRAILER:
          this.trailerByte(buf[i])
          break
        case TRAILER_LF:
          if (buf[i] !== 10) this.fail('CR without LF in trailers')
          this.state = TRAILER_START
          break
        case FINAL_LF:
          if (buf[i] !== 10) this.fail('CR without LF at the end of the body')
          this.done = true
          return i + 1
      }
      i++
    }
    return -1
  }

  trailerByte (c) {
    if (c === 13) {
      this.state = TRAILER_LF
      return
    }
    if ((c < 32 && c !== 9) || c === 127) this.fail('control byte in a trailer')
    if (++this.extra > MAX_TRAILERS) this.fail('trailers too long')
    this.state = TRAILER
  }
}

module.exports = { ChunkedReader }
