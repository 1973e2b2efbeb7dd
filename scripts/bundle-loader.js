'use strict'

// The start of ./lila (scripts/build.js puts this file at its top, with BUILD,
// BUNDLE_LINE and VERSION filled in, and lib/ in the comment of bundle() at its end).
// lib/ is the text of one function, which is compiled here through vm.Script with V8's
// code cache, so that a second start skips compiling the ~1.4 MB again (Node 20 has no
// compile cache of its own; Node 22's module.enableCompileCache does not cover the main
// file). As a comment, Node's own compile of this file only scans it.
//
// Memory: the bundle's text is a slice of this file's text, which Node read to compile
// it and V8 holds anyway (bundle.toString() gives a slice of it, not a copy): lila's
// code is held once, in one byte a character (the file is ASCII, scripts/build.js), and
// nothing else the size of it is read or made at the start. So lib/ never writes
// star-slash (build.js refuses it), as it would end the comment.
//
// The cache is a file per build of lila, copy of ./lila (its size and time), Node version
// and V8 flags, in $XDG_CACHE_HOME/lila or ~/.cache/lila, as other caches a user may
// delete at any time. LILA_CODE_CACHE=off (or Node's own NODE_DISABLE_COMPILE_CACHE=1)
// turns it off, LILA_CODE_CACHE=/dir puts it elsewhere. It is written once, off the
// start's path: 2 s after the start, or as a short command (lila --help) exits; a cache
// whose hash does not match, or that V8 rejects, is passed over, and one that cannot be
// read or written (no home, a read-only one) costs a failed open, nothing more.
// LILA_BUNDLE=check compiles the bundle without running it (lila upgrade's check).

// Written in by build.js: the hash of the bundle's text, the line of ./lila it starts
// on (stack traces name lines of ./lila), lila's version.
const BUILD = 'BUILD'
const BUNDLE_LINE = 1
const VERSION = 'VERSION' // lib/version.js
const KEPT = 8 // cache files a cache folder holds at most: a few lilas, Node versions
const AFTER_START_MS = 2000
// A cache file: one byte saying when it was written (as a short command exited, or by a
// lila that ran for AFTER_START_MS and compiled more of itself: a serving lila replaces
// the other), the SHA-1 of V8's data, and the data. V8 checks the data's header (its
// version, flags, the source's length) but not the rest (in release builds): the hash
// does, and the file's name says which lila's source it is for.
const EXITED = 0x65
const RUNNING = 0x72
const HASH_BYTES = 20
const DATA_AT = 1 + HASH_BYTES

const nodeRequire = require
const fs = nodeRequire('fs')
const path = nodeRequire('path')
const vm = nodeRequire('vm')

function start () {
  const isMain = require.main === module
  const check = isMain && process.env.LILA_BUNDLE === 'check'
  const file = check ? null : cacheFile()
  const cached = file === null ? null : readCache(file)
  const script = new vm.Script(bundleText(), {
    filename: __filename,
    lineOffset: BUNDLE_LINE - 1,
    cachedData: cached === null ? undefined : cached.subarray(DATA_AT)
  })
  if (check) return
  const kind = cached !== null && !script.cachedDataRejected ? cached[0] : null
  // A program that requires lila (lib/api.js) reads the cache but never writes one.
  if (file !== null && isMain) keepCache(script, file, kind)
  script.runInThisContext()(nodeRequire, isMain, module)
}

// The bundle: the comment in bundle(), from the line after its /* to the line of its */.
function bundleText () {
  const text = bundle.toString()
  return text.slice(text.indexOf('\n') + 1, text.lastIndexOf('\n'))
}

// The cache file for this lila, this copy of it, this Node and these V8 flags (a cache
// made under other flags is rejected by V8), or null when it is off or there is no home.
function cacheFile () {
  const setting = process.env.LILA_CODE_CACHE
  let dir
  if (process.env.NODE_DISABLE_COMPILE_CACHE === '1' && !setting) {
    return null
  } else if (setting === undefined || setting === '') {
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
  // This copy, by its size and time: a ./lila changed by hand (its BUILD kept) gets a
  // cache of its own, rather than V8 taking code that no longer matches the text.
  let stamp
  try {
    const { size, mtimeMs } = fs.statSync(__filename)
    stamp = `${size} ${mtimeMs}`
  } catch {
    return null
  }
  const flags = hash([process.execArgv.join(' '), process.env.NODE_OPTIONS || '', stamp].join('\n'))
  return path.join(dir, `lila-${BUILD}-node${process.version}-${process.arch}-${flags}.cache`)
}

// The cache's bytes, if they are lila's and this user's: V8 runs what it finds there, so
// a file another user could have written (another owner, or writable by others) is
// passed over, as one whose hash does not match.
function readCache (file) {
  let fd = null
  try {
    fd = fs.openSync(file, 'r')
    const { uid, mode } = fs.fstatSync(fd)
    if (process.getuid && (uid !== process.getuid() || (mode & 0o022) !== 0)) return null // (POSIX)
    const data = fs.readFileSync(fd)
    if (data.length <= DATA_AT || (data[0] !== EXITED && data[0] !== RUNNING)) return null
    return sha1(data.subarray(DATA_AT)).equals(data.subarray(1, DATA_AT)) ? data : null
  } catch {
    return null
  } finally {
    if (fd !== null) fs.closeSync(fd)
  }
}

// Writes the cache once: as the process exits when there was none, AFTER_START_MS after
// the start when there was none or a short command's. Then nothing of this file is kept.
function keepCache (script, file, kind) {
  if (kind === RUNNING) return
  const timer = setTimeout(() => {
    process.removeListener('exit', onExit)
    writeCache(script, file, RUNNING)
  }, AFTER_START_MS).unref()
  const onExit = () => {
    clearTimeout(timer)
    writeCache(script, file, EXITED)
  }
  if (kind === null) process.once('exit', onExit)
}

// Into a file of its own, then renamed: two lilas starting at once never read half a
// cache. Any failure (no home, a read-only one, a full disk) leaves lila as it is; the
// file is opened before V8 is asked for its data, so a cache that cannot be written
// costs no more than the failed open.
function writeCache (script, file, kind) {
  const temporary = `${file}.${process.pid}`
  let opened = false
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
    const fd = fs.openSync(temporary, 'wx', 0o600)
    opened = true
    try {
      const data = script.createCachedData()
      fs.writeFileSync(fd, Buffer.concat([Buffer.from([kind]), sha1(data)]))
      fs.writeFileSync(fd, data) // not joined: no second copy of ~0.5 MB to leave behind
    } finally {
      fs.closeSync(fd)
    }
    fs.renameSync(temporary, file)
    prune(path.dirname(file))
  } catch {
    if (opened) try { fs.unlinkSync(temporary) } catch {}
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

// lib/, which build.js writes into this comment.
function bundle () { /*
BUNDLE
*/ }
