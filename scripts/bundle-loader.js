'use strict'

// The start of ./lila (scripts/build.js puts this file at its top, with BUILD,
// BUNDLE_LINE and VERSION filled in). lib/ follows it in a comment, as the text of one function,
// which is compiled here through vm.Script with V8's code cache, so that a second start
// skips compiling the ~1.4 MB again (Node 20 has no compile cache of its own; Node 22's
// module.enableCompileCache does not cover the main file). The cache is a file per
// build of lila, Node version and V8 flags in $XDG_CACHE_HOME/lila or ~/.cache/lila;
// LILA_CODE_CACHE=off turns it off, LILA_CODE_CACHE=/dir puts it elsewhere. It is
// written once, off the start's path: 2 s after the start, or as a short command (lila
// --help) exits; a cache V8 rejects, or one that cannot be read or written, is
// passed over and lila starts as it would without it.

// Written in by build.js: the hash of the bundle's text, the line of ./lila it starts
// on (stack traces name lines of ./lila), and lila's version.
const BUILD = 'BUILD'
const BUNDLE_LINE = 1
const VERSION = 'VERSION' // lib/version.js
const KEPT = 8 // cache files a cache folder holds at most: a few lilas, Node versions
const AFTER_START_MS = 2000
// A cache file: one byte saying when it was written (as a short command exited, or by a
// lila that ran for AFTER_START_MS and compiled more of itself: a serving lila replaces
// the other), the SHA-1 of V8's data, and the data. V8 checks the data's header (its
// version, flags, source, length) but not the rest (in release builds): the hash does.
const EXITED = 0x65
const RUNNING = 0x72
const HASH_BYTES = 20
const DATA_AT = 1 + HASH_BYTES
// How the bundle's text writes */ in the comment that holds it (scripts/build.js).
const COMMENT_END_ESCAPED = '*@@/'

const nodeRequire = require
const fs = nodeRequire('fs')
const path = nodeRequire('path')
const vm = nodeRequire('vm')

function start () {
  const file = cacheFile()
  const cached = file === null ? null : readCache(file)
  const script = new vm.Script(bundleText(), {
    filename: __filename,
    lineOffset: BUNDLE_LINE - 1,
    cachedData: cached === null ? undefined : cached.subarray(DATA_AT)
  })
  const kind = cached !== null && !script.cachedDataRejected ? cached[0] : null
  const isMain = require.main === module
  // A program that requires lila (lib/api.js) reads the cache but never writes one.
  if (file !== null && isMain) keepCache(script, file, kind)
  script.runInThisContext()(nodeRequire, isMain, module)
}

// The bundle, from the comment at the end of this file.
function bundleText () {
  const text = fs.readFileSync(__filename, 'latin1') // ASCII (scripts/build.js)
  let at = 0
  for (let line = 1; line < BUNDLE_LINE; line++) at = text.indexOf('\n', at) + 1
  return text.slice(at, text.lastIndexOf('*/')).replaceAll(COMMENT_END_ESCAPED, '*/')
}

// The cache file for this lila, this Node and these V8 flags (a cache made under other
// flags is rejected by V8), or null when LILA_CODE_CACHE=off or there is no home.
function cacheFile () {
  const setting = process.env.LILA_CODE_CACHE
  let dir
  if (setting === undefined || setting === '') {
    const { XDG_CACHE_HOME: xdg, HOME: home } = process.env
    if (xdg && path.isAbsolute(xdg)) dir = path.join(xdg, 'lila')
    else if (home && path.isAbsolute(home)) dir = path.join(home, '.cache', 'lila')
    else return null
  } else if (/^(0|off|false|no)$/i.test(setting)) {
    return null
  } else if (path.isAbsolute(setting)) {
    dir = setting
  } else {
    process.stderr.write(`lila: invalid value ${JSON.stringify(setting)} for LILA_CODE_CACHE: ` +
      'expected off or an absolute folder\n')
    process.exit(2)
  }
  const flags = hash([process.execArgv.join(' '), process.env.NODE_OPTIONS || ''].join('\n'))
  return path.join(dir, `lila-${BUILD}-node${process.version}-${process.arch}-${flags}.cache`)
}

function readCache (file) {
  try {
    const data = fs.readFileSync(file)
    if (data.length <= DATA_AT || (data[0] !== EXITED && data[0] !== RUNNING)) return null
    return sha1(data.subarray(DATA_AT)).equals(data.subarray(1, DATA_AT)) ? data : null
  } catch {
    return null
  }
}

// Writes the cache once: as the process exits when there was none, AFTER_START_MS after
// the start when there was none or a short command's.
function keepCache (script, file, kind) {
  if (kind === RUNNING) return
  let written = false
  const write = as => {
    if (written) return
    written = true
    writeCache(script, file, as)
  }
  if (kind === null) process.once('exit', () => write(EXITED))
  setTimeout(() => write(RUNNING), AFTER_START_MS).unref()
}

// Into a file of its own, then renamed: two lilas starting at once never read half a
// cache. Any failure (a read-only home, a full disk) leaves lila as it is.
function writeCache (script, file, kind) {
  const temporary = `${file}.${process.pid}`
  try {
    const data = script.createCachedData()
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
    fs.writeFileSync(temporary, Buffer.concat([Buffer.from([kind]), sha1(data), data]), { mode: 0o600 })
    fs.renameSync(temporary, file)
    prune(path.dirname(file))
  } catch {
    try { fs.unlinkSync(temporary) } catch {}
  }
}

// The newest KEPT of lila's cache files stay; older builds' go.
function prune (dir) {
  const files = fs.readdirSync(dir).filter(name => /^lila-.*\.cache$/.test(name))
    .map(name => ({ name, mtime: fs.statSync(path.join(dir, name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime)
  for (const { name } of files.slice(KEPT)) fs.unlinkSync(path.join(dir, name))
}

// (crypto is loaded by Node's start already; 0.6 ms for a 430 KB cache.)
function sha1 (data) {
  return nodeRequire('crypto').createHash('sha1').update(data).digest()
}

// FNV-1a, 32 bits, in hex: a short name for the flags.
function hash (text) {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0
  return h.toString(16).padStart(8, '0')
}

// `lila --version` alone is answered before the bundle is read (cli/bin.js answers it
// before the rest of lila loads, for lib/ run as it is): then it costs what Node's scan
// of this file does.
const argv = process.argv.slice(2)
if (require.main === module && argv.length === 1 && (argv[0] === '--version' || argv[0] === 'version')) {
  process.stdout.on('error', err => { if (err.code !== 'EPIPE') throw err }) // lila --version | true
  process.stdout.write(`lila ${VERSION}\n`)
} else {
  start()
}
