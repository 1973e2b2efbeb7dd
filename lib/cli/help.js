'use strict'

const { OPTIONS } = require('../config/options')
const { MODES } = require('../upstream/balancers')
const { formatDuration } = require('../format')
const VERSION = require('../version')

function formatDefault (option) {
  if (option.shown) return option.shown
  if (option.type === 'duration') return formatDuration(option.default)
  return String(option.default)
}

// "-p, --port N" / "    --host ADDR": the left column of the options table.
function optionSignature (option) {
  const short = option.short ? `-${option.short}, ` : '    '
  return `${short}--${option.name}${option.arg ? ` ${option.arg}` : ''}`
}

function helpText () {
  const pad = (text, width) => text + ' '.repeat(Math.max(1, width - text.length))
  const modes = MODES.map(m => `  ${pad([m.name, ...m.aliases].join(', '), 24)}${m.help}`)
  const width = Math.max(...OPTIONS.map(o => optionSignature(o).length)) + 2
  const options = OPTIONS.map(o => {
    const text = o.default !== undefined ? `${o.help} (default ${formatDefault(o)})` : o.help
    return `  ${pad(optionSignature(o), width)}${text}`
  })
  return [
    `lila ${VERSION}: a load balancer in one file`,
    '',
    'Usage:',
    '  lila [mode] <backend>... [options]',
    '  lila --config lila.json         listeners from a JSON file; SIGHUP reloads it',
    '  lila demo [mode] [options]      three local demo backends behind lila',
    '',
    'Modes:',
    ...modes,
    '',
    'Backend:',
    '  host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]',
    '  host is a name, IPv4 or [IPv6]; ":8080" means 127.0.0.1:8080. Every address',
    '  a name resolves to is a backend, resolved again every --resolve-interval.',
    '  weight=N from 0 to 1000 (default 1); max-conn=N caps its connections (more',
    '  wait in a queue); slow-start=DUR ramps its weight up when it comes back;',
    '  backup backends take traffic only when no other backend can.',
    '',
    'Options:',
    ...options,
    '',
    'Durations need a unit: 500ms, 2s, 1m.',
    'Exit codes: 0 done, 1 runtime failure (e.g. the port is taken), 2 usage error.',
    ''
  ].join('\n')
}

module.exports = { helpText, formatDefault, optionSignature }
