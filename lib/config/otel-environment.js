'use strict'

// Where --otlp sends, from its options and the OpenTelemetry SDKs' environment
// variables, read as the SDKs read them: a value that cannot be read is a warning and
// the default, never an exit. Pure: (config, env) -> { settings, warnings }.
//
//   OTEL_EXPORTER_OTLP_ENDPOINT            a base URL: /v1/traces and /v1/metrics under it
//   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,    one signal's URL, as it is
//     OTEL_EXPORTER_OTLP_METRICS_ENDPOINT  (--otlp URL is both signals' base, over these)
//   OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]HEADERS      k=v,k2=v2, values percent-decoded
//   OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]TIMEOUT      ms per export request (10000)
//   OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]COMPRESSION  gzip, or none (the default, as the SDKs')
//   OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL     http/protobuf (default) or http/json
//   OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER       none: that signal is not sent
//   OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES       the resource (service.name: lila)
//   OTEL_BSP_SCHEDULE_DELAY (5000), OTEL_BSP_MAX_QUEUE_SIZE (2048),
//     OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512)            the span batch (telemetry/batch.js)
//   OTEL_SDK_DISABLED=true                            nothing is sent
//
// settings: null (off), or { traces, metrics, interval, sample, batch, resource }:
// traces and metrics each null (off) or { url, headers: [[name, value]], compression,
// timeout, json }; resource flat [key, value, ...].

const { OTLP_DEFAULT_ENDPOINT } = require('./options')

const SIGNALS = { traces: 'v1/traces', metrics: 'v1/metrics' }
// The SDKs' defaults for what lila has no option of its own for.
const SDK_DEFAULTS = { timeout: 10000, delay: 5000, maxQueue: 2048, size: 512 }
const PROTOCOLS = { 'http/protobuf': false, 'http/json': true }

function otlpSettings (config, env = {}) {
  const warnings = []
  if (config.otlp === null || config.otlp === undefined) return { settings: null, warnings }
  const warn = (variable, value, expected, fallback) =>
    warnings.push(`${variable}=${JSON.stringify(value)} cannot be read (expected ${expected}); ${fallback}`)
  if ((env.OTEL_SDK_DISABLED || '').trim().toLowerCase() === 'true') {
    warnings.push('OTEL_SDK_DISABLED is true: --otlp sends nothing')
    return { settings: null, warnings }
  }

  const read = (variable, parse, expected, fallback, shown = fallback) => {
    const text = env[variable]
    if (text === undefined || text.trim() === '') return fallback
    const value = parse(text.trim())
    if (value !== undefined) return value
    warn(variable, text, expected, `using ${shown}`)
    return fallback
  }
  const base = config.otlp !== 'env'
    ? config.otlp
    : read('OTEL_EXPORTER_OTLP_ENDPOINT', httpUrl, 'an http:// or https:// URL', OTLP_DEFAULT_ENDPOINT)

  const signal = name => {
    const upper = name.toUpperCase()
    const exporter = read(`OTEL_${upper}_EXPORTER`, text => ['otlp', 'none'].includes(text) ? text : undefined,
      'otlp or none', 'otlp')
    if (exporter === 'none') return null
    const generic = 'OTEL_EXPORTER_OTLP_'
    const own = `OTEL_EXPORTER_OTLP_${upper}_`
    const either = (key, parse, expected, fallback, shown) =>
      read(`${own}${key}`, parse, expected, read(`${generic}${key}`, parse, expected, fallback, shown), shown)
    const joined = base.endsWith('/') ? `${base}${SIGNALS[name]}` : `${base}/${SIGNALS[name]}`
    const url = config.otlp !== 'env'
      ? joined
      : read(`${own}ENDPOINT`, httpUrl, 'an http:// or https:// URL', joined)
    const headers = [
      ...headersOf(env[`${generic}HEADERS`], `${generic}HEADERS`, warnings),
      ...headersOf(env[`${own}HEADERS`], `${own}HEADERS`, warnings)
    ]
    const timeout = either('TIMEOUT', wholeMs, 'milliseconds, a whole number above 0', SDK_DEFAULTS.timeout,
      `${SDK_DEFAULTS.timeout}`)
    const compression = either('COMPRESSION', text => ['gzip', 'none'].includes(text) ? text : undefined,
      'gzip or none', 'none')
    const protocol = either('PROTOCOL', text => text in PROTOCOLS ? text : undefined,
      'http/protobuf or http/json (lila does not speak OTLP over gRPC)', 'http/protobuf')
    return { url, headers, compression, timeout, json: PROTOCOLS[protocol] }
  }

  const traces = signal('traces')
  const metrics = signal('metrics')
  const batch = {
    delay: read('OTEL_BSP_SCHEDULE_DELAY', wholeMs, 'milliseconds', SDK_DEFAULTS.delay),
    maxQueue: read('OTEL_BSP_MAX_QUEUE_SIZE', wholeMs, 'a whole number above 0', SDK_DEFAULTS.maxQueue),
    size: read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', wholeMs, 'a whole number above 0', SDK_DEFAULTS.size)
  }
  if (batch.size > batch.maxQueue) {
    warnings.push(`OTEL_BSP_MAX_EXPORT_BATCH_SIZE ${batch.size} is over the queue's ${batch.maxQueue}; ` +
      `using ${batch.maxQueue}`)
    batch.size = batch.maxQueue
  }

  const resource = listOf(env.OTEL_RESOURCE_ATTRIBUTES, 'OTEL_RESOURCE_ATTRIBUTES', warnings)
  const named = resource.findIndex(([key]) => key === 'service.name')
  const serviceName = (env.OTEL_SERVICE_NAME || '').trim() || (named >= 0 ? resource[named][1] : 'lila')
  const attributes = ['service.name', serviceName]
  for (const [key, value] of resource) if (key !== 'service.name') attributes.push(key, value)

  const settings = {
    traces,
    metrics,
    interval: config.otlpInterval,
    sample: config.traceSample,
    batch,
    resource: attributes
  }
  return { settings: traces === null && metrics === null ? null : settings, warnings }
}

function httpUrl (text) {
  try {
    const url = new URL(text)
    if ((url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '') return text
  } catch {}
  return undefined
}

function wholeMs (text) {
  return /^\d+$/.test(text) && Number(text) > 0 ? Number(text) : undefined
}

// "k=v,k2=v2" (W3C Baggage's form, as the SDKs read it): keys and values trimmed and
// percent-decoded; an entry that cannot be read is said and left out.
function listOf (text, variable, warnings) {
  if (text === undefined || text.trim() === '') return []
  const out = []
  for (const entry of text.split(',')) {
    if (entry.trim() === '') continue
    const at = entry.indexOf('=')
    let pair = null
    if (at > 0) {
      try {
        pair = [decodeURIComponent(entry.slice(0, at).trim()), decodeURIComponent(entry.slice(at + 1).trim())]
      } catch {}
    }
    if (pair === null || pair[0] === '') {
      warnings.push(`${variable}: ${JSON.stringify(entry.trim())} cannot be read (expected key=value); left out`)
      continue
    }
    out.push(pair)
  }
  return out
}

// Header names in lower case, and only what HTTP allows in a field.
function headersOf (text, variable, warnings) {
  const out = []
  for (const [name, value] of listOf(text, variable, warnings)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\0\r\n]/.test(value)) {
      warnings.push(`${variable}: header ${JSON.stringify(name)} cannot be sent (not a field name and value); left out`)
      continue
    }
    out.push([name.toLowerCase(), value])
  }
  return out
}

module.exports = { otlpSettings }
