'use strict'

const { OPTIONS, GROUPS } = require('../config/options')
const { MODES, modeWord } = require('../upstream/balancers')
const { BACKEND_SYNTAX } = require('../config/parsers')
const { formatDuration } = require('../format')
const VERSION = require('../version')

// The width --help is wrapped to: the terminal's, 80 when it is not a terminal. Below 40
// nothing reads well; above 100 lines are too long to read, so wider terminals get 100.
const DEFAULT_WIDTH = 80
const MIN_WIDTH = 40
const MAX_WIDTH = 100
// A description column narrower than this goes under its option instead of beside it.
const MIN_TEXT = 30
const NBSP = '\u00a0' // joins the words of a default, so that it moves to the next line whole

// Commands a newcomer can paste, each with what it shows; a test parses every one.
const EXAMPLES = [
  ['HTTP requests in turns; each backend checked with GET /health every 2s',
    'lila rr app1:8080 app2:8080 --protocol http --check http:/health'],
  ['local ports, one weighted 3, a backup; a status page on 127.0.0.1:9000',
    'lila lc :9001 :9002,weight=3 :9003,backup --status-port 9000'],
  ['development: every dev server listening on ports 3000 to 3009, as they start and stop',
    'lila rr :3000-3009 --protocol http'],
  ['TLS terminated on port 443',
    'lila app1:8080 app2:8080 -p 443 --tls-cert cert.pem --tls-key key.pem'],
  ['https://localhost for your dev servers, with lila\'s own CA (it says how to trust it)',
    'lila rr :3000 :3001 --protocol http --tls'],
  ['HTTPS on 443 with a certificate lila gets from Let\'s Encrypt and renews itself',
    'lila app:8080 --protocol http -p 443 --tls acme --tls-names example.com'],
  ['one worker process per core, all on port 80',
    'lila app1:8080 app2:8080 -p 80 --workers auto'],
  ['several listeners from a file; SIGHUP reloads it',
    'lila --config /etc/lila/lila.json']
]

function helpWidth (columns) {
  if (!Number.isInteger(columns) || columns <= 0) return DEFAULT_WIDTH
  return Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, columns))
}

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

// `text` in lines of at most `width` columns, broken between words only. A word longer
// than a line (BACKEND_SYNTAX at 40 columns) is broken where its syntax allows.
function wrap (text, width) {
  const lines = []
  let line = ''
  for (const word of text.split(' ').flatMap(w => splitWord(w, width))) {
    if (line === '') {
      line = word
    } else if (line.length + 1 + word.length <= width) {
      line += ` ${word}`
    } else {
      lines.push(line)
      line = word
    }
  }
  lines.push(line)
  return lines.map(l => l.replaceAll(NBSP, ' '))
}

// Break at a joined space or before "[", else after "," or "|", else at the width.
function splitWord (word, width) {
  const pieces = []
  while (word.length > width) {
    const at = breakAt(word, width, i => word[i] === NBSP || word[i] === '[') ||
      breakAt(word, width, i => word[i - 1] === ',' || word[i - 1] === '|') || width
    pieces.push(word.slice(0, at))
    word = word.slice(word[at] === NBSP ? at + 1 : at)
  }
  pieces.push(word)
  return pieces
}

// The last position up to `width` where `can(i)` allows a break, or 0.
function breakAt (word, width, can) {
  for (let i = width; i > 0; i--) if (can(i)) return i
  return 0
}

// The width of a table's text column: beside a left column `leftWidth` wide, indented by
// two; or, when that leaves it too narrow, under it, indented by six (`under` true).
function textColumn (width, leftWidth) {
  const beside = width - 2 - leftWidth
  return beside >= MIN_TEXT ? { width: beside, under: false } : { width: width - 6, under: true }
}

