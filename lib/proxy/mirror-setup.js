'use strict'

// --mirror and --compare for a listener, at the start and on a reload (after the
// protocol's reconfigure, whose head rewriting a copy shares): the Mirror to use from
// now on (http/mirror.js), or null: off. The same address keeps its Mirror, given the
// new settings; a new one makes a new Mirror, the old one's connections closed.
function configureMirror (current, { mirror, compare, timeout }, rewrite, log) {
  const settings = { compare, timeout, rewrite }
  if (current !== null && mirror && current.address === mirror.address) {
    current.configure(mirror, settings)
    return current
  }
  if (current !== null) current.close()
  if (!mirror) return null
  const { Mirror } = require('./http/mirror') // loaded only when asked for
  return new Mirror(mirror, settings, { log })
}

module.exports = { configureMirror }
