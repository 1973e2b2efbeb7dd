'use strict'

// One given value ({ value, at }) through its option's parser, from either source: the
// command line (a string, named by its flag) or the JSON file (a JSON value of the type
// the option implies, named by its path). Used by builder.js and its parts.
//   jsonSource(file)                       the file as a source: how it words an error
//   parseValue(option, given, src)         one value, checked
//   parseValues(option, given, src)        one, or a frozen list for a `multiple` option
//   shown(value)                           a JSON value in an error: short, one line

const { UsageError } = require('../errors')
const { PARSERS, NUMERIC } = require('./parsers')

// Where values come from, for the wording of errors. Each value arrives as
// { value, at }: `at` is null on the command line (a value is named by its flag; see
// commandLineSource in argv.js) and the JSON path in the file ("listeners[1].connect-timeout"),
// which leads the message.
function jsonSource (file) {
  return {
    json: true,
    file,
    fail: (at, message) => new UsageError(`${file}: ${at}: ${message}`),
    about: () => '',
    setting: (name, value) => value === undefined ? `"${name}"` : `"${name}": ${JSON.stringify(value)}`
  }
}

// A JSON value in an error: short, on one line.
function shown (value) {
  const text = JSON.stringify(value)
  return text.length > 40 ? `${text.slice(0, 37)}...` : text
}

// One value, through its option's parser. From the file, a value must have the JSON
// type the option implies: true/false for a switch, a number or a string for a number,
// a string for everything else (durations need their unit: "3s", never 3000).
function parseValue (option, { value, at }, src) {
  if (!src.json) return PARSERS[option.type](value, option.flag, option)
  let text = value
  if (option.bare !== undefined && typeof value === 'boolean') { // "request-id": true
    if (!value) return option.default
    text = option.bare
  } else if (option.type === 'flag') {
    if (typeof value !== 'boolean') throw src.fail(at, `expected true or false, got ${shown(value)}`)
  } else if (NUMERIC.has(option.type) && typeof value === 'number') {
    text = String(value)
  } else if (typeof value !== 'string') {
    const expected = option.type === 'duration'
      ? 'a duration with a unit, e.g. "3s"'
      : NUMERIC.has(option.type) ? 'a number' : 'a string'
    throw src.fail(at, `expected ${expected}, got ${shown(value)}`)
  }
  try {
    return PARSERS[option.type](text, null, option)
  } catch (err) {
    if (err instanceof UsageError) throw src.fail(at, err.message)
    throw err
  }
}

// An option given more than once (`multiple`): a list from the command line, an array
// (or one string) from the file, one value from the environment. Each is parsed; the
// list frozen.
function parseValues (option, { value, at }, src) {
  if (!option.multiple) return parseValue(option, { value, at }, src)
  if (src.json && typeof value !== 'string' && !Array.isArray(value)) {
    throw src.fail(at, `expected a string or a list of strings, got ${shown(value)}`)
  }
  const list = Array.isArray(value) ? value : [value]
  const atOf = i => src.json && Array.isArray(value) ? `${at}[${i}]` : at
  return Object.freeze(list.map((item, i) => parseValue(option, { value: item, at: atOf(i) }, src)))
}

module.exports = { jsonSource, parseValue, parseValues, shown }
