'use strict'

const fs = require('fs')
const path = require('path')
const { UsageError } = require('../errors')

// What `lila run` checks before anything starts (a UsageError each, exit 2): the
// folder the app runs in, the program its command starts (found on the PATH the app
// gets, or at the path given, and executable), and each --watch path. A command that
// starts with a word of the shell's own (cd, exec, if...) is left to the shell.
const SHELL_WORDS = new Set([
  '.', ':', '[', 'alias', 'cd', 'command', 'eval', 'exec', 'export', 'for', 'if', 'read', 'set', 'source',
  'test', 'trap', 'ulimit', 'umask', 'unset', 'until', 'wait', 'while', 'case', '{', '(', '!'
])

function checkRun ({ command, appCwd, watch }, env) {
  const cwd = appCwd === null ? process.cwd() : path.resolve(appCwd)
  if (appCwd !== null && !isFolder(cwd)) {
    throw new UsageError(`invalid value ${JSON.stringify(appCwd)} for --app-cwd: expected a folder that exists`)
  }
  const program = programOf(command)
  if (program !== null) {
    const problem = program.includes('/') ? fileProblem(path.resolve(cwd, program)) : pathProblem(program, env.PATH)
    if (problem !== null) {
      throw new UsageError(`cannot run ${JSON.stringify(command)}: ${JSON.stringify(program)} ${problem}`)
    }
  }
  for (const given of watch) {
    if (!fs.existsSync(path.resolve(cwd, given))) {
      throw new UsageError(`invalid value ${JSON.stringify(given)} for --watch: no such file or folder: ` +
        'expected paths that exist (relative to --app-cwd)')
    }
  }
  return cwd
}

// The program a command starts: its first word after VAR=value assignments; null when
// that is the shell's own word, or quoted or expanded beyond a plain reading.
function programOf (command) {
  const words = command.trim().split(/\s+/)
  let i = 0
  while (i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i])) i++
  const word = words[i]
  if (word === undefined || SHELL_WORDS.has(word) || /[$`"'\\*?()<>|;&{}~]/.test(word)) return null
  return word
}

// The command as `exec` would run it, for the shell to eval, so that the process lila
// holds is the app's own (dash does not exec the last command of `sh -c` itself):
// "PORT=1 exec node server.js". Null for a command the shell must run itself: one with
// ; & | ( ) < > or a backquote, or led by a word of the shell's own or an assignment
// whose value is quoted or expanded.
function execForm (command) {
  if (/[;&|()<>`\n]/.test(command)) return null
  const [prefix] = /^\s*(?:[A-Za-z_][A-Za-z0-9_]*=[^\s"'\\$`]*\s+){0,}/.exec(command)
  const rest = command.slice(prefix.length)
  const first = rest.split(/\s/)[0]
  if (first === '' || SHELL_WORDS.has(first) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(first)) return null
  return `${prefix.trim()}${prefix.trim() === '' ? '' : ' '}exec ${rest}`
}

function pathProblem (program, searchPath = '') {
  for (const dir of String(searchPath).split(':')) {
    if (dir !== '' && fileProblem(path.join(dir, program)) === null) return null
  }
  return 'is not found on the PATH: expected a program, e.g. lila run \'node server.js\''
}

function fileProblem (file) {
  let stat
  try {
    stat = fs.statSync(file)
  } catch {
    return 'does not exist'
  }
  if (!stat.isFile()) return 'is not a file'
  try {
    fs.accessSync(file, fs.constants.X_OK)
  } catch {
    return 'is not executable (chmod +x, or name its interpreter: node app.js)'
  }
  return null
}

function isFolder (dir) {
  try {
    return fs.statSync(dir).isDirectory()
  } catch {
    return false
  }
}

module.exports = { checkRun, programOf, execForm }
