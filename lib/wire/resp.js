'use strict'

// RESP, Redis's wire format (RESP2, what every Redis and Sentinel speaks without HELLO):
// commands encoded as arrays of bulk strings, replies parsed as they arrive, in pieces
// of any size. Pure: bytes in, values out; fleet/redis.js does the sockets.
//
//   encodeCommand(['SET', 'k', 'v']) -> its bytes: a string (all text) or a Buffer
//   const parser = new ReplyParser(reply => ...)   one call per whole reply, in order
//   parser.feed(chunk)                              throws a ProtocolError on bad bytes
//
// A reply is a string (+ simple, $ bulk: UTF-8 text), a number (:), null ($-1, *-1),
// an array of replies (*), or a ReplyError (-): Redis said no to that command.

const CRLF = '\r\n'
const CRLF_BYTES = Buffer.from(CRLF)
const MAX_BULK = 512 * 1024 * 1024 // Redis's own proto-max-bulk-len
const MAX_DEPTH = 8 // lila's replies nest two deep at most (EVAL of a table of tables)

class ReplyError extends Error {
  constructor (message) {
    super(message)
    this.name = 'ReplyError'
    this.prefix = message.split(' ', 1)[0] // ERR, NOSCRIPT, WRONGPASS, NOAUTH, READONLY...
  }
}

class ProtocolError extends Error {
  get name () { return 'ProtocolError' }
}

// One string when every argument is text (a decision's command: no Buffer made until
// the socket writes it), else a Buffer.
function encodeCommand (args) {
  let text = `*${args.length}${CRLF}`
  for (const arg of args) {
    if (Buffer.isBuffer(arg)) return encodeBuffers(args)
    const part = String(arg)
    text += `$${Buffer.byteLength(part)}${CRLF}${part}${CRLF}`
  }
  return text
}

function encodeBuffers (args) {
  const chunks = [Buffer.from(`*${args.length}${CRLF}`)]
  for (const arg of args) {
    const part = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg))
    chunks.push(Buffer.from(`$${part.length}${CRLF}`), part, CRLF_BYTES)
  }
  return Buffer.concat(chunks)
}

// Parses replies from pieces of the stream. An incomplete reply is parsed again from
// its start when more bytes come: lila's replies are small, so that costs less than
// keeping a parser's state across pieces.
class ReplyParser {
  constructor (onReply) {
    this.onReply = onReply
    this.buffer = null
    this.offset = 0
  }

  feed (chunk) {
    if (this.buffer === null || this.offset >= this.buffer.length) {
      this.buffer = chunk
    } else {
      this.buffer = Buffer.concat([this.buffer.subarray(this.offset), chunk])
    }
    this.offset = 0
    while (this.offset < this.buffer.length) {
      const parsed = this.parse(this.offset, 0)
      if (parsed === null) return // wait for more
      this.offset = parsed.end
      this.onReply(parsed.value)
    }
    this.buffer = null
    this.offset = 0
  }

  // The reply at `at`: { value, end } or null when the bytes end before it does.
  parse (at, depth) {
    const buf = this.buffer
    const eol = buf.indexOf(CRLF, at)
    if (eol === -1) {
      if (buf.length - at > 64 * 1024) throw new ProtocolError('a reply line longer than 64 KiB')
      return null
    }
    const type = buf[at]
    const line = buf.toString('latin1', at + 1, eol)
    const next = eol + 2
    switch (type) {
      case 0x2b: // +
        return { value: buf.toString('utf8', at + 1, eol), end: next }
      case 0x2d: // -
        return { value: new ReplyError(buf.toString('utf8', at + 1, eol)), end: next }
      case 0x3a: // :
        return { value: integerOf(line), end: next }
      case 0x24: { // $
        const length = integerOf(line)
        if (length === -1) return { value: null, end: next }
        if (length < 0 || length > MAX_BULK) throw new ProtocolError(`a bulk length of ${line}`)
        if (buf.length < next + length + 2) return null
        if (buf[next + length] !== 0x0d || buf[next + length + 1] !== 0x0a) {
          throw new ProtocolError('a bulk string not ended by CRLF')
        }
        return { value: buf.toString('utf8', next, next + length), end: next + length + 2 }
      }
      case 0x2a: { // *
        const count = integerOf(line)
        if (count === -1) return { value: null, end: next }
        if (count < 0 || depth >= MAX_DEPTH) throw new ProtocolError(`an array of ${line} at depth ${depth}`)
        const value = new Array(count)
        let end = next
        for (let i = 0; i < count; i++) {
          const item = this.parse(end, depth + 1)
          if (item === null) return null
          value[i] = item.value
          end = item.end
        }
        return { value, end }
      }
      default:
        throw new ProtocolError(`a reply of type ${JSON.stringify(String.fromCharCode(type))}`)
    }
  }
}

function integerOf (text) {
  if (!/^-?\d{1,18}$/.test(text)) throw new ProtocolError(`an integer ${JSON.stringify(text)}`)
  return Number(text)
}

module.exports = { encodeCommand, ReplyParser, ReplyError }
