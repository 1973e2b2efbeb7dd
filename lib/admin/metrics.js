'use strict'

// /metrics: a stats snapshot (balancer.js stats()) as Prometheus text exposition format
// 0.0.4. Pure: snapshot in, text out; it reads nothing live, so the cluster primary can
// render a snapshot summed over its workers the same way. Every family is written once
// with its HELP and TYPE, then one sample per listener or backend. Names follow
// Prometheus' conventions: counters end in _total, units are seconds and bytes.

const { fleetMetrics } = require('./fleet-view')

const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
const STATUSES = ['up', 'down', 'pending', 'draining', 'drained', 'disabled']

// [name, type, help, value(listener) -> number | null (no sample)]
const LISTENER_FAMILIES = [
  ['lila_listener_accepted_connections_total', 'counter',
    'Client connections accepted.', l => l.accepted],
  ['lila_listener_active_connections', 'gauge',
    'Client connections being served now.', l => l.active],
  ['lila_listener_waiting_connections', 'gauge',
    'Client connections held unread over --max-conn.', l => l.waiting],
  ['lila_listener_max_connections', 'gauge',
    'The --max-conn in force, given or derived from the descriptor limit (per worker).', l => l.maxConn ?? null],
  ['lila_listener_accepting', 'gauge',
    '0 while the listener has stopped accepting for a while (out of descriptors, or full).',
    l => l.accepting === undefined ? null : (l.accepting ? 1 : 0)],
  ['lila_listener_limit_tracked_addresses', 'gauge',
    'Client addresses the per-client limits keep state for now (bounded: expires with them).',
    l => l.limitedClients === undefined ? null : l.limitedClients.connections + l.limitedClients.rate],
  ['lila_listener_unserved_total', 'counter',
    'Connections (tcp) or requests (http) that no backend could take.', l => l.unserved],
  ['lila_listener_queue_length', 'gauge',
    'Connections or requests waiting in the queue for a backend slot.', l => l.queued],
  ['lila_listener_queue_timeouts_total', 'counter',
    'Connections or requests that gave up waiting in the queue.', l => l.queueTimeouts],
  ['lila_listener_panic', 'gauge',
    '1 while every backend is down and traffic goes to them anyway.', l => l.panic ? 1 : 0],
  ['lila_listener_retry_budget_exhausted_total', 'counter',
    'Retries not made because the retry budget (--retry-budget) was used up.', l => l.retryBudgetExhausted],
  ['lila_listener_failed_everywhere_total', 'counter',
    'Requests that failed on two backends: blamed on the request, not the backends.', l => l.failedEverywhere]
]

// A route's pool (--route), as a listener's own: [name, type, help, value(route)].
const ROUTE_FAMILIES = [
  ['lila_route_queue_length', 'gauge', 'Requests of the route waiting in its queue for a backend slot.', r => r.queued],
  ['lila_route_queue_timeouts_total', 'counter', 'Requests of the route that gave up waiting in its queue.',
    r => r.queueTimeouts],
  ['lila_route_panic', 'gauge', '1 while every backend of the route is down and traffic goes to them anyway.',
    r => r.panic ? 1 : 0]
]

