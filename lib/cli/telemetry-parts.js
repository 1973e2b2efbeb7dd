'use strict'

// --otlp as a process runs it: one lila (main.js serve) makes spans and pushes the
// metrics; a --workers worker (worker.js) makes spans; the primary (primary.js) pushes
// the metrics summed over its workers. What each says of them joins its snapshot as
// `telemetry: { spans, metrics }` (the status page, /metrics).
//
//   const parts = startTelemetry(config, { env, log, spans, metrics, say })
//   parts.tracer                 for createBalancer (null: no spans here)
//   parts.pushMetrics(stats, processStats)   start the metrics push (when this process does)
//   parts.withTelemetry(snapshot) -> the snapshot with `telemetry`
//   parts.close() -> Promise     the last spans and metrics sent

const { otlpSettings } = require('../config/otel-environment')

const OFF = Object.freeze({
  tracer: null,
  pushMetrics: () => {},
  withTelemetry: snapshot => snapshot,
  close: () => Promise.resolve()
})

// spans, metrics: whether this process makes spans, pushes metrics; say: whether its
// warnings on OTEL_* are its to say (the primary's and a lone lila's, not each worker's).
function startTelemetry (config, { env = process.env, log, spans = true, metrics = true, say = true }) {
  const { settings, warnings } = otlpSettings(config, env)
  if (say) for (const warning of warnings) log.warn(`OTLP: ${warning}`)
  if (settings === null) return OFF
  const { createTelemetry } = require('../telemetry')
  const telemetry = createTelemetry({ ...settings, traces: spans ? settings.traces : null }, { log })
  let push = null
  return {
    tracer: telemetry.tracer,
    pushMetrics (stats, processStats) {
      if (!metrics || settings.metrics === null) return
      const { startMetricsPush } = require('../admin/metrics-push')
      const version = require('../version')
      push = startMetricsPush(settings, { stats, resource: telemetry.resource, log, version, processStats })
    },
    withTelemetry (snapshot) {
      const own = telemetry.snapshot()
      const spansSeen = snapshot.telemetry ? snapshot.telemetry.spans : null // summed over workers
      return {
        ...snapshot,
        telemetry: { spans: own.spans || spansSeen || null, metrics: push === null ? null : push.snapshot() }
      }
    },
    async close () {
      await telemetry.close()
      if (push !== null) await push.close()
    }
  }
}

module.exports = { startTelemetry }
