'use strict'

// No require() in lib/ runs back up a layer or goes round in a cycle. The layers are
// written once, in ARCHITECTURE.md's ```layers block (high to low, one line each); this
// test reads it and every relative require() in lib/, lazy ones too. proxy/ has layers
// of its own inside (its ```layers proxy/ block): its folders and files import one way.

const t = require('tap')
const fs = require('fs')
const path = require('path')

const ROOT = path.join(__dirname, '..')
const LIB = path.join(ROOT, 'lib')

// ARCHITECTURE.md's layers: [['cli/'], ['api.js'], ..., ['admin/', 'config/'], ...]; an
// indented line goes on the one before. `folder`: the block of a folder's own layers
// (```layers proxy/), else lib/'s.
function readLayers (text, folder = null) {
  const block = text.split(folder === null ? '```layers\n' : `\`\`\`layers ${folder}\n`)[1]
  if (block === undefined) return null
  const layers = []
  for (const line of block.split('```')[0].split('\n')) {
    if (line.trim() === '') continue
    const entries = line.trim().split(/\s+/)
    if (/^\s/.test(line) && layers.length > 0) layers[layers.length - 1].push(...entries)
    else layers.push(entries)
  }
  return layers
}

// The entry at the top of lib/ a file belongs to: 'proxy/' for lib/proxy/tcp.js,
// 'log.js' for lib/log.js.
function entryOf (file) {
  const parts = file.split('/')
  return parts.length > 1 ? `${parts[0]}/` : parts[0]
}

// lib/'s files, relative to lib/ ('proxy/tcp.js'), each with the files it requires.
function readGraph (lib = LIB) {
  const files = []
  ;(function walk (dir) {
    for (const entry of fs.readdirSync(path.join(lib, dir), { withFileTypes: true })) {
      const name = dir === '' ? entry.name : `${dir}/${entry.name}`
      if (entry.isDirectory()) walk(name)
      else if (entry.name.endsWith('.js')) files.push(name)
    }
  })('')
  const graph = new Map()
  for (const file of files.sort()) {
    const source = fs.readFileSync(path.join(lib, file), 'utf8')
    const requires = []
    for (const [, spec] of source.matchAll(/require\(\s*['"](\.{1,2}\/[^'"]*)['"]\s*\)/g)) {
      requires.push(resolve(lib, file, spec))
    }
    graph.set(file, requires)
  }
  return graph
}

// What Node (and scripts/build.js) loads for `spec` required from `file`.
function resolve (lib, file, spec) {
  const target = path.relative(lib, path.resolve(lib, path.dirname(file), spec)).split(path.sep).join('/')
  for (const candidate of [target, `${target}.js`, `${target}/index.js`]) {
    const full = path.join(lib, candidate)
    if (fs.existsSync(full) && fs.statSync(full).isFile()) return candidate
  }
  return `${target} (missing)`
}

// Each require that runs back up a layer, or across to another entry of its own line,
// in words: 'upstream/health.js -> proxy/tcp.js (up: proxy/ is above upstream/)'.
function wrongWay (graph, layers) {
  const rank = new Map()
  layers.forEach((line, i) => { for (const entry of line) rank.set(entry, i) })
  const wrong = []
  for (const [file, requires] of graph) {
    const from = entryOf(file)
    for (const target of requires) {
      const to = entryOf(target)
      if (to === from) continue
      if (!rank.has(from) || !rank.has(to)) continue // said by unplaced()
      if (rank.get(to) < rank.get(from)) wrong.push(`${file} -> ${target} (up: ${to} is above ${from})`)
      else if (rank.get(to) === rank.get(from)) wrong.push(`${file} -> ${target} (across: ${to} and ${from} share a line)`)
    }
  }
  return wrong
}

// The entries at the top of lib/ without a line in the layers, and lines naming none.
function unplaced (graph, layers) {
  const placed = layers.flat()
  const entries = [...new Set([...graph.keys()].map(entryOf))]
  return {
    missing: entries.filter(entry => !placed.includes(entry)),
    stale: placed.filter(entry => !entries.includes(entry))
  }
}

// The cycles among lib/'s files (strongly connected components of more than one file,
// or a file that requires itself), each as its files.
function cycles (graph) {
  let next = 0
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const found = []
  function visit (file) {
    index.set(file, next)
    low.set(file, next)
    next++
    stack.push(file)
    onStack.add(file)
    for (const target of graph.get(file)) {
      if (!graph.has(target)) continue
      if (!index.has(target)) {
        visit(target)
        low.set(file, Math.min(low.get(file), low.get(target)))
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file), index.get(target)))
      }
    }
    if (low.get(file) !== index.get(file)) return
    const component = []
    let member
    do {
      member = stack.pop()
      onStack.delete(member)
      component.push(member)
    } while (member !== file)
    if (component.length > 1 || graph.get(file).includes(file)) found.push(component.sort())
  }
  for (const file of graph.keys()) if (!index.has(file)) visit(file)
  return found
}

