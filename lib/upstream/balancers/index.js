'use strict'

// The balancing modes: one name -> factory map that also feeds --help and the README.
// A balancer is { pick(candidates, ctx) -> Backend | null }: candidates are the backends
// usable right now (upstream.js decides that, once, for every mode), ctx carries what
// the mode may key on (clientAddress, ...). No I/O, no per-connection state. A mode
// with `hash: true` keys on something and honours --hash-balance-factor.

const MODES = [
  {
    name: 'random',
    aliases: [],
    create: require('./random'),
    help: 'power of two random choices, the less loaded wins (default)'
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
    help: 'lowest decaying average of response time times in-flight'
  },
  {
    name: 'ip-hash',
    aliases: [],
    create: require('./ip-hash'),
    hash: true,
    help: 'consistent hashing of the client address'
  },
  {
    name: 'uri-hash',
    aliases: [],
    create: require('./uri-hash'),
    hash: true,
    protocol: 'http',
    help: 'http: consistent hashing of the request path'
  }
]

const DEFAULT_MODE = 'random'

// The modes that hash a key; --hash-balance-factor applies to them.
const HASH_MODES = MODES.filter(m => m.hash).map(m => m.name)

const byName = new Map()
for (const mode of MODES) {
  byName.set(mode.name, mode)
  for (const alias of mode.aliases) byName.set(alias, mode)
}

// The canonical name of a mode or alias, or null when there is no such mode.
function modeName (word) {
  const mode = byName.get(word)
  return mode ? mode.name : null
}

// options: { random, hashBalanceFactor } (each mode reads what it needs).
function createMode (name, options = {}) {
  const mode = byName.get(name)
  if (!mode) throw new TypeError(`unknown balancing mode ${name}`)
  return mode.create(options)
}

module.exports = { MODES, DEFAULT_MODE, HASH_MODES, modeName, createMode }
