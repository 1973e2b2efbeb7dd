#!/usr/bin/env node
'use strict'

// Exported names of lib/ that nothing imports: lib/, test/, bench/ and scripts/ count as
// users. Prints each as "lib/FILE: NAME" and exits 1 if there is any (test/exports.test.js).
//
// An export is used when another file destructures it from a require() of its module,
// reads it as a property of the module's object (`m.NAME`, `require(...).NAME`), or,
// for a module required by a computed path (a test's child process), names it at all.
// The public entries (what `require('lila-lb')` gives) are used by definition.

const fs = require('fs')
const path = require('path')

const ROOT = path.resolve(__dirname, '..')
const PUBLIC = new Set(['lib/api.js', 'lib/index.js'])

function walk (dir, out = []) {
  if (!fs.existsSync(dir)) return out
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue
    const p = path.join(dir, e.name)
    if (e.isDirectory()) walk(p, out)
    else if (e.name.endsWith('.js')) out.push(p)
  }
  return out
}

// The names in `module.exports = { ... }` and `module.exports.NAME =` / `exports.NAME =`.
function exportsOf (src) {
  const names = new Set()
  const block = /module\.exports\s*=\s*\{([^}]*)\}/.exec(src)
  if (block) {
    const body = block[1].replace(/\/\/.*$/gm, '')
    for (const part of body.split(',')) {
      const name = /^\s*([A-Za-z_$][\w$]*)/.exec(part)
      if (name) names.add(name[1])
    }
  }
  for (const m of src.matchAll(/(?:module\.)?exports\.([A-Za-z_$][\w$]*)\s*=/g)) names.add(m[1])
  return names
}

function resolve (from, spec) {
  let t = path.resolve(path.dirname(from), spec)
  if (fs.existsSync(t) && fs.statSync(t).isDirectory()) t = path.join(t, 'index.js')
  else if (!t.endsWith('.js')) t += '.js'
  return t
}

// What `file` takes of each module it requires by a literal path: a Set of names, or
// ALL when it uses the module object in a way not read here.
const ALL = Symbol('all')
const COMPUTED = /require\((?!\s*['"])/
function usesOf (file, src) {
  // The text without comments and quoted strings, where a module object's uses are
  // counted.
  const code = src.replace(/\/\/.*$/gm, '').replace(/'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"/g, "''")
  const uses = new Map()
  const add = (target, names) => {
    const had = uses.get(target)
    if (had === ALL) return
    if (names === ALL) return uses.set(target, ALL)
    if (had === undefined) uses.set(target, new Set(names))
    else for (const n of names) had.add(n)
  }
  const re = /(?:(const|let|var)\s+(\{[^}]*\}|[A-Za-z_$][\w$]*)\s*=\s*)?require\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)(\.[A-Za-z_$][\w$]*)?/g
  for (const m of src.matchAll(re)) {
    const target = resolve(file, m[3])
    if (m[4]) { add(target, [m[4].slice(1)]); continue }
    if (m[2] && m[2].startsWith('{')) {
      if (m[2].includes('...')) { add(target, ALL); continue }
      add(target, m[2].slice(1, -1).split(',').map(p => p.split(':')[0].trim()).filter(Boolean))
    } else if (m[2]) {
      const local = m[2]
      const escapes = new RegExp(`(?<![\\w$.])${local.replace(/\$/g, '\\$')}(?![\\w$]*\\s*\\.)(?![\\w$])`, 'g')
      const uses = [...code.matchAll(escapes)].length
      // One mention is the declaration: more that are not `local.NAME` hand the object on.
      if (uses > 1) { add(target, ALL); continue }
      add(target, [...code.matchAll(new RegExp(`(?<![\\w$.])${local.replace(/\$/g, '\\$')}\\.([A-Za-z_$][\\w$]*)`, 'g'))].map(x => x[1]))
    } else {
      add(target, ALL) // require() for its effect, or its value used in place
    }
  }
  return uses
}

function deadExports (root = ROOT) {
  const libFiles = walk(path.join(root, 'lib'))
  const users = ['lib', 'test', 'bench', 'scripts'].flatMap(d => walk(path.join(root, d)))
  const sources = new Map(users.map(f => [f, fs.readFileSync(f, 'utf8')]))
  const taken = new Map() // module -> Set of names, or ALL
  for (const [file, src] of sources) {
    for (const [target, names] of usesOf(file, src)) {
      const had = taken.get(target)
      if (had === ALL) continue
      if (names === ALL) taken.set(target, ALL)
      else taken.set(target, new Set([...(had || []), ...names]))
    }
  }
  const dead = []
  for (const file of libFiles) {
    const rel = path.relative(root, file)
    if (PUBLIC.has(rel)) continue
    const names = exportsOf(sources.get(file))
    const took = taken.get(file)
    if (took === ALL) continue
    // A module a file names by a computed path (a test's child process, say): its
    // names count as used wherever such a file mentions them.
    const computed = [...sources].filter(([f, src]) => f !== file && COMPUTED.test(src) &&
      src.includes(path.basename(file)) && !usesOf(f, src).has(file))
    for (const name of names) {
      if (took && took.has(name)) continue
      const word = new RegExp(`(?<![\\w$])${name.replace(/\$/g, '\\$')}(?![\\w$])`)
      if (computed.some(([, src]) => word.test(src))) continue
      dead.push(`${rel}: ${name}`)
    }
  }
  return dead
}

if (require.main === module) {
  const dead = deadExports()
  for (const line of dead) console.log(line)
  console.log(`dead exports: ${dead.length}`)
  process.exit(dead.length > 0 ? 1 : 0)
}

module.exports = { deadExports }
