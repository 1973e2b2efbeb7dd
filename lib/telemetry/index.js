'use strict'

// --otlp in one process: the resource it speaks as, the tracer whose spans the
// listeners make (null when traces are off), and their batch and exporter; the metrics
// are pushed by admin/metrics-push.js with the same resource.
//
//   const telemetry = createTelemetry(settings, { log })   settings: config/otel-environment.js's
//   telemetry.tracer            a Tracer, or null
//   telemetry.resource          flat attributes: the settings' and this process's
//   telemetry.snapshot() -> { spans: { url, sent, failed, dropped, queued, ... } | null }
//   telemetry.close()           the last spans sent, once

const os = require('os')
const crypto = require('crypto')
const VERSION = require('../version')
const { Tracer } = require('./tracer')
const { SpanBatch, JsonSpans } = require('./batch')
const { OtlpExporter } = require('./exporter')
const { encodeTraces, EncodedSpans } = require('../wire/otlp')

const SCOPE = Object.freeze({ name: 'lila', version: VERSION })
const INSTANCE = crypto.randomUUID() // service.instance.id: this process

// What every span and metric of this process says of where it comes from.
function resourceOf (attributes) {
  const out = [...attributes]
  const has = key => out.some((k, i) => i % 2 === 0 && k === key)
  const add = (key, value) => { if (!has(key)) out.push(key, value) }
  add('service.version', VERSION)
  add('service.instance.id', INSTANCE)
  add('host.name', os.hostname())
  add('process.pid', process.pid)
  add('process.runtime.name', 'nodejs')
  add('process.runtime.version', process.versions.node)
  add('telemetry.sdk.name', 'lila')
  add('telemetry.sdk.language', 'nodejs')
  add('telemetry.sdk.version', VERSION)
  return out
}

function createTelemetry (settings, { log }) {
  const resource = resourceOf(settings.resource)
  let batch = null
  let tracer = null
  if (settings.traces !== null) {
    const exporter = new OtlpExporter(settings.traces, { what: 'spans', log })
    const spans = settings.traces.json
      ? new JsonSpans(list => encodeTraces({ resource, scope: SCOPE, spans: list }, true))
      : new EncodedSpans({ resource, scope: SCOPE })
    batch = new SpanBatch(exporter, spans, settings.batch)
    tracer = new Tracer({ sample: settings.sample, batch })
  }
  return {
    tracer,
    resource,
    snapshot: () => ({ spans: batch === null ? null : batch.snapshot() }),
    close: () => batch === null ? Promise.resolve() : batch.close()
  }
}

module.exports = { createTelemetry, SCOPE }
