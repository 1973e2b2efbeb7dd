'use strict'

// A pool's mode and backends as a listener or a route gives them, checked (builder.js,
// build-routes.js): buildMode(modeEntry, settings, at, src), buildBackends(entries, src),
// isHashMode(mode).

const { specAddress } = require('../address')
const { BY_NAME } = require('./options')
const { MODE_NAMES, MODE_WORDS } = require('./parsers')
const { quote } = require('./values')
const { parseBackend } = require('./backend-spec')
const { didYouMean } = require('./suggest')
const { shown } = require('./given-values')
const { DEFAULT_MODE, modeName, modeOf, modeWord, HASH_MODES } = require('../upstream/balancers')

const isHashMode = mode => modeOf(mode).hash === true
const HASH_WORDS = HASH_MODES.map(name => modeWord(modeOf(name))).join(', ')

// The mode, checked against the protocol and hash-balance-factor. `at(name)` is where
// an option was given.
function buildMode (modeEntry, settings, at, src) {
  let mode = DEFAULT_MODE
  if (modeEntry !== undefined) {
    if (src.json && typeof modeEntry.value !== 'string') {
      throw src.fail(modeEntry.at, `expected a mode name, got ${shown(modeEntry.value)}`)
    }
    mode = modeName(modeEntry.value)
    const meant = modeOf(modeEntry.value)
    if (mode === null && meant !== undefined && meant.arg) {
      const message = `invalid mode ${quote(modeEntry.value)}: expected ${modeWord(meant)}, ` +
        `NAME ${meant.argHelp} (letters, digits, - _ . and the like), e.g. ${meant.example}`
      throw src.fail(modeEntry.at, message)
    }
    if (mode === null) {
      const hint = didYouMean(modeEntry.value, MODE_WORDS) || `expected one of ${MODE_NAMES}`
      throw src.fail(modeEntry.at, `unknown mode ${quote(modeEntry.value)}: ${hint}`)
    }
  }
  const needs = modeOf(mode).protocol
  const kind = settings.protocol === 'grpc' ? 'http' : settings.protocol // gRPC is HTTP
  if (needs && kind !== needs) {
    throw src.fail(modeEntry.at, `mode ${mode} needs ${src.setting('protocol', needs)}`)
  }
  if (settings.hashBalanceFactor !== null && !isHashMode(mode)) {
    const subject = src.about(BY_NAME.get('hash-balance-factor'))
    const message = `${subject}does not apply to mode ${quote(mode)}: expected a hash mode (${HASH_WORDS})`
    throw src.fail(at('hash-balance-factor'), message)
  }
  return mode
}

// [{ value, at }] backend strings -> backends as parseBackend returns them, each once.
function buildBackends (entries, src) {
  const backends = []
  const seen = new Set()
  for (const { value, at } of entries) {
    if (typeof value !== 'string') {
      throw src.fail(at, `expected a backend such as "10.0.0.1:80,weight=2", got ${shown(value)}`)
    }
    let backend
    try {
      backend = parseBackend(value)
    } catch (err) {
      throw src.fail(at, err.message)
    }
    const address = specAddress(backend)
    if (seen.has(address)) {
      const message = `duplicate backend ${quote(address)}: expected each backend once (use weight=N to send it more)`
      throw src.fail(at, message)
    }
    seen.add(address)
    backends.push(backend)
  }
  return backends
}

module.exports = { buildMode, buildBackends, isHashMode }
