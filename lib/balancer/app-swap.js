'use strict'

const { RuntimeError } = require('../errors')

// A reload that starts or stops a kept listener's app (lila run: "run" added to a
// listener or taken from it), in place: the listener keeps its socket, and nothing is
// refused or cut.
//   Starting: the app starts before anything changes (one that does not start refuses
//   the reload); its instances join the upstream beside the backends they replace,
//   which leave (and drain) once the instances' backends are up.
//   Stopping: the new backends join beside the instances; once they were probed, each
//   instance drains and stops, as a rolling restart retires one; then its group goes.

// Before the reload applies: the apps of the kept listeners (plan.js keep) that gain
// one, started. -> Map(listener -> App). Rejects with a RuntimeError, the apps started
// stopped again, when one does not start.
async function startGained (apps, keep, byName) {
  const gained = new Map()
  try {
    for (const { config } of keep) {
      const listener = byName.get(config.name)
      if (listener.config.run !== null || config.run === null) continue
      const app = apps.make(config, listener.log)
      gained.set(listener, app)
      await app.start().catch(err => {
        throw new RuntimeError(`listener ${config.name}: ${err.message}`)
      })
    }
  } catch (err) {
    await Promise.all([...gained.values()].map(app => app.stop()))
    throw err
  }
  return gained
}

// While the reload applies, before the listener takes its new config (listener-maker.js
// update, whose upstream update then lets the backends replaced go): `app` is the App
// it gains (startGained), or undefined. -> the lines said.
async function swapApp (apps, listener, config, app) {
  const { upstream } = listener
  const before = listener.config.backends
  if (app !== undefined) {
    upstream.useApp(app)
    apps.adopt(listener, app)
    const lines = upstream.update({ ...config, backends: [...before, ...config.backends] })
    await app.upstreamsUp(app.readyPorts())
    return lines
  }
  const old = apps.of(listener)
  if (old === null || config.run !== null) return []
  const lines = upstream.update({ ...config, backends: [...config.backends, ...before] })
  await upstream.probed()
  const stopped = await old.retireAll()
  await apps.stop(listener)
  upstream.useApp(null)
  return [...lines, `app stopped (${stopped} instance${stopped === 1 ? '' : 's'} drained)`]
}

module.exports = { startGained, swapApp }
