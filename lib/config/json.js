'use strict'

// A JSON parser (RFC 8259) for the config file, for the sake of its errors: JSON.parse
// says "at position 1234" at best and nothing at worst, and silently keeps the last of
// two equal keys. This one says "line 12, column 5", refuses a repeated key (in a config
// file it is a mistake, never an intent), and caps nesting so that no input can exhaust
// the stack. Objects come out with a null prototype, so a key such as "__proto__" is
// only a key. It reads JSON with comments, as VS Code and TypeScript do: // to the end
// of the line and block comments (slash-star to star-slash) wherever space may go, and
// a comma after the last member of an object or array; nothing else beyond JSON (no
// single quotes, no bare keys).

const { JsonError } = require('../errors')

// (lib/ never writes star-slash: ./lila holds it in a comment, scripts/build.js.)
const BLOCK_COMMENT_END = '\x2a/'

const MAX_DEPTH = 64

const ESCAPES = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y

function parseJson (text) {
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0 // a byte order mark, as some editors write

  const fail = (message, at = i) => {
    let line = 1
    let lineStart = 0
    for (let k = 0; k < at && k < text.length; k++) {
      if (text.charCodeAt(k) === 10) {
        line++
        lineStart = k + 1
      }
    }
    return new JsonError(message, line, at - lineStart + 1)
  }
  const describe = () => i >= text.length ? 'end of file' : JSON.stringify(text[i])

  // Space and comments.
  const space = () => {
    for (;;) {
      const c = text.charCodeAt(i)
      if (c === 32 || c === 9 || c === 10 || c === 13) {
        i++
      } else if (c === 47 && text.charCodeAt(i + 1) === 47) { // //
        const end = text.indexOf('\n', i)
        i = end === -1 ? text.length : end + 1
      } else if (c === 47 && text.charCodeAt(i + 1) === 42) { // /*
        const end = text.indexOf(BLOCK_COMMENT_END, i + 2)
        if (end === -1) throw fail(`unterminated comment: expected ${BLOCK_COMMENT_END} to close the /* here`)
        i = end + 2
      } else if (c === 47) {
        throw fail('unexpected "/": expected // or /* to start a comment')
      } else {
        return
      }
    }
  }

  const value = depth => {
    space()
    if (depth > MAX_DEPTH) throw fail(`nested more than ${MAX_DEPTH} deep`)
    const c = text[i]
    if (c === '{') return object(depth + 1)
    if (c === '[') return array(depth + 1)
    if (c === '"') return string()
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) {
        i += word.length
        return v
      }
    }
    NUMBER.lastIndex = i
    const match = NUMBER.exec(text)
    if (match !== null && match[0] !== '-') {
      i += match[0].length
      return Number(match[0])
    }
    throw fail(`unexpected ${describe()}: expected a value`)
  }

  const object = depth => {
    const out = Object.create(null)
    i++ // {
    space()
    if (text[i] === '}') {
      i++
      return out
    }
    for (;;) {
      space()
      if (text[i] !== '"') throw fail(`unexpected ${describe()}: expected a "key" in double quotes`)
      const at = i
      const key = string()
      if (Object.prototype.hasOwnProperty.call(out, key)) {
        throw fail(`key ${JSON.stringify(key)} appears twice in this object`, at)
      }
      space()
      if (text[i] !== ':') throw fail(`unexpected ${describe()}: expected ":" after ${JSON.stringify(key)}`)
      i++
      out[key] = value(depth)
      space()
      if (text[i] === ',') {
        i++
        space()
        if (text[i] === '}') { // a trailing comma
          i++
          return out
        }
        continue
      }
      if (text[i] === '}') {
        i++
        return out
      }
      throw fail(`unexpected ${describe()}: expected "," or "}"`)
    }
  }

  const array = depth => {
    const out = []
    i++ // [
    space()
    if (text[i] === ']') {
      i++
      return out
    }
    for (;;) {
      out.push(value(depth))
      space()
      if (text[i] === ',') {
        i++
        space()
        if (text[i] === ']') { // a trailing comma
          i++
          return out
        }
        continue
      }
      if (text[i] === ']') {
        i++
        return out
      }
      throw fail(`unexpected ${describe()}: expected "," or "]"`)
    }
  }

  const string = () => {
    const start = i
    i++ // "
    let out = ''
    let from = i
    for (;;) {
      if (i >= text.length) throw fail('unterminated string', start)
      const c = text.charCodeAt(i)
      if (c === 34) { // "
        out += text.slice(from, i)
        i++
        return out
      }
      if (c < 32) throw fail('control character in a string: expected it escaped, e.g. \\n')
      if (c !== 92) { // not a backslash
        i++
        continue
      }
      out += text.slice(from, i)
      const e = text[i + 1]
      if (e === 'u') {
        const hex = text.slice(i + 2, i + 6)
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw fail('invalid \\u escape: expected four hex digits')
        out += String.fromCharCode(parseInt(hex, 16))
        i += 6
      } else if (e !== undefined && Object.prototype.hasOwnProperty.call(ESCAPES, e)) {
        out += ESCAPES[e]
        i += 2
      } else {
        throw fail(`invalid escape ${JSON.stringify('\\' + (e || ''))}`)
      }
      from = i
    }
  }

  const result = value(0)
  space()
  if (i < text.length) throw fail(`unexpected ${describe()} after the value`)
  return result
}

module.exports = { parseJson, JsonError }
