'use strict'

// lila's help, from the OPTIONS table: `lila --help` (usage, modes, the options most
// people need, the topics), `lila help TOPIC` (a topic's words and every option it
// holds) and `lila help all` (every topic), as `git help` and `caddy help` do. Each
// option is in one topic, its group; the short page lists the `common` ones again.

const { OPTIONS, GROUPS, OTLP_DEFAULT_ENDPOINT } = require('../config/options')
const { MODES, modeWord } = require('../upstream/balancers')
const { BACKEND_SYNTAX } = require('../config/backend-spec')
const { didYouMean } = require('../config/suggest')
const { formatDuration } = require('../format')
const { UsageError } = require('../errors')
const { helpWidth, wrap, paragraph, textColumn, table, command, NBSP } = require('./layout')
const VERSION = require('../version')

const DOCS_URL = 'https://github.com/lila-lb/lila'

// What a topic says before its options: paragraphs, or { rows } for a table.
const ABOUT = {
  listen: [
    'lila listens on one port of one address (--port, --host), or on a Unix socket. --protocol tcp pipes ' +
      'each connection to a backend; http balances each request, HTTP/1.1 and HTTP/2 on the same port; ' +
      'grpc is http with HTTP/2 to backends and lila\'s own errors as gRPC statuses.',
    'The PROXY protocol carries a client\'s address through proxies: --accept-proxy reads it from the ' +
      'clients, --proxy-protocol sends it to tcp backends.'
  ],
  backends: [
    BACKEND_SYNTAX,
    'host is a name, IPv4 or [IPv6]; ":8080" means 127.0.0.1:8080. Every address a name resolves to is a ' +
      'backend, resolved again every --resolve-interval. unix:/path is a Unix socket. _service._proto.name, ' +
      'without a port, is found through SRV records: a backend per target and port, weighted by the ' +
      'records, lower priorities as backups. host:3000-3009 watches a port range: each port that listens ' +
      'is a backend (found by --check-interval probes), at most 1024 ports. weight=N from 0 to 1000 ' +
      '(default 1); max-conn=N caps its connections (more wait in a queue); slow-start=DUR ramps its ' +
      'weight up when it comes back; backup backends take traffic only when no other backend can.'
  ],
  balancing: [
    { rows: () => modeRows() },
    'Without a mode, random (the power of two choices). Weights apply to every mode, and every mode ' +
      'skips backends that are down or at their max-conn. The hash modes agree across processes and ' +
      'machines for the same backends.',
    'A connection or request that failed before any byte reached a backend is tried on another; an ' +
      'idempotent http request answered with a --retry-on status too, within the --retry-budget.',
    'With reset in --retry-on (--retry-on 502,503,reset), a request of any method, a POST or a gRPC ' +
      'call, is sent to another backend when its backend closed or reset before any answer reached ' +
      'the client: one the first backend had acted on then runs twice. Use it where that does no harm.'
  ],
  health: [
    'At start-up lila checks every backend once and prints what it found. Then each backend is probed ' +
      'every --check-interval: --fall failed probes in a row take it out, --rise passed ones bring it ' +
      'back. Real traffic counts too: --eject-after failures in a row take a backend out, and a request ' +
      'that fails on every backend blames none.'
  ],
  http: [
    'With --protocol http each request is balanced on its own, over keep-alive connections to the ' +
      'backends. Hop-by-hop headers are dropped; X-Forwarded-For, -Proto, -Host and Via are set; ' +
      'WebSocket and other upgrades are piped. Hashing a header or a cookie (lila help modes) is the ' +
      'other way to keep a client on one backend.'
  ],
  headers: [
    'What lila changes in the heads it passes on, besides X-Forwarded-* and Via (lila help http).'
  ],
  http2: [
    'An http listener speaks HTTP/2 to the clients that ask for it: by prior knowledge in the clear ' +
      '(h2c), by ALPN over TLS; each stream is balanced as a request. To backends lila speaks HTTP/1.1, ' +
      'or HTTP/2 with --backend-protocol h2 (h2c; h2 with --backend-tls).',
    '--protocol grpc is http with HTTP/2 to backends; lila\'s own errors are gRPC statuses. ' +
      '--check grpc[:service] asks each backend\'s gRPC health service.'
  ],
  routes: [
    '--route \'MATCH=[MODE] BACKEND...\' (http, repeatable) sends the requests MATCH takes to a pool of ' +
      'their own: a host (api.example.com), a wildcard host (*.example.com), a path prefix (/static) or ' +
      'both (api.example.com/v1). The most specific match wins; the other requests go to the backends ' +
      'given before the options. Before the mode, a route may take strip (its prefix taken off), allow=, ' +
      'deny=, basic-auth=, forward-auth=, error-page= and maintenance= of its own (lila help edge), ' +
      'max-body-size= in place of the listener\'s, and canary= (10%,BACKEND...) beside its pool.',
    'A match may end in a condition: header:NAME[=VALUE], cookie:NAME[=VALUE] or query:NAME[=VALUE], ' +
      'alone or after a host or path and a space; such a route goes before the one of the same host and ' +
      'path without it. --canary sends a share of new clients to other backends and keeps each on its ' +
      'side with a cookie; POST /canary?share=PCT changes the share at run time.'
  ],
  limits: [
    'Per client address, over --rate-limit or --max-conn-per-client, an http client is answered 429 ' +
      'with Retry-After, a tcp connection is closed. A request body over --max-body-size is answered 413; ' +
      'a route may have its own.'
  ],
  edge: [
    'Rules judged before a request or connection reaches a backend, and the compression of what comes ' +
      'back. A route may have allow, deny, basic-auth and forward-auth of its own (lila help routes).',
    '--forward-auth asks an auth service (a GET with the client\'s headers, never its body) before each ' +
      'request: a 2xx lets it in, any other answer goes back to the client as it came (a 302 to a login ' +
      'page), and a service down or slow is a 503. --error-page puts your page on lila\'s own answers, ' +
      '{{request_id}} and {{trace_id}} filled in. --maintenance, or POST /maintenance on the admin ' +
      'listener, answers every request 503 with a page but for --maintenance-allow.'
  ],
  tls: [
    'TLS from certificate files (--tls-cert, --tls-key; several, chosen by SNI, in a config file), from ' +
      'lila\'s own local CA (--tls, which says how to trust it), or from Let\'s Encrypt or another ACME ' +
      'server (--tls acme --tls-names NAMES), renewed by lila; what lila makes is kept in --state-dir.'
  ],
  admin: [
    '--status-port serves /status (a page), /status.json, /metrics (Prometheus) and a control API: ' +
      'drain, enable, reweight, add or remove a backend, inject a fault. Log lines go to stderr, the ' +
      'access log to stdout.',
    '--otlp sends OpenTelemetry: each request a SERVER span (under the client\'s traceparent), each ' +
      'attempt at a backend a CLIENT span whose traceparent the backend gets, and the metrics of /metrics ' +
      'every --otlp-interval, over OTLP/HTTP to a collector (Jaeger, Tempo, the OTel Collector). ' +
      'OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _PROTOCOL, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES ' +
      'are read as the SDKs read them.'
  ],
  devtools: [
    'A port range (host:3000-3009, lila help backends) follows dev servers as they start and stop. ' +
      '--mirror sends a copy of the traffic to a new version, and --compare compares its answers with ' +
      'the primary\'s. --fault rehearses a failure from the start; POST /backends/ADDR/fault on the ' +
      'admin listener (or f in the dashboard) does it at run time.'
  ],
  process: [
    { rows: () => SIGNALS },
    'lila upgrade PID (or --pid-file FILE) has a running lila hand its listening sockets to a new one, ' +
      'which refuses nothing in between. Sockets from systemd (LISTEN_FDS) are served as they are.'
  ],
  run: [
    'lila run \'CMD\' starts the app\'s command --instances times, each from a shell in a process group of ' +
      'its own, with PORT (a port of its own) and LILA_INSTANCE (1 to N) in its environment: the app ' +
      'listens on PORT itself, in any language. An instance is a backend once its port accepts (or ' +
      '--check passes); lila listens once one is ready. Its lines reach lila\'s stdout and stderr whole, ' +
      'led by "app.N | ".',
    'A rolling restart (SIGHUP, lila restart-app PID, POST /app/restart, --watch, --max-rss, --max-age) ' +
      'starts a new instance, waits until it is ready, then drains the one it replaces and stops its ' +
      'process group (SIGKILL after --stop-timeout): no request is lost, and a new version that fails ' +
      'stops the roll; lila restart-app waits for it and says how it went. An ' +
      'instance that exits is started again after 100ms, doubling to 30s; a crash loop is said once. ' +
      'When lila ends, even by kill -9, so do the instances.'
  ],
  fleet: [
    'Several lilas with one --fleet URL act as one through Redis: --rate-limit and --max-conn-per-client ' +
      'count per client for the whole fleet, a change through one lila\'s control API (drain, weight, ' +
      'add, a fault...) is made on all, and each lila is listed on the others\' status pages. Redis is ' +
      'never in a request\'s way: while it is down or slow, each lila goes on alone and says so once.'
  ],
  config: [
    'lila --config lila.json runs the listeners of a JSON file (comments allowed): each option is a key ' +
      'without its dashes, at the top for every listener or in one. SIGHUP reads it again. Each option ' +
      'can also be set as LILA_<NAME> (LILA_LOG_LEVEL=debug): a flag wins over it, and it over the file.',
    'Durations need a unit: 500ms, 2s, 1m, 1h.',
    'Exit codes: 0 done, 1 runtime failure (e.g. the port is taken), 2 usage error.'
  ]
}