// [name, help, counts(listener or backend) -> { word: n }, label]: one sample per word.
const LISTENER_BY_CAUSE = [
  ['lila_listener_retries_total',
    'Connections or requests tried on another backend, by what failed (connect, closed, reset, invalid, a status).',
    l => l.retries, 'cause'],
  ['lila_listener_responses_total',
    'http: responses to clients by status class (the backend\'s, or lila\'s own; 499: the client left first; ' +
    'a backend\'s answer whose body --intercept-errors replaced is the backend\'s).',
    l => l.responses, 'code'],
  ['lila_listener_limited_total',
    'Clients or http requests turned away by a per-client limit (--rate-limit, --max-conn-per-client).',
    l => l.limited, 'limit'],
  ['lila_listener_refused_total',
    'Clients (tcp) or requests (http) refused by the rules at the edge, by reason (allow, deny, no-credentials, ' +
    'wrong-credentials, auth-busy, forward-auth, forward-auth-failed, maintenance; client-cert-none, ' +
    'client-cert-untrusted: TLS handshakes, --tls-client-ca).',
    l => l.refused, 'reason'],
  ['lila_listener_compressed_responses_total',
    'http --compress: responses compressed, by coding.', l => perCoding(l, 'responses'), 'encoding'],
  ['lila_listener_compression_in_bytes_total',
    'http --compress: bytes of responses before compression, by coding.', l => perCoding(l, 'bytesIn'), 'encoding'],
  ['lila_listener_compression_out_bytes_total',
    'http --compress: bytes of responses after compression, by coding.', l => perCoding(l, 'bytesOut'), 'encoding'],
  ['lila_listener_forward_auth_total',
    'http --forward-auth: questions to the auth service (asked), its 2xx answers (allowed), and 2xx answers ' +
    'remembered rather than asked (cached, --forward-auth-cache).', l => l.forwardAuth, 'result'],
  ['lila_listener_sticky_total',
    'http --sticky: responses by what the cookie did (honoured; reassigned: its backend could not take the ' +
    'request, or it named none of the pool; new: the request had none).',
    l => l.sticky ? l.stickyResponses : null, 'outcome']
]
const BACKEND_BY_CAUSE = [
  ['lila_backend_ejections_total',
    'Times passive health took the backend out, by the failure that did it.', b => b.ejections, 'cause'],
  ['lila_backend_responses_total',
    'http: responses the backend gave that reached clients, by status class (with --intercept-errors, those ' +
    'whose body became an --error-page too).', b => b.responses, 'code'],
  ['lila_backend_faults_injected_total',
    'Requests (http) or connections (tcp) an injected fault struck, by kind (delay, error, reset).',
    b => b.faultsInjected, 'kind']
]

// { gzip: n, br: n }: one figure of a listener's compression counts, by coding.
function perCoding (listener, key) {
  if (!listener.compression) return null
  return Object.fromEntries(Object.entries(listener.compression).map(([coding, c]) => [coding, c[key]]))
}

// [name after process_ (the serving process) or lila_worker_ (each --workers worker),
//  type, help, value(process stats) -> number | null]
const PROCESS_FAMILIES = [
  ['cpu_seconds_total', 'counter', 'User and system CPU time spent, in seconds.', p => p.cpuSeconds],
  ['resident_memory_bytes', 'gauge', 'Resident memory size in bytes.', p => p.residentBytes],
  ['start_time_seconds', 'gauge', 'Start time of the process since the Unix epoch, in seconds.', p => p.startTime],
  ['open_fds', 'gauge', 'Number of open file descriptors.', p => p.openFds],
  ['max_fds', 'gauge', 'Maximum number of open file descriptors.', p => p.maxFds]
]

const BACKEND_FAMILIES = [
  ['lila_backend_up', 'gauge',
    '1 when the backend is up by its health checks and traffic, else 0.', b => b.state === 'up' ? 1 : 0],
  ['lila_backend_weight', 'gauge',
    'Configured weight.', b => b.weight],
  ['lila_backend_effective_weight', 'gauge',
    'Weight in use now (lower while slow start ramps it up).', b => b.effectiveWeight],
  ['lila_backend_max_conn', 'gauge',
    'The backend\'s max-conn, when it has one.', b => b.maxConn],
  ['lila_backend_live', 'gauge',
    'Connections (tcp) or requests in flight (http) on the backend now.', b => b.live],
  ['lila_backend_requests_total', 'counter',
    'Connections (tcp) or requests (http) sent to the backend, retries included.', b => b.total],
  ['lila_backend_failures_total', 'counter',
    'Failed connects, closes and resets before an answer, timeouts, and (http) answers --eject-on counts.',
    b => b.failures],
  ['lila_backend_in_bytes_total', 'counter',
    'Bytes from clients to the backend.', b => b.bytesIn],
  ['lila_backend_out_bytes_total', 'counter',
    'Bytes from the backend to clients.', b => b.bytesOut],
  ['lila_backend_latency_estimate_seconds', 'gauge',
    'least-time\'s decaying peak average of response time, once measured.',
    b => b.latency === null ? null : b.latency / 1000],
  ['lila_backend_fault_active', 'gauge',
    '1 while a fault is injected on the backend (docs/faults.md), else 0.',
    b => b.fault === undefined ? null : (b.fault === null ? 0 : 1)]
]

