'use strict'

const fs = require('fs')
const path = require('path')

// --watch: a change under any of `paths` (folders recursively) calls onChange once the
// changes have stopped for DEBOUNCE, so that a save of many files, or an editor's
// write-then-rename, rolls once. Changes under node_modules or .git are not the app's.
const DEBOUNCE = 300
const IGNORED = new Set(['node_modules', '.git'])

function watchFiles (paths, onChange, { cwd = process.cwd(), log } = {}) {
  const watchers = []
  let timer = null
  const changed = (file, filename) => {
    const parts = String(filename || '').split(path.sep)
    if (parts.some(part => IGNORED.has(part))) return
    clearTimeout(timer)
    timer = setTimeout(() => onChange(path.join(file, filename || '')), DEBOUNCE)
  }
  for (const given of paths) {
    const file = path.resolve(cwd, given)
    try {
      const options = { recursive: true, persistent: false }
      const watcher = fs.watch(file, options, (event, filename) => changed(file, filename))
      watcher.on('error', err => log.warn(`--watch ${given}: ${err.message}; no longer watched`))
      watchers.push(watcher)
    } catch (err) {
      log.warn(`--watch ${given}: ${err.message}; not watched`)
    }
  }
  return {
    close () {
      clearTimeout(timer)
      for (const watcher of watchers) watcher.close()
    }
  }
}

module.exports = { watchFiles }
