'use strict'

// crypt(3)'s base64, as MD5-crypt ($apr1$) and SHA-crypt ($5$, $6$) write their hashes:
// six bits at a time, the lowest first, in this alphabet (not the one bcrypt uses).
const ALPHABET = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

// The `count` characters of the low bits of `value`.
function to64 (value, count) {
  let out = ''
  for (let i = 0; i < count; i++) {
    out += ALPHABET[value & 0x3f]
    value >>>= 6
  }
  return out
}

module.exports = { to64 }