const SIGNALS = [
  ['SIGTERM, SIGINT', 'stop accepting; open connections finish within --shutdown-timeout; a second one cuts them'],
  ['SIGHUP', 'with --config: read the file again and apply what changed; under lila run, then a rolling restart'],
  ['SIGUSR2', 'a new lila takes over the listening sockets (what lila upgrade sends; lila restart-app sends it ' +
    'with a request file instead)']
]

// Commands a newcomer can paste, each with what it shows and its topic; a test parses
// every one.
const EXAMPLES = [
  ['admin', 'spans and metrics to the OpenTelemetry collector OTEL_EXPORTER_OTLP_ENDPOINT names (else ' +
    `${OTLP_DEFAULT_ENDPOINT}); a tenth of the new traces`,
  'lila rr :3000 :3001 --protocol http --otlp --trace-sample 0.1'],
  ['health', 'HTTP requests in turns; each backend checked with GET /health every 2s',
    'lila rr app1:8080 app2:8080 --protocol http --check http:/health'],
  ['backends', 'local ports, one weighted 3, a backup; a status page on 127.0.0.1:9000',
    'lila lc :9001 :9002,weight=3 :9003,backup --status-port 9000'],
  ['devtools', 'development: every dev server listening on ports 3000 to 3009, as they start and stop',
    'lila rr :3000-3009 --protocol http'],
  ['routes', 'the requests for api.localhost to a pool of their own, the rest to :8081',
    'lila :8081 --protocol http --route \'api.localhost=:9001 :9002\''],
  ['edge', 'an auth service asked before each request: its 2xx lets it in, its 302 is the client\'s',
    'lila :3000 --protocol http --forward-auth http://127.0.0.1:9091/verify'],
  ['routes', '10% of new clients to the new version on :3100, each kept on its side by a cookie',
    'lila :3000 --protocol http --canary \':3100 10%\''],
  ['tls', 'TLS terminated on port 443',
    'lila app1:8080 app2:8080 -p 443 --tls-cert cert.pem --tls-key key.pem'],
  ['tls', 'https://localhost for your dev servers, with lila\'s own CA (it says how to trust it)',
    'lila rr :3000 :3001 --protocol http --tls'],
  ['tls', 'HTTPS on 443 with a certificate lila gets from Let\'s Encrypt and renews itself',
    'lila app:8080 --protocol http -p 443 --tls acme --tls-names example.com'],
  ['run', 'your app three times on port 3000, each instance on a PORT of its own; SIGHUP restarts them in turn',
    'lila run \'node server.js\' -i 3 -p 3000 --protocol http'],
  ['run', 'any language; a rolling restart when a file under src changes',
    'lila run \'python3 -m http.server $PORT\' -i 2 -p 8000 --watch src'],
  ['process', 'one worker process per core, all on port 80',
    'lila app1:8080 app2:8080 -p 80 --workers auto'],
  ['fleet', 'on each lila of a fleet: rate limits and run-time changes shared through Redis',
    'lila :8080 --protocol http --rate-limit 20/s --fleet redis://10.0.0.5'],
  ['config', 'several listeners from a file; SIGHUP reloads it',
    'lila --config /etc/lila/lila.json']
]

