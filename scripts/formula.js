#!/usr/bin/env node
'use strict'

// Formula/lila.rb describes the npm tarball of this tree: its url names package.json's
// version, its sha256 is the hash of what `npm pack` makes of the tree (npm pack is
// reproducible). `npm run build` rewrites both with ./lila, and `--check` fails when
// they no longer describe the tree, so a release (`npm publish` of a tagged tree) always
// publishes the bytes the formula names.
//   node scripts/formula.js          rewrite Formula/lila.rb
//   node scripts/formula.js --check  exit 1 if it does not describe this tree

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')
const { execFileSync } = require('child_process')

const root = path.join(__dirname, '..')
const FILE = path.join(root, 'Formula', 'lila.rb')

// The sha256 of `npm pack` of the tree, and the registry url of its version.
function describeTree () {
  const { name, version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-pack-'))
  try {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], {
      cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore']
    })
    const [packed] = JSON.parse(out)
    const sha256 = crypto.createHash('sha256').update(fs.readFileSync(path.join(dir, packed.filename))).digest('hex')
    return { url: `https://registry.npmjs.org/${name}/-/${name}-${version}.tgz`, sha256 }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// The formula's text, made to describe `tree`.
// A merge can leave two sha256 lines between conflict markers: replacing the first would
// pass the check, so such a file is refused.
function formulaFor (text, { url, sha256 }) {
  if (/^(<{7}|={7}|>{7})/m.test(text) || text.match(/^ {2}(url|sha256) "/gm)?.length !== 2) {
    throw new Error('Formula/lila.rb must hold one url and one sha256 line and no conflict markers: fix it by hand')
  }
  return text.replace(/^( {2}url ").*(")$/m, `$1${url}$2`).replace(/^( {2}sha256 ").*(")$/m, `$1${sha256}$2`)
}

// Write the formula (check: only compare); true when it already described the tree.
function updateFormula ({ check = false } = {}) {
  const current = fs.readFileSync(FILE, 'utf8')
  const wanted = formulaFor(current, describeTree())
  if (!check && wanted !== current) fs.writeFileSync(FILE, wanted)
  return wanted === current
}

module.exports = { describeTree, formulaFor, updateFormula }

if (require.main === module) {
  const check = process.argv.includes('--check')
  const current = updateFormula({ check })
  if (check && !current) {
    console.error('Formula/lila.rb does not describe this tree: run `npm run build` and commit the result')
    process.exit(1)
  }
  console.log(`Formula/lila.rb ${current ? 'describes' : 'now describes'} this tree`)
}
