'use strict'

// /metrics as OTLP metrics (wire/otlp.js's model): the Prometheus text renderMetrics
// writes (metrics.js), read back family by family, so that what a collector gets has
// the same names, labels and values as what Prometheus scrapes, with no second list
// to drift. Counters become cumulative monotonic sums, gauges gauges, histograms
// cumulative explicit-bucket histograms (per-bucket counts from the cumulative `le`
// ones). Pure.
//
//   metricsOf(text) -> [{ name, description, unit, type, points }]

const TYPES = { counter: 'sum', gauge: 'gauge', histogram: 'histogram' }

function metricsOf (text) {
  const out = []
  const byName = new Map()
  let current = null
  let help = ''
  for (const line of text.split('\n')) {
    if (line === '') continue
    if (line.startsWith('# HELP ')) {
      help = unescapeHelp(line.slice(7 + line.slice(7).indexOf(' ') + 1))
      continue
    }
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ')
      const unit = /_seconds(_total)?$/.test(name) ? 's' : /_bytes(_total)?$/.test(name) ? 'By' : ''
      current = { name, description: help, unit, type: TYPES[type] || 'gauge', points: [], series: null }
      if (current.type === 'histogram') current.series = new Map()
      byName.set(name, current)
      out.push(current)
      continue
    }
    if (line.startsWith('#') || current === null) continue
    const { name, labels, value } = sampleOf(line)
    if (current.type !== 'histogram') {
      current.points.push({ attributes: labels, value })
      continue
    }
    // name_bucket{...,le="x"}, name_sum{...}, name_count{...}
    const suffix = name.slice(current.name.length + 1)
    const le = suffix === 'bucket' ? labels.splice(labels.indexOf('le'), 2)[1] : null
    const key = JSON.stringify(labels)
    let point = current.series.get(key)
    if (point === undefined) {
      point = { attributes: labels, count: 0, sum: 0, bounds: [], counts: [] }
      current.series.set(key, point)
      current.points.push(point)
    }
    if (suffix === 'sum') point.sum = value
    else if (suffix === 'count') point.count = value
    else {
      if (le !== '+Inf') point.bounds.push(Number(le))
      point.counts.push(value) // cumulative here; per bucket below
    }
  }
  for (const metric of out) {
    if (metric.type === 'histogram') {
      for (const point of metric.points) {
        for (let i = point.counts.length - 1; i > 0; i--) point.counts[i] -= point.counts[i - 1]
      }
    }
    delete metric.series
  }
  return out.filter(metric => metric.points.length > 0)
}

// `name{a="x",b="y"} value` -> { name, labels: flat [key, value, ...], value }
function sampleOf (line) {
  const brace = line.indexOf('{')
  const space = line.lastIndexOf(' ')
  const value = numberOf(line.slice(space + 1))
  if (brace < 0 || brace > space) return { name: line.slice(0, space), labels: [], value }
  const labels = []
  let i = brace + 1
  while (line[i] !== '}') {
    const eq = line.indexOf('=', i)
    const key = line.slice(i, eq)
    let j = eq + 2 // past ="
    let text = ''
    while (line[j] !== '"') {
      if (line[j] === '\\') {
        const next = line[j + 1]
        text += next === 'n' ? '\n' : next
        j += 2
      } else {
        text += line[j++]
      }
    }
    labels.push(key, text)
    i = line[j + 1] === ',' ? j + 2 : j + 1
  }
  return { name: line.slice(0, brace), labels, value }
}

function numberOf (text) {
  if (text === '+Inf') return Infinity
  if (text === '-Inf') return -Infinity
  return Number(text)
}

function unescapeHelp (text) {
  return text.replace(/\\(n|\\)/g, (all, c) => c === 'n' ? '\n' : '\\')
}

module.exports = { metricsOf }