// The part of `graph` inside `folder` ('proxy/'), its paths relative to it: what the
// folder's own layers order.
function inside (graph, folder) {
  const part = new Map()
  for (const [file, requires] of graph) {
    if (!file.startsWith(folder)) continue
    const within = requires.filter(target => target.startsWith(folder)).map(target => target.slice(folder.length))
    part.set(file.slice(folder.length), within)
  }
  return part
}

const architecture = fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8')
const layers = readLayers(architecture)
const graph = readGraph()
const proxyLayers = readLayers(architecture, 'proxy/')
const proxyGraph = inside(graph, 'proxy/')

t.test('ARCHITECTURE.md gives the layers, every entry at the top of lib/ on one line', async t => {
  t.ok(layers !== null && layers.length > 1, 'a ```layers block in ARCHITECTURE.md')
  const { missing, stale } = unplaced(graph, layers)
  t.same(missing, [], 'entries of lib/ on no line of ARCHITECTURE.md\'s layers')
  t.same(stale, [], 'entries of the layers that lib/ does not hold')
  const all = layers.flat()
  t.same(all.filter((entry, i) => all.indexOf(entry) !== i), [], 'entries on two lines')
})

t.test('every require in lib/ finds its file', async t => {
  const missing = [...graph].flatMap(([file, requires]) =>
    requires.filter(target => target.endsWith('(missing)')).map(target => `${file} -> ${target}`))
  t.same(missing, [])
})

t.test('no require in lib/ runs back up a layer or across one', async t => {
  t.same(wrongWay(graph, layers), [])
})

t.test('no requires in lib/ go round in a cycle', async t => {
  t.same(cycles(graph), [])
})

t.test('proxy/ has its own layers: its folders and files import one way', async t => {
  t.ok(proxyLayers !== null && proxyLayers.length > 1, 'a ```layers proxy/ block in ARCHITECTURE.md')
  const { missing, stale } = unplaced(proxyGraph, proxyLayers)
  t.same(missing, [], 'entries of lib/proxy/ on no line of its layers')
  t.same(stale, [], 'entries of its layers that lib/proxy/ does not hold')
  const all = proxyLayers.flat()
  t.same(all.filter((entry, i) => all.indexOf(entry) !== i), [], 'entries on two lines')
  t.same(wrongWay(proxyGraph, proxyLayers), [], 'no require in lib/proxy/ runs back up its layers or across one')
})

// The checks themselves, on a made-up tree: each can fail.
t.test('the checks find a require up, one across, a cycle and an unplaced folder', async t => {
  const made = new Map([
    ['cli/main.js', ['proxy/tcp.js', 'log.js']],
    ['proxy/tcp.js', ['upstream/attempt.js', 'cli/main.js']],
    ['proxy/a.js', ['proxy/b.js']],
    ['proxy/b.js', ['proxy/a.js']],
    ['upstream/attempt.js', ['tls/keeper.js', 'log.js']],
    ['tls/keeper.js', []],
    ['extra/x.js', ['log.js']],
    ['log.js', []]
  ])
  const madeLayers = [['cli/'], ['proxy/'], ['upstream/', 'tls/'], ['log.js'], ['gone/']]
  t.same(wrongWay(made, madeLayers), [
    'proxy/tcp.js -> cli/main.js (up: cli/ is above proxy/)',
    'upstream/attempt.js -> tls/keeper.js (across: tls/ and upstream/ share a line)'
  ])
  t.same(cycles(made), [['cli/main.js', 'proxy/tcp.js'], ['proxy/a.js', 'proxy/b.js']])
  t.same(unplaced(made, madeLayers), { missing: ['extra/'], stale: ['gone/'] })
  t.same(readLayers('x\n```layers\ncli/\nadmin/ config/\n  net/\n```\n'), [['cli/'], ['admin/', 'config/', 'net/']])
  const both = '```layers\ncli/\nproxy/\n```\n```layers proxy/\nhttp/\nhttp1/ http2/\n```\n'
  t.same(readLayers(both), [['cli/'], ['proxy/']])
  t.same(readLayers(both, 'proxy/'), [['http/'], ['http1/', 'http2/']])
  const codecs = inside(new Map([
    ['proxy/http/protocol.js', ['proxy/http1/session.js', 'upstream/attempt.js']],
    ['proxy/http1/session.js', ['proxy/http/exchange.js', 'log.js']],
    ['proxy/http/exchange.js', []],
    ['upstream/attempt.js', []]
  ]), 'proxy/')
  t.same([...codecs.keys()], ['http/protocol.js', 'http1/session.js', 'http/exchange.js'])
  t.same(wrongWay(codecs, [['http/'], ['http1/', 'http2/']]),
    ['http1/session.js -> http/exchange.js (up: http/ is above http1/)'], 'a codec requiring the exchange')
})
