'use strict'

// The balancing modes: one name -> factory map that also feeds --help and the README.
// A balancer is { pick(candidates, ctx) -> Backend | null }: candidates are the backends
// usable right now (upstream.js decides that, once, for every mode), ctx carries what
// the mode may key on (clientAddress, ...). No I/O, no per-connection state. A mode
// with `hash: true` keys on something and honours --hash-balance-factor. A mode with
// `arg` is written NAME:ARG (header-hash:X-User): `arg` says what ARG is, `argCase`
// whether it is lower-cased (header names are case-insensitive, cookie names are not);
// the factory gets it as options.arg, and the config holds the mode as one word
// ("header-hash:x-user").

const MODES = [
  {
    name: 'random',
    aliases: [],
    create: require('./random'),
    help: 'two random picks, the less loaded wins (default)'
  },
  {
    name: 'round-robin',
    aliases: ['rr'],
    create: require('./round-robin'),
    help: 'smooth weighted round robin'
  },
  {
    name: 'least-connections',
    aliases: ['lc'],
    create: require('./least-connections'),
    help: 'fewest live connections relative to weight'
  },
  {
    name: 'least-time',
    aliases: [],
    create: require('./least-time'),
    help: 'lowest average response time times requests in flight'
  },
  {
    name: 'ip-hash',
    aliases: [],
    create: require('./ip-hash'),
    hash: true,
    help: 'consistent hash of the client address'
  },
  {
    name: 'uri-hash',
    aliases: [],
    create: require('./uri-hash'),
    hash: true,
    protocol: 'http',
    help: 'http: consistent hash of the request path'
  },
  {
    name: 'header-hash',
    aliases: [],
    arg: 'NAME',
    argCase: 'lower',
    example: 'header-hash:X-User',
    argHelp: 'a header name',
    create: require('./header-hash'),
    hash: true,
    protocol: 'http',
    help: 'http: consistent hash of header NAME, else round-robin'
  },
  {
    name: 'cookie-hash',
    aliases: [],
    arg: 'NAME',
    argCase: 'exact',
    example: 'cookie-hash:SESSIONID',
    argHelp: 'a cookie name',
    create: require('./cookie-hash'),
    hash: true,
    protocol: 'http',
    help: 'http: consistent hash of cookie NAME, else round-robin'
  }
]

const DEFAULT_MODE = 'random'

// The modes that hash a key; --hash-balance-factor applies to them.
const HASH_MODES = MODES.filter(m => m.hash).map(m => m.name)

// A header or cookie name: an RFC 9110 token, up to 64 characters.
const ARG = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/

// How a mode is written where modes are listed (--help, "expected one of"):
// header-hash:NAME.
const modeWord = mode => mode.arg ? `${mode.name}:${mode.arg}` : mode.name

const byName = new Map()
for (const mode of MODES) {
  byName.set(mode.name, mode)
  for (const alias of mode.aliases) byName.set(alias, mode)
}

// word -> [the MODES row its name part names (undefined if none), its ARG or null].
function split (word) {
  if (typeof word !== 'string') return [undefined, null]
  const colon = word.indexOf(':')
  if (colon === -1) return [byName.get(word), null]
  return [byName.get(word.slice(0, colon)), word.slice(colon + 1)]
}

// The canonical name of a mode or alias (header-hash:NAME with its name as the mode
// keeps it), or null when there is no such mode or its ARG is missing or invalid.
function modeName (word) {
  const [mode, arg] = split(word)
  if (mode === undefined || (arg === null) !== !mode.arg) return null
  if (arg === null) return mode.name
  if (!ARG.test(arg)) return null
  return `${mode.name}:${mode.argCase === 'lower' ? arg.toLowerCase() : arg}`
}

// The MODES row of a word whose name part is a mode, valid or not (header-hash,
// header-hash:bad name): what a word meant as a mode is checked against. Or undefined.
function modeOf (word) {
  return split(word)[0]
}

// Is this word (on the command line, in a --route) meant as a mode rather than a
// backend? A mode's name, alone or, for a mode that takes one, with :ARG. (rr:80 is a
// backend.)
function isModeWord (word) {
  const [mode, arg] = split(word)
  return mode !== undefined && (arg === null || Boolean(mode.arg))
}

// options: { random, hashBalanceFactor } (each mode reads what it needs); a mode with
// an argument gets it as `arg`. `name` is canonical (modeName's).
function createMode (name, options = {}) {
  const [mode, arg] = split(name)
  if (!mode) throw new TypeError(`unknown balancing mode ${name}`)
  return mode.create(arg === null ? options : { ...options, arg })
}

module.exports = { MODES, DEFAULT_MODE, HASH_MODES, modeName, modeOf, isModeWord, modeWord, createMode }
