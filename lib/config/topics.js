'use strict'

// The help topics, in the order `lila help all` and the README list them. `summary`: its
// line in `lila --help`'s list of topics; `docs`: where it is told in full; `words`: what
// else leads to it in `lila help WORD` (an option's name does too).
const TOPICS = [
  // name, title, summary, docs, words
  ['listen', 'Listening', 'the port and address; tcp, http or grpc; the PROXY protocol',
    ['docs/tcp.md', 'docs/proxy-protocol.md'], ['proxy']],
  ['backends', 'Backends', 'addresses, weights, backups, DNS and SRV, port ranges, the queue',
    ['docs/backends.md'], ['dns', 'srv', 'queue']],
  ['run', 'Running the app', 'lila run: your app started N times behind lila, rolling restarts',
    ['docs/run.md'], ['app', 'instances', 'pm2']],
  ['balancing', 'Balancing and retries', 'the modes in full, bounded loads, retries and their budget',
    ['README.md#modes'], ['modes']],
  ['health', 'Health', 'active checks, ejection on failed traffic',
    ['docs/health.md'], []],
  ['http', 'HTTP', 'timeouts, draining keep-alive connections, sticky sessions',
    ['docs/http.md', 'docs/sticky.md'], []],
  ['headers', 'Headers', 'request IDs, headers set and removed, the Host backends get',
    ['docs/headers.md'], []],
  ['http2', 'HTTP/2 and gRPC', 'HTTP/2 from clients and to backends; gRPC',
    ['docs/http2.md'], ['grpc']],
  ['routes', 'Routes', 'a pool of its own for a host, a path, a header or cookie; canaries',
    ['docs/routes.md'], []],
  ['limits', 'Limits', 'connections overall and per client, rates, request bodies',
    ['docs/limits.md'], []],
  ['edge', 'Rules at the edge', 'who may come in, error and maintenance pages, compression',
    ['docs/edge.md'], []],
  ['tls', 'TLS', 'files, lila\'s own CA or Let\'s Encrypt; mutual TLS; TLS to backends',
    ['docs/tls.md'], ['acme', 'https']],
  ['admin', 'Watching and steering', 'status page, metrics, control API, dashboard, logs, OTLP',
    ['docs/operations.md#status-metrics-and-control', 'docs/observability.md'],
    ['status', 'metrics', 'otlp', 'opentelemetry', 'otel', 'tracing']],
  ['devtools', 'Developer tools', 'shadow traffic, its answers compared; failures rehearsed',
    ['docs/development.md', 'docs/faults.md'], ['faults']],
  ['process', 'The process', 'workers, signals, reload, graceful shutdown, lila upgrade',
    ['docs/operations.md', 'docs/workers.md'], ['upgrade', 'signals', 'reload']],
  ['fleet', 'A fleet of lilas', 'rate limits, ACME and run-time changes shared through Redis',
    ['docs/several.md'], ['redis', 'sentinel', 'cluster']],
  ['config', 'The config file and the command line', 'the JSON config file, LILA_* variables, durations, exit codes',
    ['docs/config.md'], ['environment']]
].map(([name, title, summary, docs, words]) => ({ name, title, summary, docs, words }))

module.exports = { TOPICS }
