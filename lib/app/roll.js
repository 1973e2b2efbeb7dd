'use strict'

const { formatDuration } = require('../format')

// A rolling restart of an app (app.js): each slot in turn (--surge at a time) gets a
// new instance, started on a spare port; once it is ready and its backends up, the
// instance it replaces drains (no new traffic, what it serves finishes) and is
// stopped. So the ready instances never number fewer than before. A new instance that
// exits or is never ready stops the roll: the old ones serve on, and the line says why
// with what it printed last; the next trigger tries again.
//
// It is the drain of a backend leaving, as membership does it for a port range or a
// name, with one step in front: start the replacement and wait until it is ready.
async function rollingRestart (app, { reason, why, slots }) {
  const { surge } = app.settings
  const started = app.now()
  const total = slots.length
  app.log.info(`app: rolling restart (${why}): ${total} instance${total === 1 ? '' : 's'}, ${surge} at a time`)
  const queue = slots.slice()
  let replaced = 0
  while (queue.length > 0) {
    if (app.stopped) return 'lila is stopping: rolling restart cut short'
    const batch = queue.splice(0, surge).filter(slot => app.slots.includes(slot))
    const fresh = await Promise.all(batch.map(slot => app.replacement(slot)))
    const failed = fresh.find(f => f.reason !== null || !f.instance.running)
    if (failed !== undefined || app.stopped) {
      for (const { instance, reason } of fresh) if (instance !== null && reason === null) app.retire(instance)
      if (app.stopped) return 'lila is stopping: rolling restart cut short'
      const said = failed.instance === null ? '' : failed.instance.last.said()
      const what = failed.reason || failed.instance.exit.text
      const line = `app: rolling restart stopped: the new app.${failed.slot.number} ${what}${said}; ` +
        `the old instances serve on (${replaced} of ${total} replaced); the next trigger tries again`
      app.log.warn(line)
      return line
    }
    const old = fresh.map(({ slot, instance }) => app.takeOver(slot, instance, reason)).filter(i => i !== null)
    await app.upstreamsUp(fresh.map(({ instance }) => instance.port))
    await Promise.all(old.map(instance => app.retire(instance)))
    replaced += batch.length
  }
  const line = `app: rolling restart done (${why}): ${replaced} replaced in ${formatDuration(app.now() - started)}`
  app.log.info(line)
  return line
}

module.exports = { rollingRestart }
