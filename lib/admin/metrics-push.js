'use strict'

// --otlp: the metrics of /metrics pushed to a collector every --otlp-interval, as OTLP
// (otlp-metrics.js reads what renderMetrics writes), cumulative, with the process's
// resource (telemetry/index.js). One push at a time: a collector still busy with the
// last one (the exporter retrying) is skipped this time and counted; the next push
// carries the totals anyway. A last push when lila stops.
//
//   const push = startMetricsPush(settings, { stats, resource, log, version, process })
//   push.snapshot() -> { url, sent, failed, exports, skipped, lastError }
//   push.close() -> Promise   the last push, one try

const { OtlpExporter } = require('../telemetry/exporter')
const { SCOPE } = require('../telemetry')
const { encodeMetrics } = require('../wire/otlp')
const { renderMetrics } = require('./metrics')
const { metricsOf } = require('./otlp-metrics')

// settings: { metrics (a signal's, config/otel-environment.js), interval }.
// stats() -> a snapshot (or a promise of one); processStats() -> the process_* figures, or null.
function startMetricsPush ({ metrics: signal, interval }, options) {
  const { stats, resource, log, version, processStats = () => null } = options
  const exporter = new OtlpExporter(signal, { what: 'metrics', log })
  let pushing = null
  let skipped = 0
  const started = Date.now()

  const push = () => {
    if (pushing !== null) {
      skipped++
      return pushing
    }
    pushing = Promise.resolve().then(stats).then(snapshot => {
      const list = metricsOf(renderMetrics(snapshot, { version, process: processStats() }))
      let count = 0
      for (const metric of list) count += metric.points.length
      const start = snapshot.startedAt === undefined ? started : snapshot.startedAt
      const body = encodeMetrics({ resource, scope: SCOPE, start, time: Date.now(), metrics: list }, signal.json)
      return exporter.send(body, count)
    }).catch(err => {
      log.warn(`OTLP: the metrics could not be gathered (${err.message})`)
    }).then(() => { pushing = null })
    return pushing
  }

  const timer = setInterval(push, interval)
  timer.unref()

  return {
    push,
    snapshot: () => ({ ...exporter.snapshot(), skipped }),
    async close () {
      clearInterval(timer)
      exporter.end()
      if (pushing !== null) await pushing
      await push()
      exporter.close()
    }
  }
}

module.exports = { startMetricsPush }
