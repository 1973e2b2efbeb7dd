'use strict'

// ./lila compiles its bundle with V8's code cache, kept in a file per build, Node and
// V8 flags (scripts/bundle-loader.js): written by the first start, taken by the next;
// a cache V8 rejects, or one that cannot be written, changes nothing but the time.

const t = require('tap')
const fs = require('fs')
const crypto = require('crypto')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')
const { LILA, tcpBackend, exchange, spawnLila, within } = require('./fixtures/helpers')

const PROBE = path.join(__dirname, 'fixtures', 'code-cache-probe.js')
const EXITED = 'e'.charCodeAt(0)
const DATA_AT = 21 // the kind byte, the data's SHA-1 (scripts/bundle-loader.js)
const RUNNING = 'r'.charCodeAt(0)

function tempDir (t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-code-cache-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

function environment (changes) {
  const env = { ...process.env }
  delete env.LILA_CODE_CACHE
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) delete env[name]
    else env[name] = value
  }
  return env
}

// A command without NODE_OPTIONS, which tap's process tracking sets (and which is part
// of the cache's name): as spawnLila starts lila.
function spawnPlain (command, args, env) {
  return spawnSync('env', ['-u', 'NODE_OPTIONS', command, ...args], { encoding: 'utf8', env, timeout: 30000 })
}

// `lila ARGS` with the probe: its exit code, output and what the probe saw.
function run (args, env) {
  const out = spawnPlain(process.execPath, ['-r', PROBE, LILA, ...args], env)
  const lines = out.stderr.trim().split('\n')
  return { status: out.status, stdout: out.stdout, stderr: lines.slice(0, -1).join('\n'), cache: JSON.parse(lines.pop()) }
}

const cacheFiles = dir => fs.existsSync(dir) ? fs.readdirSync(dir).filter(name => name.endsWith('.cache')) : []

t.test('the first start writes the cache, the second takes it', async t => {
  const dir = tempDir(t)
  const env = environment({ LILA_CODE_CACHE: dir })
  const first = run(['--help'], env)
  t.equal(first.status, 0)
  t.match(first.stdout, /^lila \d+\.\d+\.\d+/)
  t.same(first.cache, { given: false, rejected: false }, 'no cache to give the first time')
  const [file] = cacheFiles(dir)
  t.match(file, /^lila-[0-9a-f]{16}-nodev[\d.]+-\w+-[0-9a-f]{8}\.cache$/, 'one cache file')
  const written = fs.readFileSync(path.join(dir, file))
  t.equal(written[0], EXITED, 'written as the short command exited')

  const second = run(['--help'], env)
  t.equal(second.stdout, first.stdout)
  t.same(second.cache, { given: true, rejected: false }, 'V8 took the cache')
  t.same(fs.readFileSync(path.join(dir, file)), written, 'and it was not written again')
  t.same(cacheFiles(dir), [file])
})

t.test('a corrupt cache, or one V8 rejects, is passed over, then written anew', async t => {
  const dir = tempDir(t)
  const env = environment({ LILA_CODE_CACHE: dir })
  run(['--help'], env)
  const [file] = cacheFiles(dir)
  const good = fs.readFileSync(path.join(dir, file))

  const corrupt = Buffer.from(good)
  corrupt.fill(0x5a, DATA_AT + 64) // V8's header kept, its code garbage
  fs.writeFileSync(path.join(dir, file), corrupt)
  const afterCorrupt = run(['--help'], env)
  t.equal(afterCorrupt.status, 0)
  t.match(afterCorrupt.stdout, /^lila \d+\.\d+\.\d+/)
  t.same(afterCorrupt.cache, { given: false, rejected: false }, 'its hash does not match: not given to V8')
  t.not(fs.readFileSync(path.join(dir, file)).equals(corrupt), 'the corrupt cache was replaced')
  t.same(run(['--help'], env).cache, { given: true, rejected: false }, 'by one V8 takes')

  // V8's own checks: another source (its header says), the hash made to match.
  const foreign = Buffer.from(good)
  foreign[DATA_AT + 8] ^= 0xff
  crypto.createHash('sha1').update(foreign.subarray(DATA_AT)).digest().copy(foreign, 1)
  fs.writeFileSync(path.join(dir, file), foreign)
  const rejected = run(['--help'], env)
  t.equal(rejected.status, 0)
  t.match(rejected.stdout, /^lila .*\n\nUsage:/)
  t.same(rejected.cache, { given: true, rejected: true }, 'V8 rejected it, and lila ran without it')
  t.same(run(['--help'], env).cache, { given: true, rejected: false }, 'and it was written anew')

  fs.writeFileSync(path.join(dir, file), 'not a cache')
  t.same(run(['--help'], env).cache, { given: false, rejected: false }, 'a file that is no cache of lila\'s is not given to V8')
})

