'use strict'

// Accept-Encoding (RFC 9110 12.5.3): which of the codings lila offers a client takes,
// by its q-values. Pure.
//
//   const choose = encodingChooser(['br', 'gzip'])   the codings offered, preferred first
//   choose(acceptEncoding) -> 'br', 'gzip' or null (none: the body goes as it is)
//
// A coding the client names with q=0 is refused, as is one it does not name unless "*"
// covers it; among those it takes, its highest q wins, then lila's order. x-gzip is
// gzip. Clients send a few distinct values, so the answers are remembered (bounded).

const REMEMBERED = 256
const QVALUE = /^q=(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/i

function encodingChooser (offered) {
  const known = new Map()
  return acceptEncoding => {
    if (typeof acceptEncoding !== 'string' || acceptEncoding === '') return null
    let choice = known.get(acceptEncoding)
    if (choice !== undefined) return choice
    choice = choose(offered, acceptEncoding)
    if (known.size >= REMEMBERED) known.clear()
    known.set(acceptEncoding, choice)
    return choice
  }
}

function choose (offered, acceptEncoding) {
  const q = qValues(acceptEncoding)
  let best = null
  let bestQ = 0
  for (const coding of offered) {
    const value = q.has(coding) ? q.get(coding) : q.has('*') ? q.get('*') : 0
    if (value > bestQ) {
      best = coding
      bestQ = value
    }
  }
  return best
}

// "gzip;q=0.8, br, *;q=0" -> Map { gzip: 0.8, br: 1, '*': 0 }. A member whose q cannot
// be read is left out (other parameters are no part of the grammar, and ignored); a
// coding named twice keeps its first.
function qValues (header) {
  const out = new Map()
  for (const member of header.split(',')) {
    const [name, ...params] = member.split(';').map(part => part.trim())
    if (name === '') continue
    let q = 1
    let readable = true
    for (const param of params) {
      const compact = param.replace(/\s+/g, '')
      if (!/^q=/i.test(compact)) continue
      const match = QVALUE.exec(compact)
      if (match === null) readable = false
      else q = Number(match[1])
    }
    const coding = name.toLowerCase() === 'x-gzip' ? 'gzip' : name.toLowerCase()
    if (readable && !out.has(coding)) out.set(coding, q)
  }
  return out
}

module.exports = { encodingChooser, qValues }
