'use strict'

// The command line: argv (without node and script) -> what to do, with a checked config.
// Values go through the parsers and the builder the config file uses too.

const { parseArgs } = require('util')
const { UsageError } = require('../errors')
const { OPTIONS, BY_NAME, RUN_OPTIONS, parseArgsOptions } = require('./options')
const { PARSERS, MODE_NAMES, MODE_WORDS } = require('./parsers')
const { BACKEND_SYNTAX, looksLikeBackend } = require('./backend-spec')
const { quote } = require('./values')
const { buildListener, buildGlobals, buildConfig } = require('./builder')
const { isModeWord } = require('../upstream/balancers')
const { didYouMean } = require('./suggest')
const { environmentValues, variableOf } = require('./environment')

// Words that name a command rather than a mode or a backend: `lila help` and
// `lila version` do what --help and --version do.
const COMMANDS = ['demo', 'help', 'version', 'completion', 'upgrade', 'restart-app', 'run']
const LONG_FLAGS = OPTIONS.map(o => o.flag)

// The command line as a source of values (builder.js jsonSource() is the file): a
// value is named by its flag, so `at` is null.
// The command line's source: a value is named by its flag, or by its variable when it
// came from the environment (`LILA_TLS_CERT needs --tls-key (or LILA_TLS_KEY)`).
// environment: Map of option name -> variable, for the values taken from it.
function commandLineSource (environment) {
  const variable = name => environment.get(name)
  return {
    json: false,
    fail: (at, message) => new UsageError(message),
    // the subject of a message about an option
    about: option => variable(option.name) ? `${variable(option.name)} ` : `option ${option.flag} `,
    // another setting a message asks for; the variable too, for whoever sets options so
    setting (name, value) {
      const bare = value === undefined || value === true
      const flag = bare ? `--${name}` : `--${name} ${value}`
      if (environment.size === 0) return flag
      return `${flag} (or ${variableOf(BY_NAME.get(name))}${bare ? '' : `=${value}`})`
    }
  }
}

// parseArgs' own messages are long and mention its internals; say it our way.
function rethrowParseError (err) {
  const option = /'(-[^' ]+)/.exec(err.message)
  const name = option ? option[1] : 'option'
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const hint = name.startsWith('--') ? didYouMean(name, LONG_FLAGS) : null
      throw new UsageError(`unknown option ${quote(name)}${hint === null ? '' : `: ${hint}`}`)
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const flag = (/--[a-z-]+/.exec(err.message) || [name])[0]
      if (/does not take an argument/.test(err.message)) throw new UsageError(`option ${flag} takes no value`)
      if (/ambiguous/.test(err.message)) {
        throw new UsageError(`missing value for ${flag} (a value starting with "-" is written ${flag}=VALUE)`)
      }
      throw new UsageError(`missing value for ${flag}`)
    }
    default:
      throw new UsageError(err.message.split('\n')[0])
  }
}

// `--access-log` and `--request-id` take an optional value (their `bare` in OPTIONS),
// which parseArgs cannot express: a bare `--access-log` becomes `--access-log=text`,
// and `--access-log json` (or any word that is neither an option, a mode nor a
// backend, so that a typo is named as a bad format) `--access-log=json`.
// A URL (--otlp's) is a value, never a backend: a backend has no "://".
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i
const BARE = new Map(OPTIONS.filter(o => o.bare !== undefined).map(o => [o.flag, o.bare]))

function normaliseArgv (argv) {
  const out = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--') {
      out.push(...argv.slice(i))
      break
    }
    if (!BARE.has(arg)) {
      out.push(arg)
      continue
    }
    const next = argv[i + 1]
    const isValue = next !== undefined && !next.startsWith('-') && (!looksLikeBackend(next) || URL_LIKE.test(next)) &&
      !isModeWord(next) && !COMMANDS.includes(next)
    out.push(`${arg}=${isValue ? next : BARE.get(arg)}`)
    if (isValue) i++
  }
  return out
}

// `lila help [TOPIC]`: the words after help.
function helpCommand (words) {
  if (words.length > 1) throw new UsageError(`unexpected argument ${quote(words[1])} after lila help TOPIC`)
  return { command: 'help', topic: words[0] }
}