// process: processStats() (process-stats.js) of the process serving /metrics, or null.
function renderMetrics (snapshot, { version = null, process = null } = {}) {
  const out = []
  const family = (name, type, help) => out.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`)

  if (version !== null) {
    family('lila_build_info', 'gauge', 'Always 1; the version is in the label.')
    out.push(`lila_build_info${labels({ version })} 1`)
  }
  if (snapshot.startedAt !== undefined) {
    family('lila_start_time_seconds', 'gauge', 'When lila started, in seconds since the Unix epoch.')
    out.push(`lila_start_time_seconds ${number(snapshot.startedAt / 1000)}`)
  }

  for (const [name, type, help, value] of LISTENER_FAMILIES) {
    family(name, type, help)
    for (const l of snapshot.listeners) sample(out, name, { listener: l.name }, value(l))
  }
  for (const [name, help, counts, label] of LISTENER_BY_CAUSE) {
    family(name, 'counter', help)
    for (const l of snapshot.listeners) byCause(out, name, { listener: l.name }, counts(l), label)
  }
  // --mirror and --compare (proxy/http/mirror.js, mirror-compare.js): listeners that have one.
  const mirrored = snapshot.listeners.filter(l => l.mirror)
  family('lila_mirror_requests_total', 'counter', 'http --mirror: copies of requests by outcome (sent: the ' +
    'mirror answered; failed: it could not; dropped: too many in flight; too-large: a body over 64 KiB).')
  for (const l of mirrored) {
    byCause(out, 'lila_mirror_requests_total', { listener: l.name }, l.mirror.requests, 'outcome')
  }
  family('lila_mirror_in_flight', 'gauge', 'http --mirror: copies sent and not yet answered.')
  for (const l of mirrored) sample(out, 'lila_mirror_in_flight', { listener: l.name }, l.mirror.inFlight)
  family('lila_compare_total', 'counter', 'http --compare: answers of the primary against the mirror\'s ' +
    '(same; status: another status; body: the same status, another body).')
  for (const l of mirrored) {
    const c = l.mirror.compare
    const results = c ? { same: c.same, status: c.status, body: c.body } : null
    byCause(out, 'lila_compare_total', { listener: l.name }, results, 'result')
  }

  // Each certificate a listener presents (files, --tls local, --tls acme).
  const certificates = (snapshot.certificates || []).filter(c => c.notAfter !== null)
  const certLabels = c => ({ listener: c.listener, names: c.names.join(','), issuer: c.issuer, source: c.source })
  family('lila_tls_certificate_expiry_seconds', 'gauge',
    'Seconds until the certificate expires (negative once it has); alert well before 0.')
  for (const c of certificates) sample(out, 'lila_tls_certificate_expiry_seconds', certLabels(c), c.expiresIn)
  family('lila_tls_certificate_not_after_seconds', 'gauge',
    'When the certificate expires, in seconds since the Unix epoch.')
  for (const c of certificates) sample(out, 'lila_tls_certificate_not_after_seconds', certLabels(c), c.notAfter / 1000)
  family('lila_tls_certificate_renewal_failing', 'gauge',
    '--tls local|acme: 1 while the last try to renew (or get) the certificate failed (the status page says why).')
  for (const c of snapshot.certificates || []) {
    const base = { listener: c.listener, names: c.names.join(','), source: c.source }
    if (c.source !== 'files') sample(out, 'lila_tls_certificate_renewal_failing', base, c.lastError ? 1 : 0)
  }

  // --fleet (fleet-view.js)
  fleetMetrics(snapshot.fleet, {
    family,
    sample: (name, base, value) => sample(out, name, base, value),
    byCause: (name, base, counts, label) => byCause(out, name, base, counts, label)
  })

  const requests = 'lila_listener_request_duration_seconds'
  family(requests, 'histogram', 'http: time from a request\'s head to the end of its response.')
  for (const l of snapshot.listeners) {
    if (l.requestTime) histogramSamples(out, requests, { listener: l.name }, l.requestTime)
  }

  // --route: each route's pool, labelled with the route's name.
  const routes = snapshot.listeners.flatMap(l => (l.routes || []).map(r => [{ listener: l.name, route: r.name }, r]))
  for (const [name, type, help, value] of ROUTE_FAMILIES) {
    family(name, type, help)
    for (const [base, r] of routes) sample(out, name, base, value(r))
  }

  edgeMetrics(out, family, snapshot)

  family('lila_range_ports', 'gauge',
    'Ports of a watched port range (a backend host:FIRST-LAST): live (listening, so backends) or idle.')
  const pools = [...snapshot.listeners.map(l => [{ listener: l.name }, l]), ...routes]
  for (const [base, pool] of pools) {
    for (const r of pool.ranges || []) {
      for (const state of ['live', 'idle']) {
        sample(out, 'lila_range_ports', { ...base, range: r.range, state }, r[state])
      }
    }
  }

  appFamilies(out, family, snapshot.listeners)

  const backends = []
  for (const l of snapshot.listeners) {
    for (const b of l.backends) backends.push([{ listener: l.name, backend: b.address }, b])
  }
  for (const [base, r] of routes) {
    for (const b of r.backends) backends.push([{ ...base, backend: b.address }, b])
  }
  for (const [base, pool] of [...snapshot.listeners.map(l => [{ listener: l.name }, l]), ...routes]) {
    const canary = pool.canary ? pool.canary.backends : []
    for (const b of canary) backends.push([{ ...base, side: 'canary', backend: b.address }, b])
  }

  family('lila_backend_status', 'gauge', `1 for the backend's status (${STATUSES.join(', ')}), 0 for the others.`)
  for (const [base, b] of backends) {
    for (const status of STATUSES) {
      out.push(`lila_backend_status${labels({ ...base, status })} ${b.status === status ? 1 : 0}`)
    }
  }
  for (const [name, type, help, value] of BACKEND_FAMILIES) {
    family(name, type, help)
    for (const [base, b] of backends) sample(out, name, base, value(b))
  }
  for (const [name, help, counts, label] of BACKEND_BY_CAUSE) {
    family(name, 'counter', help)
    for (const [base, b] of backends) byCause(out, name, base, counts(b), label)
  }

  const histogram = 'lila_backend_response_time_seconds'
  family(histogram, 'histogram',
    'Response time: http, until the response head; tcp, the connect plus the wait for the first byte.')
  for (const [base, b] of backends) histogramSamples(out, histogram, base, b.responseTime)

  // --otlp (telemetry/, admin/metrics-push.js): what reached the collector, what did not.
  const telemetry = snapshot.telemetry || {}
  const signals = [['spans', telemetry.spans], ['metrics', telemetry.metrics]].filter(([, s]) => s)
  if (signals.length > 0) {
    family('lila_otlp_exported_total', 'counter', '--otlp: spans and metric points the collector took.')
    for (const [signal, s] of signals) sample(out, 'lila_otlp_exported_total', { signal }, s.sent)
    family('lila_otlp_dropped_total', 'counter', '--otlp: spans and metric points that never reached the ' +
      'collector, by reason (queue-full: past the span queue; export-failed: given up after retries).')
    for (const [signal, s] of signals) {
      if (s.dropped !== undefined) sample(out, 'lila_otlp_dropped_total', { signal, reason: 'queue-full' }, s.dropped)
      sample(out, 'lila_otlp_dropped_total', { signal, reason: 'export-failed' }, s.failed)
    }
  }

  if (process !== null) {
    for (const [suffix, type, help, value] of PROCESS_FAMILIES) {
      if (value(process) === null) continue
      family(`process_${suffix}`, type, help)
      out.push(`process_${suffix} ${number(value(process))}`)
    }
  }
  // --workers: the primary serves /metrics, so process_* are its own; each worker's,
  // which hold the connections, come with its snapshot (cli/workers.js).
  const workers = (snapshot.workers || []).filter(w => w.process)
  if (workers.length > 0) {
    for (const [suffix, type, help, value] of PROCESS_FAMILIES) {
      family(`lila_worker_${suffix}`, type, `A --workers worker's: ${help}`)
      for (const w of workers) sample(out, `lila_worker_${suffix}`, { worker: String(w.index) }, value(w.process))
    }
  }
  return out.join('\n') + '\n'
}