t.test('a cache file another user could have written is not given to V8', async t => {
  const dir = tempDir(t)
  const env = environment({ LILA_CODE_CACHE: dir })
  run(['--help'], env)
  const file = path.join(dir, cacheFiles(dir)[0])
  t.same(run(['--help'], env).cache, { given: true, rejected: false })
  fs.chmodSync(file, 0o666)
  t.same(run(['--help'], env).cache, { given: false, rejected: false }, 'writable by others: passed over')
  t.equal(fs.statSync(file).mode & 0o777, 0o600, 'and written anew, the user\'s alone')
  if (process.getuid && process.getuid() === 0) { // only root can give a file away
    fs.chownSync(file, 65534, 65534)
    t.same(run(['--help'], env).cache, { given: false, rejected: false }, 'another owner\'s: passed over')
    t.equal(fs.statSync(file).uid, 0, 'and written anew')
  }
})

t.test('a serving lila writes the cache once it has run a while', async t => {
  const dir = tempDir(t)
  const env = environment({ LILA_CODE_CACHE: dir })
  // Both started as spawnLila starts them (NODE_OPTIONS, part of the cache's name, alike).
  const options = { prefix: ['-r', PROBE, LILA], lila: process.execPath, env }
  const short = await spawnLila(t, ['--help'], { ...options, waitForListening: false })
  t.equal((await short.exited).code, 0)
  const [file] = cacheFiles(dir)
  t.equal(fs.readFileSync(path.join(dir, file))[0], EXITED, 'a short command\'s cache, which a serving lila replaces')

  const backend = await tcpBackend(t, 'a')
  const written = new Promise(resolve => {
    const watcher = fs.watch(dir, () => {
      const data = fs.existsSync(path.join(dir, file)) ? fs.readFileSync(path.join(dir, file)) : null
      if (data !== null && data[0] === RUNNING) {
        watcher.close()
        resolve(data)
      }
    })
    t.teardown(() => watcher.close())
  })
  const lila = await spawnLila(t, ['rr', backend.address, '--host', '127.0.0.1', '--port', '0'], options)
  t.equal((await exchange(lila.port)).data, 'a\n')
  await within(30000, () => `the cache to be written by the serving lila (${cacheFiles(dir).join(', ')})`, written)
  t.equal((await lila.stop()).code, 0)
  t.match(lila.stderr, /\{"given":true,"rejected":false\}/, 'it took the short command\'s cache')
  t.same(cacheFiles(dir), [file], 'and replaced it')
})

t.test('LILA_CODE_CACHE=off, a cache folder that cannot be made, no home: lila runs, writing nothing', async t => {
  const dir = tempDir(t)
  const off = run(['--help'], environment({ LILA_CODE_CACHE: 'off', XDG_CACHE_HOME: dir }))
  t.equal(off.status, 0)
  t.same(off.cache, { given: false, rejected: false }, 'no code cache given')
  t.same(fs.readdirSync(dir), [], 'nothing written')

  fs.writeFileSync(path.join(dir, 'file'), '')
  const blocked = run(['--help'], environment({ LILA_CODE_CACHE: path.join(dir, 'file', 'cache') }))
  t.equal(blocked.status, 0)
  t.match(blocked.stdout, /^lila \d+\.\d+\.\d+/)
  t.equal(blocked.stderr, '', 'nothing said')
  t.same(fs.readdirSync(dir), ['file'])

  const homeless = run(['--help'], environment({ HOME: undefined, XDG_CACHE_HOME: undefined }))
  t.equal(homeless.status, 0)
  t.same(homeless.cache, { given: false, rejected: false }, 'no home, no cache')
})

t.test('NODE_DISABLE_COMPILE_CACHE=1, Node\'s own switch, turns it off too, unless LILA_CODE_CACHE names a folder', async t => {
  const dir = tempDir(t)
  const off = run(['--help'], environment({ NODE_DISABLE_COMPILE_CACHE: '1', XDG_CACHE_HOME: dir }))
  t.equal(off.status, 0)
  t.same(off.cache, { given: false, rejected: false })
  t.same(fs.readdirSync(dir), [], 'nothing written')
  run(['--help'], environment({ NODE_DISABLE_COMPILE_CACHE: '1', LILA_CODE_CACHE: dir }))
  t.equal(cacheFiles(dir).length, 1, 'LILA_CODE_CACHE=DIR wins')
})

t.test('a copy of lila changed by hand gets a cache of its own', async t => {
  const dir = tempDir(t)
  const env = environment({ LILA_CODE_CACHE: dir })
  t.equal(run(['--help'], env).status, 0)
  t.equal(cacheFiles(dir).length, 1)
  // Its length and BUILD kept: all that V8 and the cache's name would see otherwise.
  const copy = path.join(tempDir(t), 'lila')
  const text = fs.readFileSync(LILA, 'latin1')
  const changed = text.replace('Usage:', 'USAGE:')
  t.not(changed, text)
  fs.writeFileSync(copy, changed, { mode: 0o755 })
  const out = spawnPlain(process.execPath, ['-r', PROBE, copy, '--help'], env)
  t.equal(out.status, 0)
  t.match(out.stdout, /^USAGE:/m, 'the copy runs its own text')
  t.match(out.stderr, /\{"given":false,"rejected":false\}/, 'compiled from it, not with the original\'s cache')
  t.equal(cacheFiles(dir).length, 2, 'and a cache of its own written')
})