// argv (without node and script) ->
//   { command: 'help', topic }               (`lila help TOPIC`; --help and `lila help`:
//                                               no topic; the topic unchecked)
//   { command: 'version' }                   (also `lila version`)
//   { command: 'completion', shell }         (`lila completion bash`; the shell unchecked)
//   { command: 'upgrade', pid, pidFile, exec }   (`lila upgrade 1234`: see upgradeCommand)
//   { command: 'restart-app', pid, pidFile }     (`lila restart-app 1234`: see processCommand)
//   { command: 'run' | 'demo', config }
//   { command: 'run', configFile, logLevel, pidFile, environment }   (--config: main.js
//                                               reads the file with the environment's
//                                               options over it; a --log-level or a
//                                               --pid-file beside it wins)
// `env`: the process environment, for LILA_<NAME> (environment.js); a flag wins.
function parseCommandLine (argv, env = {}) {
  // Before the options are parsed: `lila help --retries` asks about an option.
  if (argv[0] === 'help') return helpCommand(argv.slice(1))
  let parsed
  try {
    parsed = parseArgs({ args: normaliseArgv(argv), options: parseArgsOptions(), allowPositionals: true, strict: true })
  } catch (err) {
    rethrowParseError(err)
  }
  const { values, positionals } = parsed
  if (positionals[0] === 'help') return helpCommand(positionals.slice(1))
  if (values.help) return { command: 'help' }
  if (values.version || positionals[0] === 'version') return { command: 'version' }
  if (positionals[0] === 'completion') {
    if (positionals.length > 2) {
      throw new UsageError(`unexpected argument ${quote(positionals[2])} after lila completion SHELL`)
    }
    return { command: 'completion', shell: positionals[1] }
  }

  if (positionals[0] === 'upgrade') return upgradeCommand(values, positionals)
  if (positionals[0] === 'restart-app') return processCommand('restart-app', values, positionals, [])
  if (values.exec !== undefined) throw new UsageError('option --exec applies to lila upgrade only')

  const environment = environmentValues(env)
  if (values.config !== undefined) return configFileCommand(values, positionals, environment)

  const entries = new Map()
  const fromEnvironment = new Map() // option name -> its variable, for the errors' wording
  for (const o of OPTIONS) {
    if (o.scope !== 'cli' && values[o.name] !== undefined) {
      entries.set(o.name, { value: values[o.name], at: null })
    } else if (environment.has(o.name)) {
      entries.set(o.name, { value: environment.get(o.name).value, at: null })
      fromEnvironment.set(o.name, environment.get(o.name).variable)
    }
  }
  const source = commandLineSource(fromEnvironment)

  const words = positionals.slice()
  const command = words[0] === 'demo' ? 'demo' : 'run'
  const run = words[0] === 'run' ? runEntry(words, entries) : null
  if (run === null) {
    const given = RUN_OPTIONS.find(o => values[o.name] !== undefined)
    if (given !== undefined) {
      throw new UsageError(`option ${given.flag} applies to lila run only: expected lila run 'CMD' ${given.flag} ...`)
    }
  }
  if (command === 'demo') {
    words.shift()
    // The demo shows per-request balancing unless told otherwise.
    if (values.protocol === undefined) entries.set('protocol', { value: 'http', at: null })
  }

  // The demo shows balancing best in turns, so its default mode is round-robin.
  let mode = command === 'demo' ? { value: 'round-robin', at: null } : undefined
  if (words.length && isModeWord(words[0])) {
    mode = { value: words.shift(), at: null }
  } else if (words.length && !looksLikeBackend(words[0])) {
    // The first word may also have been meant as a command (`lila dmeo`).
    const hint = didYouMean(words[0], command === 'run' ? [...MODE_WORDS, ...COMMANDS] : MODE_WORDS) ||
      `expected one of ${MODE_NAMES}, or a backend host:port`
    throw new UsageError(`unknown mode ${quote(words[0])}: ${hint}`)
  }

  const globals = buildGlobals(entries, source)
  if (command === 'demo') {
    if (words.length) throw new UsageError(`unexpected argument ${quote(words[0])}: lila demo starts its own backends`)
    if (values.workers !== undefined) {
      throw new UsageError('option --workers does not apply to lila demo: it runs in one process')
    }
    const listeners = [buildListener({ values: entries, mode, backends: [] }, source)]
    return { command, config: buildConfig(globals, listeners, source) }
  }
  if (run !== null && words.length > 0) {
    throw new UsageError(`unexpected argument ${quote(words[0])}: lila run's backends are the app's instances ` +
      '(a command of several words is quoted: lila run \'node server.js\')')
  }
  // Options are checked before backends are missed: "--port x" says what is wrong with it.
  const routes = (values.route || []).map(routeEntry)
  const listener = buildListener({
    values: entries, mode, backends: words.map(value => ({ value, at: null })), routes, run
  }, source)
  if (words.length === 0 && routes.length === 0 && run === null) {
    throw new UsageError(`no backend given: expected lila [mode] ${BACKEND_SYNTAX}...`)
  }
  return { command, config: buildConfig(globals, [listener], source) }
}