// --- lila run (app/): the app's instances by state, and how many were started again, by reason ---
const APP_STATES = ['starting', 'ready', 'draining', 'stopping', 'backoff']

function appFamilies (out, family, listeners) {
  const apps = listeners.filter(l => l.app)
  family('lila_app_instances', 'gauge', `lila run: the app's instances by state (${APP_STATES.join(', ')}).`)
  for (const l of apps) {
    const counts = Object.fromEntries(APP_STATES.map(state => [state, 0]))
    for (const instance of l.app.list) if (counts[instance.state] !== undefined) counts[instance.state]++
    byCause(out, 'lila_app_instances', { listener: l.name }, counts, 'state')
  }
  family('lila_app_restarts_total', 'counter', 'lila run: instances started again or replaced, by reason (crash, ' +
    'signal, control, watch, max-rss, max-age).')
  for (const l of apps) byCause(out, 'lila_app_restarts_total', { listener: l.name }, l.app.restarts, 'reason')
}

// --maintenance and --canary, per pool (a listener's own, labelled by it; a route's,
// by both).
function edgeMetrics (out, family, snapshot) {
  family('lila_maintenance', 'gauge', 'http: 1 while the listener (or the route) answers 503 for maintenance.')
  for (const l of snapshot.listeners) {
    if (l.protocol === 'tcp' || !l.maintenance) continue
    const { listener, routes } = l.maintenance
    sample(out, 'lila_maintenance', { listener: l.name }, listener ? 1 : 0)
    for (const r of l.routes || []) {
      sample(out, 'lila_maintenance', { listener: l.name, route: r.name }, routes[r.name] ? 1 : 0)
    }
  }
  const pools = snapshot.listeners.flatMap(l => [[{ listener: l.name }, l],
    ...(l.routes || []).map(r => [{ listener: l.name, route: r.name }, r])])
  const canaries = pools.filter(([, pool]) => pool.canary)
  family('lila_canary_share_ratio', 'gauge', 'http --canary: the share of new clients the canary pool gets (0 to 1).')
  for (const [base, pool] of canaries) sample(out, 'lila_canary_share_ratio', base, pool.canary.share / 100)
  family('lila_canary_requests_total', 'counter', 'http --canary: requests by the side that served them.')
  family('lila_canary_errors_total', 'counter', 'http --canary: 5xx answers by the side that gave them.')
  for (const [base, pool] of canaries) {
    for (const side of ['stable', 'canary']) {
      sample(out, 'lila_canary_requests_total', { ...base, side }, pool.canary[side].requests)
      sample(out, 'lila_canary_errors_total', { ...base, side }, pool.canary[side].errors)
    }
  }
  const time = 'lila_canary_request_duration_seconds'
  family(time, 'histogram', 'http --canary: time from a request\'s head to the end of its response, by side.')
  for (const [base, pool] of canaries) {
    for (const side of ['stable', 'canary']) histogramSamples(out, time, { ...base, side }, pool.canary[side].time)
  }
}