function formatDefault (option) {
  if (option.shown) return option.shown
  if (option.type === 'duration') return formatDuration(option.default)
  return String(option.default)
}

// "-p, --port N" / "    --host ADDR": the left column of the options table.
function optionSignature (option) {
  const short = option.short ? `-${option.short}, ` : '    '
  return `${short}--${option.name}${option.arg ? ` ${option.arg}` : ''}`
}

// An option's description with its default; the default kept whole when it fits a line.
function describe (option, textWidth) {
  if (option.default === undefined) return option.help
  const shown = `(default ${formatDefault(option)})`
  return `${option.help} ${shown.length <= textWidth ? shown.replaceAll(' ', NBSP) : shown}`
}

function modeRows () {
  return MODES.map(m => [[modeWord(m), ...m.aliases].join(', '), m.help])
}

// Options as a table; `leftWidth` shared by every table of a page, so that they line up.
function optionRows (options, width, leftWidth) {
  const textWidth = textColumn(width, leftWidth).width
  return table(options.map(o => [optionSignature(o), describe(o, textWidth)]), width, leftWidth)
}

function examples (list, width) {
  return list.flatMap(([, what, example], i) => [
    ...(i > 0 ? [''] : []),
    ...wrap(what, width - 4).map(l => `  # ${l}`),
    ...command(example, width)
  ])
}

