'use strict'

// The status page's OpenTelemetry section (--otlp): where the spans and the metrics go,
// how many reached the collector, how many were dropped, and what went wrong last.
// Pure: the snapshot's `telemetry` ({ spans, metrics }, cli/telemetry-parts.js) in,
// HTML out ('' without --otlp); `esc` the page's HTML escaping.

function telemetrySection (telemetry, esc) {
  if (!telemetry || (!telemetry.spans && !telemetry.metrics)) return ''
  const row = (what, s, dropped) => {
    const why = s.lastError ? `<span class="why">last failure: ${esc(s.lastError)}</span>` : ''
    return `<tr><td>${what}</td><td class="st">${esc(s.url)}${why}</td><td>${s.sent}</td>` +
      `<td>${dropped}</td><td>${s.failed}</td></tr>`
  }
  const rows = []
  if (telemetry.spans) rows.push(row('spans', telemetry.spans, telemetry.spans.dropped))
  if (telemetry.metrics) rows.push(row('metric points', telemetry.metrics, '–'))
  return `<h2>OpenTelemetry</h2>
<table><tr><th>what</th><th class="st">to</th><th>sent</th><th>dropped (queue full)</th>` +
    `<th>dropped (export failed)</th></tr>
${rows.join('\n')}
</table>`
}

module.exports = { telemetrySection }