// Two columns, [left, text] per row (see textColumn).
function table (rows, width, leftWidth = Math.max(...rows.filter(r => r[1]).map(([left]) => left.length)) + 2) {
  const column = 2 + leftWidth
  const textWidth = textColumn(width, leftWidth)
  const out = []
  for (const [left, text = ''] of rows) {
    if (!textWidth.under) {
      const lines = wrap(text, textWidth.width)
      out.push(`  ${left.padEnd(leftWidth)}${lines[0]}`.trimEnd(), ...lines.slice(1).map(l => ' '.repeat(column) + l))
    } else {
      out.push(...wrap(left.trim(), width - 2).map(l => `  ${l}`))
      if (text) out.push(...wrap(text, textWidth.width).map(l => `      ${l}`))
    }
  }
  return out
}

// An option's description with its default; the default kept whole when it fits a line.
function describe (option, textWidth) {
  if (option.default === undefined) return option.help
  const shown = `(default ${formatDefault(option)})`
  return `${option.help} ${shown.length <= textWidth ? shown.replaceAll(' ', NBSP) : shown}`
}

// A command broken with " \" continuations, so that it still pastes into a shell; an
// option stays on the line of its value.
function command (text, width) {
  const room = width - 8 // the continuation's indent and " \"
  const units = text.split(/ (?=-)/).map(unit => unit.length <= room ? unit.replaceAll(' ', NBSP) : unit)
  const lines = wrap(units.join(' '), room)
  return lines.map((line, i) => `${i === 0 ? '  ' : '      '}${line}${i < lines.length - 1 ? ' \\' : ''}`)
}

function helpText (columns) {
  const width = helpWidth(columns)
  const paragraph = (text, indent = '') => wrap(text, width - indent.length).map(l => indent + l)
  // One left column for every group, so that they line up.
  const leftWidth = Math.max(...OPTIONS.map(o => optionSignature(o).length)) + 2
  const textWidth = textColumn(width, leftWidth).width
  const groups = GROUPS.flatMap(group => [
    '',
    `${group.title}:`,
    ...table(group.options.map(o => [optionSignature(o), describe(o, textWidth)]), width, leftWidth)
  ])
  return [
    ...paragraph(`lila ${VERSION}: a load balancer in one file`),
    '',
    'Usage:',
    ...table([
      ['lila [mode] <backend>... [options]'],
      ['lila --config lila.json', 'listeners from a JSON file; SIGHUP reloads it'],
      ['lila demo [mode] [options]', 'three local demo backends behind lila'],
      ['lila upgrade PID', 'a new lila takes over its sockets (or --pid-file FILE; SIGUSR2)'],
      ['lila help, lila version', 'this help; the version'],
      ['lila completion bash|zsh', 'tab completion: source <(lila completion bash)']
    ], width),
    '',
    'Modes:',
    ...table(MODES.map(m => [[modeWord(m), ...m.aliases].join(', '), m.help]), width),
    '',
    'Backend:',
    ...paragraph(BACKEND_SYNTAX, '  '),
    ...paragraph('host is a name, IPv4 or [IPv6]; ":8080" means 127.0.0.1:8080. Every address a name ' +
      'resolves to is a backend, resolved again every --resolve-interval. unix:/path is a Unix socket. ' +
      '_service._proto.name, without a port, is found through SRV records: a backend per target and ' +
      'port, weighted by the records, lower priorities as backups. host:3000-3009 watches a port range: ' +
      'each port that listens is a backend (found by --check-interval probes), at most 1024 ports. ' +
      'weight=N from 0 to 1000 ' +
      '(default 1); max-conn=N caps its connections (more wait in a queue); slow-start=DUR ramps its ' +
      'weight up when it comes back; backup backends take traffic only when no other backend can.', '  '),
    ...groups,
    '',
    ...paragraph('Durations need a unit: 500ms, 2s, 1m.'),
    ...paragraph('Exit codes: 0 done, 1 runtime failure (e.g. the port is taken), 2 usage error.'),
    '',
    'Examples:',
    ...EXAMPLES.flatMap(([what, example], i) => [
      ...(i > 0 ? [''] : []),
      ...wrap(what, width - 4).map(l => `  # ${l}`),
      ...command(example, width)
    ]),
    ''
  ].join('\n')
}

module.exports = { helpText, helpWidth, formatDefault, optionSignature, EXAMPLES }
