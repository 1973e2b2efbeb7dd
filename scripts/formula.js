#!/usr/bin/env node
'use strict'

// Points Formula/lila.rb at the npm tarball of the current version: the url from
// package.json's version, the sha256 from `npm pack` (which is reproducible). Run it
// when releasing, after the version bump and the build: `npm run formula`.

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')
const { execFileSync } = require('child_process')

const root = path.join(__dirname, '..')
const { name, version } = require('../package.json')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-pack-'))
try {
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }))
  const sha256 = crypto.createHash('sha256').update(fs.readFileSync(path.join(dir, packed.filename))).digest('hex')
  const file = path.join(root, 'Formula', 'lila.rb')
  const formula = fs.readFileSync(file, 'utf8')
    .replace(/^( {2}url ").*(")$/m, `$1https://registry.npmjs.org/${name}/-/${name}-${version}.tgz$2`)
    .replace(/^( {2}sha256 ").*(")$/m, `$1${sha256}$2`)
  fs.writeFileSync(file, formula)
  console.log(`Formula/lila.rb: ${name}@${version} sha256 ${sha256}`)
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