// `lila run 'CMD' [mode] [options]`: the command (taken off `words`, with `run`) and
// lila run's options among `entries`, for buildListener.
function runEntry (words, entries) {
  words.shift()
  const command = words.shift()
  if (command === undefined || command.trim() === '') {
    throw new UsageError('no command given: expected lila run \'CMD\' [options], e.g. lila run \'node server.js\' -i 3')
  }
  const values = new Map(RUN_OPTIONS.filter(o => entries.has(o.name)).map(o => [o.name, entries.get(o.name)]))
  return { command: { value: command, at: null }, values, at: null }
}

// `lila upgrade PID` or `lila upgrade --pid-file FILE`, and --exec PATH: which running
// lila is to start a new one (cli/upgrade-command.js), and from which executable.
//   -> { command: 'upgrade', pid, pidFile, exec }   (pid or pidFile null; exec null: lila's own)
function upgradeCommand (values, positionals) {
  const parsed = processCommand('upgrade', values, positionals, ['exec'])
  const exec = values.exec === undefined ? null : PARSERS.file(values.exec, '--exec')
  return { ...parsed, exec }
}

// `lila COMMAND PID` or `lila COMMAND --pid-file FILE`: a command to a running lila
// (upgrade, restart-app), which keeps its own options; `more`: the others it takes.
//   -> { command, pid, pidFile }   (pid or pidFile null)
function processCommand (command, values, positionals, more) {
  const usage = `expected lila ${command} PID or lila ${command} --pid-file FILE`
  const allowed = ['pid-file', ...more]
  for (const o of OPTIONS) {
    if (values[o.name] !== undefined && !allowed.includes(o.name)) {
      throw new UsageError(`option ${o.flag} does not apply to lila ${command}: ` +
        `the running lila keeps its own options (only ${allowed.map(name => `--${name}`).join(' and ')} may be given)`)
    }
  }
  if (positionals.length > 2) throw new UsageError(`unexpected argument ${quote(positionals[2])}: ${usage}`)
  const pidFile = values['pid-file'] === undefined ? null : PARSERS.file(values['pid-file'], '--pid-file')
  const text = positionals[1]
  if (text === undefined && pidFile === null) throw new UsageError(`no process given: ${usage}`)
  if (text !== undefined && pidFile !== null) {
    throw new UsageError(`both a PID (${quote(text)}) and --pid-file given: ${usage}, not both`)
  }
  if (text !== undefined && !/^[1-9][0-9]{0,9}$/.test(text)) {
    throw new UsageError(`invalid process ID ${quote(text)}: expected a number, as in lila ${command} 1234`)
  }
  return { command, pid: text === undefined ? null : Number(text), pidFile }
}

// One --route as the builder takes it (see buildRoutes).
function routeEntry (text) {
  const { match, strip, settings, mode, backends } = PARSERS.route(text, '--route')
  const entry = value => ({ value, at: null })
  return {
    at: null,
    match: entry(match),
    name: undefined,
    mode: mode === null ? undefined : entry(mode),
    backends: backends.map(entry),
    values: new Map(settings.map(([name, value]) => [name, entry(value)])),
    strip: strip ? entry(true) : undefined
  }
}

// What may be given beside --config: settings of the process rather than of its listeners.
const BESIDE_CONFIG = ['config', 'log-level', 'pid-file']

// --config FILE: everything else is in the file, but for --log-level and --pid-file, and the
// environment's options (over the file's), except a listener's own port and name.
function configFileCommand (values, positionals, environment = new Map()) {
  const file = PARSERS.file(values.config, '--config')
  if (positionals.length > 0) {
    const arg = quote(positionals[0])
    throw new UsageError(`unexpected argument ${arg}: with --config, modes and backends are in the config file`)
  }
  for (const o of OPTIONS) {
    if (values[o.name] !== undefined && !BESIDE_CONFIG.includes(o.name)) {
      const message = `option ${o.flag} cannot be combined with --config: ` +
        'put it in the config file (only --log-level and --pid-file may be given beside it)'
      throw new UsageError(message)
    }
  }
  for (const { option, variable } of environment.values()) {
    if (option.scope === 'own') {
      throw new UsageError(`${variable} cannot be combined with --config: ` +
        `each listener's ${option.name} is in the file`)
    }
  }
  const logLevel = values['log-level'] === undefined ? null : PARSERS.logLevel(values['log-level'], '--log-level')
  const pidFile = values['pid-file'] === undefined ? null : PARSERS.file(values['pid-file'], '--pid-file')
  return { command: 'run', configFile: file, logLevel, pidFile, environment }
}

module.exports = {
  parseCommandLine
}