// A histogram in ms ({ count, sum, bounds, counts }: cumulative counts) as seconds.
function histogramSamples (out, name, base, h) {
  for (let i = 0; i < h.counts.length; i++) {
    const le = i < h.bounds.length ? number(h.bounds[i] / 1000) : '+Inf'
    out.push(`${name}_bucket${labels({ ...base, le })} ${h.counts[i]}`)
  }
  out.push(`${name}_sum${labels(base)} ${number(h.sum / 1000)}`)
  out.push(`${name}_count${labels(base)} ${h.count}`)
}

function sample (out, name, base, value) {
  if (value === null || value === undefined) return
  out.push(`${name}${labels(base)} ${number(value)}`)
}

function byCause (out, name, base, counts, label) {
  if (!counts) return
  for (const word of Object.keys(counts).sort()) sample(out, name, { ...base, [label]: word }, counts[word])
}

function labels (pairs) {
  const parts = Object.keys(pairs).map(key => `${key}="${escapeLabel(String(pairs[key]))}"`)
  return `{${parts.join(',')}}`
}

// Label values escape backslash, double quote and line feed; HELP text backslash and
// line feed (the 0.0.4 format).
function escapeLabel (text) {
  return text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
}

function escapeHelp (text) {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')
}

function number (value) {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Infinity) return '+Inf'
  if (value === -Infinity) return '-Inf'
  return Number.isInteger(value) ? String(value) : String(Math.round(value * 1e9) / 1e9)
}

module.exports = { renderMetrics, escapeLabel, CONTENT_TYPE }