function title (width) {
  return paragraph(`lila ${VERSION}: a load balancer in one file`, width)
}

function usage (width) {
  return [
    'Usage:',
    ...table([
      ['lila [mode] <backend>... [options]'],
      ['lila --config lila.json', 'listeners from a JSON file; SIGHUP reloads it'],
      ['lila run \'CMD\' [options]', 'your app, N instances behind lila: lila help run'],
      ['lila demo [mode] [options]', 'three local demo backends behind lila'],
      ['lila upgrade|restart-app PID', 'a new lila takes over, or lila run\'s app rolls'],
      ['lila help [TOPIC|all]', 'a topic below; all: every option; lila version'],
      ['lila completion bash|zsh', 'tab completion: source <(lila completion bash)']
    ], width)
  ]
}

// `lila --help`: what a newcomer needs, and where the rest is.
function helpText (columns) {
  const width = helpWidth(columns)
  const common = OPTIONS.filter(o => o.common)
  const leftWidth = Math.max(...common.map(o => optionSignature(o).length)) + 2
  return [
    ...title(width),
    '',
    ...usage(width),
    '',
    'Modes:',
    ...table(modeRows(), width),
    '',
    ...paragraph(`Backend: ${BACKEND_SYNTAX}`, width),
    ...paragraph('":8080" is 127.0.0.1:8080; names, unix:, port ranges, SRV: lila help backends.',
      width, '  '),
    '',
    'Options:',
    ...optionRows(common, width, leftWidth),
    '',
    ...paragraph('Topics (lila help TOPIC shows one, lila help all every one):', width),
    ...table(GROUPS.map(g => [g.name, g.summary]), width),
    '',
    ...paragraph(`Durations need a unit: 500ms, 2s, 1m. More: ${DOCS_URL}`, width),
    ''
  ].join('\n')
}

// One topic's page: its title and summary, what it says, its options, its examples.
function topicLines (group, width, leftWidth) {
  const about = ABOUT[group.name].flatMap(block => [
    '',
    ...(typeof block === 'string' ? paragraph(block, width, '  ') : table(block.rows(), width))
  ])
  const shown = EXAMPLES.filter(([topic]) => topic === group.name)
  return [
    ...paragraph(`${group.title} (lila help ${group.name}): ${group.summary}`, width),
    ...about,
    ...(group.options.length > 0 ? ['', ...optionRows(group.options, width, leftWidth)] : []),
    ...(shown.length > 0 ? ['', ...examples(shown, width)] : []),
    '',
    ...paragraph(`More: ${group.docs.join(', ')}`, width, '  ')
  ]
}

// `lila help TOPIC`: a topic (or what leads to one: an option, a mode), or `all`.
function topicText (word, columns) {
  const width = helpWidth(columns)
  const found = findTopic(word)
  // One left column for every topic of `all`, so that they line up.
  const groups = found === 'all' ? GROUPS : [found]
  const leftWidth = Math.max(...groups.flatMap(g => g.options).map(o => optionSignature(o).length)) + 2
  const pages = groups.flatMap(group => ['', ...topicLines(group, width, leftWidth)])
  return [...title(width), ...(found === 'all' ? ['', ...usage(width)] : []), ...pages, ''].join('\n')
}

// The words `lila help WORD` takes, each to its topic: the topics' names, their words,
// the options' names (with or without dashes; -p too) and the modes'.
function topicWords () {
  const words = new Map([['all', 'all']])
  const add = (word, group) => { if (!words.has(word)) words.set(word, group) }
  for (const group of GROUPS) add(group.name, group)
  for (const group of GROUPS) for (const word of group.words) add(word, group)
  const byName = new Map(GROUPS.map(g => [g.name, g]))
  for (const option of OPTIONS) add(option.name, byName.get(option.group))
  for (const option of OPTIONS.filter(o => o.short)) add(`-${option.short}`, byName.get(option.group))
  for (const mode of MODES) for (const word of [mode.name, ...mode.aliases]) add(word, byName.get('balancing'))
  return words
}

function findTopic (word) {
  const words = topicWords()
  const found = words.get(/^-\w$/.test(word) ? word : word.replace(/^--?/, '').toLowerCase())
  if (found !== undefined) return found
  const expected = didYouMean(word, [...words.keys()]) ||
    `expected one of ${GROUPS.map(g => g.name).join(', ')}, all, or an option's name`
  throw new UsageError(`unknown help topic ${JSON.stringify(word)}: ${expected}`)
}

module.exports = { helpText, topicText, findTopic, topicWords, helpWidth, formatDefault, optionSignature, EXAMPLES }
