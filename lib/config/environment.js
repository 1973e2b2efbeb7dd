'use strict'

// Options from the environment: LILA_<NAME> for --name (LILA_LOG_LEVEL=debug,
// LILA_RETRY_BUDGET=10%, LILA_FORWARDED=1, LILA_REQUEST_ID=1 for a bare --request-id;
// an option given more than once takes one value per line, LILA_SET_HEADER=$'A: 1\nB: 2').
// A flag on the command line wins over the environment, which wins over the config
// file. Each value is checked here, so that a bad one is named by its variable:
// `invalid value "x" for LILA_RETRIES: ...`.

const { OPTIONS } = require('./options')
const { PARSERS } = require('./parsers')
const { UsageError } = require('../errors')

const TRUE = ['1', 'true', 'yes', 'on']
const FALSE = ['0', 'false', 'no', 'off', '']

const variableOf = option => `LILA_${option.name.toUpperCase().replace(/-/g, '_')}`

// env -> Map of option name -> { value, variable, option }: the value as a flag would
// give it (text; true for a switch turned on). Switches turned off are left out.
function environmentValues (env = {}) {
  const out = new Map()
  for (const option of OPTIONS) {
    if (option.scope === 'cli') continue
    const variable = variableOf(option)
    const text = env[variable]
    if (text === undefined) continue
    if (option.type === 'flag') {
      const word = text.trim().toLowerCase()
      if (FALSE.includes(word)) continue
      if (!TRUE.includes(word)) {
        throw new UsageError(`invalid value ${JSON.stringify(text)} for ${variable}: ` +
          'expected 1, true, yes or on (0, false, no or off: not set)')
      }
      out.set(option.name, { value: true, variable, option })
      continue
    }
    if (option.bare !== undefined && TRUE.includes(text.trim().toLowerCase())) {
      out.set(option.name, { value: option.bare, variable, option })
      continue
    }
    if (option.multiple) { // one value per line
      const values = text.split('\n').map(line => line.trim()).filter(line => line !== '')
      for (const value of values) PARSERS[option.type](value, variable, option)
      out.set(option.name, { value: values, variable, option })
      continue
    }
    PARSERS[option.type](text, variable, option)
    out.set(option.name, { value: text, variable, option })
  }
  return out
}

module.exports = { environmentValues, variableOf }