// The heap objects of 1 MiB or more in a snapshot: [{ type, size }].
function largeObjects (file) {
  const { snapshot: { meta }, nodes } = JSON.parse(fs.readFileSync(file, 'utf8'))
  const fields = meta.node_fields.length
  const [TYPE, SIZE] = ['type', 'self_size'].map(name => meta.node_fields.indexOf(name))
  const large = []
  for (let i = 0; i < nodes.length; i += fields) {
    if (nodes[i + SIZE] >= 1024 * 1024) large.push({ type: meta.node_types[0][nodes[i + TYPE]], size: nodes[i + SIZE] })
  }
  return large
}

t.test('lila\'s code is held once, one byte a character: the text Node read, which the bundle is a slice of', async t => {
  const dir = tempDir(t)
  const snapshot = path.join(dir, 'at-exit.heapsnapshot')
  for (const cache of ['off', dir]) {
    run(['--help'], environment({ LILA_CODE_CACHE: cache })) // the second time: the cache written
    const out = spawnPlain(process.execPath, ['-r', path.join(__dirname, 'fixtures', 'heap-snapshot-at-exit.js'), LILA, '--help'],
      environment({ LILA_CODE_CACHE: cache, LILA_TEST_SNAPSHOT: snapshot }))
    t.equal(out.status, 0, out.stderr)
    const size = fs.statSync(LILA).size
    const large = largeObjects(snapshot)
    t.equal(large.length, 1, `one object of 1 MiB or more (cache ${cache === 'off' ? 'off' : 'on'}): ${JSON.stringify(large)}`)
    t.ok(large.every(o => o.type === 'string' && o.size >= size && o.size < size + 64), `a string of ./lila's ${size} bytes`)
  }
})

t.test('LILA_BUNDLE=check compiles the bundle and runs none of it', async t => {
  const dir = tempDir(t)
  const out = run(['rr', '127.0.0.1:1', '--port', '0'], environment({ LILA_BUNDLE: 'check', LILA_CODE_CACHE: dir }))
  t.equal(out.status, 0)
  t.equal(out.stdout, '')
  t.equal(out.stderr, '', 'nothing said, nothing listening')
  t.same(out.cache, { given: false, rejected: false }, 'compiled, without a cache')
  t.same(cacheFiles(dir), [], 'and none written')
})

t.test('XDG_CACHE_HOME, then ~/.cache: where the cache goes by default', async t => {
  const dir = tempDir(t)
  run(['--help'], environment({ XDG_CACHE_HOME: path.join(dir, 'xdg'), HOME: path.join(dir, 'home') }))
  t.equal(cacheFiles(path.join(dir, 'xdg', 'lila')).length, 1, 'in $XDG_CACHE_HOME/lila')
  t.equal(fs.statSync(path.join(dir, 'xdg', 'lila')).mode & 0o777, 0o700, 'a folder of the user\'s alone')
  run(['--help'], environment({ XDG_CACHE_HOME: undefined, HOME: path.join(dir, 'home') }))
  t.equal(cacheFiles(path.join(dir, 'home', '.cache', 'lila')).length, 1, 'else in ~/.cache/lila')
})

t.test('lila --version is answered before the bundle is read: no compile, no cache', async t => {
  const dir = tempDir(t)
  const version = run(['--version'], environment({ LILA_CODE_CACHE: dir }))
  t.equal(version.status, 0)
  t.equal(version.stdout, `lila ${require('../lib/version')}\n`)
  t.same(version.cache, null, 'the bundle was not compiled')
  t.same(cacheFiles(dir), [])
})

t.test('a program that requires lila reads the cache but writes none', async t => {
  const dir = tempDir(t)
  const out = spawnPlain(process.execPath, ['-e', `require(${JSON.stringify(LILA)})`], environment({ LILA_CODE_CACHE: dir }))
  t.equal(out.status, 0, out.stderr)
  t.same(cacheFiles(dir), [])
})

t.test('a LILA_CODE_CACHE that is neither off nor a folder is refused in one line', async t => {
  const out = spawnPlain(LILA, ['--help'], environment({ LILA_CODE_CACHE: 'cache' }))
  t.equal(out.status, 2)
  t.equal(out.stderr, 'lila: invalid value "cache" for LILA_CODE_CACHE: expected off or an absolute folder\n')
  t.equal(out.stdout, '')
})
