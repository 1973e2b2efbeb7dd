'use strict'

const { TOPICS } = require('./topics')

// The one list of command-line options. It feeds util.parseArgs, `lila --help` and the
// validation in lib/config/; a test checks the README's table against it, so the three
// cannot drift. `key` is the camelCase name used in the normalised config; `type` names
// a value parser in parsers.js (`min`: the least a duration may be; 'flag': a switch
// that takes no value, off by default; 'boolean': --help and --version). `only: 'http'`
// options need --protocol http (or grpc, which is HTTP).
// `scope` says where an option may go in the JSON config file (its key is the long name):
//   'listener' (the default)  per listener, or at the top level as every listener's default
//   'own'                     per listener only (port, name)
//   'global'                  top level only: it is about the process, not a listener
//   'cli'                     the command line only (--config, --help, --version)
//   'run'                     lila run's: on the command line after lila run 'CMD', in
//                             the file in a listener's "run" object
// `group` names the topic it belongs to (topics.js, in order): its heading in `lila help all`
// and the README, and the page `lila help TOPIC` shows it on. `common`: also listed in the
// short `lila --help`, the options most people need.
// `multiple`: the option may be given more than once (a list in the config file, an
// array or one string; lines in its LILA_ variable); `bare`: the value of the option given without one
// (--access-log, --request-id; true in the config file and LILA_ variable). `route`:
// a route may set it for itself too (--route '/admin=allow=10.0.0.0/8 ...', a route's
// key in the config file): true, on top of the listener's (a rule at the edge, judged
// after the listener's); 'instead', in place of the listener's (which it has otherwise);
// 'own', the route's own, neither inherited nor added to the listener's (--canary).

// Where a bare --otlp sends when OTEL_EXPORTER_OTLP_ENDPOINT says nothing: the
// OpenTelemetry SDKs' own default (an OTLP/HTTP collector on this machine). Its help
// here, the example in `lila help admin`, the parser's error and the exporter's
// settings (otel-environment.js) all read it.
const OTLP_DEFAULT_ENDPOINT = 'http://localhost:4318'

const OPTIONS = [
  {
    name: 'port',
    short: 'p',
    arg: 'N',
    type: 'port',
    group: 'listen',
    common: true,
    default: 4444,
    scope: 'own',
    help: 'listen port; 0 takes a free port'
  },
  {
    name: 'host',
    arg: 'ADDR',
    type: 'host',
    unix: true, // unix:/path too
    group: 'listen',
    default: null,
    shown: 'all interfaces',
    help: 'listen address; unix:/path listens on a Unix socket'
  },
  {
    name: 'protocol',
    arg: 'tcp|http|grpc',
    type: 'protocol',
    group: 'listen',
    common: true,
    default: 'tcp',
    help: 'tcp pipes connections; http balances requests; grpc: http to h2 backends'
  },
  {
    name: 'connect-timeout',
    arg: 'DUR',
    type: 'duration',
    group: 'backends',
    min: 1,
    default: 3000,
    help: 'give up a backend connect after this long and try the next'
  },
  {
    name: 'idle-timeout',
    arg: 'DUR',
    type: 'duration',
    group: 'listen',
    default: 60000,
    help: 'close a connection with no traffic for this long'
  },
  {
    name: 'retries',
    arg: 'N',
    type: 'count',
    group: 'balancing',
    default: 2,
    help: 'other backends to try when one fails'
  },
  {
    name: 'retry-on',
    arg: 'LIST',
    type: 'retryList',
    group: 'balancing',
    default: Object.freeze([502, 503]),
    shown: '502,503',
    help: 'http: answers tried again elsewhere: codes, 5xx, gateway, none; ' +
      'reset: any method, or tcp\'s first 64 KiB, after a reset (it may run twice)'
  },
  {
    name: 'retry-budget',
    arg: 'PCT',
    type: 'percent',
    group: 'balancing',
    default: 20,
    shown: '20%',
    help: 'cap on retries: PCT% of the requests of 10s, plus 10; off'
  },
  {
    name: 'max-conn',
    arg: 'N',
    type: 'positive',
    group: 'limits',
    default: null,
    shown: 'half of ulimit -n',
    help: 'cap on client connections; more wait until one closes'
  },
  {
    name: 'timeout',
    arg: 'DUR',
    type: 'duration',
    group: 'http',
    default: 60000,
    only: 'http',
    help: 'http: answer 504 when a backend is silent this long'
  },
  {
    name: 'header-timeout',
    arg: 'DUR',
    type: 'duration',
    group: 'http',
    default: 10000,
    only: 'http',
    help: 'http: answer 408 when a request head takes longer'
  },
  {
    name: 'drain-grace',
    arg: 'DUR',
    type: 'duration',
    group: 'http',
    default: 1000,
    only: 'http',
    help: 'http: on a graceful stop, upgrade or reload, an idle keep-alive connection may send one more ' +
      'request this long'
  },
  {
    name: 'body-timeout',
    arg: 'DUR',
    type: 'duration',
    group: 'http',
    default: 30000,
    only: 'http',
    help: 'http: answer 408 when a request body sends nothing for this long; 0s: never'
  },
  {
    name: 'forwarded',
    type: 'flag',
    group: 'headers',
    default: false,
    shown: 'off',
    only: 'http',
    help: 'http: also send the RFC 7239 Forwarded header'
  },
  {
    name: 'backend-protocol',
    arg: 'h1|h2',
    type: 'backendProtocol',
    group: 'http2',
    default: 'h1',
    only: 'http',
    help: 'http: HTTP/1.1 or HTTP/2 to backends (h2c; h2 with --backend-tls)'
  },
  {
    name: 'sticky',
    arg: 'cookie[=NAME]',
    type: 'sticky',
    group: 'http',
    default: null,
    cookie: 'lila', // the cookie's name when none is given
    shown: 'off',
    only: 'http',
    help: 'http: a cookie (NAME: lila) keeps each client on the backend that served it'
  },
  {
    name: 'route',
    arg: 'MATCH=BACKEND...',
    type: 'route',
    group: 'routes',
    scope: 'cli', // in the config file: "routes"
    multiple: true,
    only: 'http',
    default: null,
    shown: 'none',
    help: 'a host, *.host, /path, host/path, or header:, cookie: or query:NAME[=VALUE] after them, sends its ' +
      'requests to a pool of its own: MATCH=[strip] [MODE] BACKEND...; repeatable'
  },
  {
    name: 'request-id',
    arg: '[NAME]',
    type: 'requestId',
    bare: 'X-Request-ID', // the value of a bare --request-id
    group: 'headers',
    default: null,
    shown: 'off',
    only: 'http',
    help: 'http: an ID per request in header NAME (X-Request-ID), the client\'s if valid; ' +
      'sent to the backend, returned, logged'
  },
  {
    name: 'set-header',
    arg: 'N:V', // 'Name: value'; wider would widen the whole --help table
    type: 'headerField',
    side: 'request',
    multiple: true,
    group: 'headers',
    default: Object.freeze([]),
    shown: 'none',
    only: 'http',
    help: 'http: set header N to V on requests to backends (repeatable); V may hold {client_ip}, {request_id}'
  },
  {
    name: 'del-header',
    arg: 'NAME',
    type: 'headerName',
    side: 'request',
    multiple: true,
    group: 'headers',
    default: Object.freeze([]),
    shown: 'none',
    only: 'http',
    help: 'http: remove header NAME from requests to backends (repeatable)'
  },
  {
    name: 'set-response-header',
    arg: 'N:V',
    type: 'headerField',
    side: 'response',
    multiple: true,
    group: 'headers',
    default: Object.freeze([]),
    shown: 'none',
    only: 'http',
    help: 'http: set header N to V on every response, lila\'s own 502s too (repeatable)'
  },
  {
    name: 'del-response-header',
    arg: 'NAME',
    type: 'headerName',
    side: 'response',
    multiple: true,
    group: 'headers',
    default: Object.freeze([]),
    shown: 'none',
    only: 'http',
    help: 'http: remove header NAME from every response (repeatable)'
  },
  {
    name: 'host-header',
    arg: 'backend|HOST',
    type: 'hostRule',
    group: 'headers',
    default: null,
    shown: 'the client\'s',
    only: 'http',
    help: 'http: the Host backends get: backend (the backend as given) or a fixed HOST'
  },
  {
    name: 'mirror',
    arg: 'ADDR[,percent=N]',
    type: 'mirror',
    group: 'devtools',
    default: null,
    shown: 'none',
    only: 'http',
    help: 'http: send a copy of each request (or N% of them) to a shadow backend; clients never wait for it'
  },
  {
    name: 'compare',
    type: 'flag',
    group: 'devtools',
    default: false,
    shown: 'off',
    only: 'http',
    help: 'http: with --mirror, compare each answer (status, body) with the mirror\'s; report divergences'
  },
  {
    name: 'allow',
    arg: 'CIDR,...',
    type: 'cidrList',
    multiple: true,
    route: true,
    group: 'edge',
    default: Object.freeze([]),
    shown: 'anyone',
    help: 'only clients from these networks (10.0.0.0/8, ::1); others refused; repeatable'
  },
  {
    name: 'deny',
    arg: 'CIDR,...',
    type: 'cidrList',
    multiple: true,
    route: true,
    group: 'edge',
    default: Object.freeze([]),
    shown: 'none',
    help: 'refuse clients from these networks, even if allowed; repeatable'
  },
  {
    name: 'basic-auth',
    arg: 'FILE',
    type: 'file',
    route: true,
    group: 'edge',
    default: null,
    shown: 'off',
    only: 'http',
    help: 'http: only users of this htpasswd file (bcrypt, apr1, SHA), others 401; read again on reload'
  },
  {
    name: 'basic-auth-realm',
    arg: 'NAME',
    type: 'realm',
    group: 'edge',
    default: 'lila',
    only: 'http',
    help: 'http: the realm a 401 names, which browsers show'
  },
  {
    name: 'basic-auth-pass',
    type: 'flag',
    group: 'edge',
    default: false,
    shown: 'off',
    only: 'http',
    help: 'http: pass the client\'s Authorization on to backends'
  },
  {
    name: 'compress',
    arg: '[LIST]',
    type: 'compress',
    bare: 'gzip,br', // the value of a bare --compress; the order breaks a client's ties
    group: 'edge',
    default: null,
    shown: 'off',
    only: 'http',
    help: 'http: compress responses for clients that accept it: gzip, br, or both (bare)'
  },
  {
    name: 'compress-types',
    arg: 'TYPES',
    type: 'mediaTypes',
    group: 'edge',
    default: Object.freeze([
      'text/*', 'application/json', 'application/*+json', 'application/javascript', 'application/xml',
      'application/*+xml', 'image/svg+xml', 'application/wasm', 'application/x-ndjson', 'font/ttf', 'font/otf'
    ]),
    shown: 'text/*, JSON, JS...',
    only: 'http',
    help: 'http: the content types --compress compresses: a list such as text/*,application/json'
  },
  {
    name: 'trace',
    type: 'flag',
    group: 'edge',
    default: false,
    shown: 'off',
    only: 'http',
    help: 'http: W3C traceparent: the trace ID kept, a new parent ID; a new trace where none'
  },
  // At the edge, round two: forward auth, error and maintenance pages, canaries.
  {
    name: 'forward-auth',
    arg: 'URL',
    type: 'forwardAuth',
    route: true,
    group: 'edge',
    default: null,
    shown: 'off',
    only: 'http',
    help: 'http: ask this auth service (a GET) before each request; 2xx lets it in, any other answer is the client\'s'
  },
  {
    name: 'forward-auth-copy',
    arg: 'LIST',
    type: 'headerNames',
    group: 'edge',
    default: Object.freeze([]),
    shown: 'none',
    only: 'http',
    help: 'http: headers copied from the auth service\'s 2xx to the backend request (the client\'s own removed)'
  },
  {
    name: 'forward-auth-timeout',
    arg: 'DUR',
    type: 'duration',
    min: 1,
    group: 'edge',
    default: 5000,
    only: 'http',
    help: 'http: answer 503 when the auth service has not answered in this long'
  },
  {
    name: 'forward-auth-cache',
    arg: 'DUR',
    type: 'duration',
    group: 'edge',
    default: 0,
    shown: 'off',
    only: 'http',
    help: 'http: remember the auth service\'s 2xx per Cookie and Authorization this long'
  },
  {
    name: 'error-page',
    arg: 'CODES=FILE',
    type: 'errorPage',
    multiple: true,
    route: true,
    group: 'edge',
    default: Object.freeze([]),
    shown: 'none',
    only: 'http',
    help: 'http: lila\'s own answers with these codes (502,503 or 5xx) get this file; repeatable'
  },
  {
    name: 'intercept-errors',
    type: 'flag',
    group: 'edge',
    default: false,
    shown: 'off',
    only: 'http',
    help: 'http: backends\' answers with the codes of --error-page get its file too'
  },
  {
    name: 'maintenance',
    arg: '[FILE]',
    type: 'maintenance',
    bare: 'on', // the value of a bare --maintenance: on, with the 503 page of --error-page (or lila's)
    route: true,
    group: 'edge',
    default: null,
    shown: 'off',
    only: 'http',
    help: 'http: answer every request 503 with this page (or the 503 --error-page); POST /maintenance too'
  },
  {
    name: 'maintenance-allow',
    arg: 'LIST',
    type: 'cidrList',
    multiple: true,
    group: 'edge',
    default: Object.freeze([]),
    shown: 'none',
    only: 'http',
    help: 'http: clients from these networks (10.0.0.0/8,::1) are served during maintenance; repeatable'
  },
  {
    name: 'canary',
    arg: 'BACKENDS PCT%',
    type: 'canary',
    route: 'own',
    group: 'routes',
    default: null,
    shown: 'none',
    only: 'http',
    help: 'http: PCT% of new clients go to these backends, kept there by a cookie: \':3100 :3101 10%\''
  },
  {
    name: 'canary-cookie',
    arg: 'NAME',
    type: 'cookieName',
    group: 'routes',
    default: 'lila-canary',
    only: 'http',
    help: 'http: the cookie that keeps a client on its side of --canary (always, never: forced)'
  },
  {
    name: 'canary-header',
    arg: 'NAME',
    type: 'headerToken',
    group: 'routes',
    default: 'X-Lila-Canary',
    only: 'http',
    help: 'http: a request header that forces a side of --canary: always or never'
  },
  {
    name: 'check',
    group: 'health',
    common: true,
    arg: 'SPEC',
    type: 'check',
    default: Object.freeze({ type: 'tcp' }),
    shown: 'tcp',
    help: 'active health check: tcp | http:/path | grpc[:service] | none'
  },
  {
    name: 'check-host',
    arg: 'HOST',
    type: 'hostHeader',
    group: 'health',
    default: null,
    shown: 'the backend as given',
    help: 'http check: the Host header to send'
  },
  {
    name: 'check-interval',
    arg: 'DUR',
    type: 'duration',
    group: 'health',
    min: 1,
    default: 2000,
    help: 'time between two probes of a backend'
  },
  {
    name: 'rise',
    arg: 'N',
    type: 'threshold',
    group: 'health',
    default: 2,
    help: 'probes passed in a row that bring a backend back'
  },
  {
    name: 'fall',
    arg: 'N',
    type: 'threshold',
    group: 'health',
    default: 3,
    help: 'probes failed in a row that take a backend out'
  },
  {
    name: 'eject-after',
    arg: 'N',
    type: 'count',
    group: 'health',
    default: 5,
    help: 'failures of real traffic in a row that take a backend out; 0: never'
  },
  {
    name: 'eject-on',
    arg: 'LIST',
    type: 'statusList',
    group: 'health',
    default: Object.freeze([502, 503, 504]),
    shown: 'gateway',
    only: 'http',
    help: 'http: answers that count as failures: codes, 5xx, gateway, none'
  },
  {
    name: 'rate-limit',
    arg: 'N/s[,burst=M]',
    type: 'rate',
    group: 'limits',
    default: null,
    shown: 'none',
    help: 'per client address: http requests (else 429), tcp connections (else closed)'
  },
  {
    name: 'max-conn-per-client',
    arg: 'N',
    type: 'positive',
    group: 'limits',
    default: null,
    shown: 'none',
    help: 'connections one client address may hold; more: 429 (http) or closed (tcp)'
  },
  {
    name: 'max-body-size',
    arg: 'SIZE',
    type: 'size',
    route: 'instead',
    group: 'limits',
    default: null,
    shown: 'none',
    only: 'http',
    help: 'http: answer 413 to a request body over this many bytes (k, m, g: KiB, MiB, GiB)'
  },
  {
    name: 'queue-timeout',
    arg: 'DUR',
    type: 'duration',
    group: 'backends',
    default: 5000,
    help: 'how long a connection or request waits for a backend at its max-conn; 0: no queue'
  },
  {
    name: 'resolve-interval',
    arg: 'DUR',
    type: 'duration',
    group: 'backends',
    default: 30000,
    help: 'how often backend names are resolved again; 0: only at start'
  },
  {
    name: 'dns-server',
    arg: 'ADDR[:PORT]',
    type: 'dnsServer',
    group: 'backends',
    default: null,
    shown: 'system resolver',
    help: 'resolve backend names with this DNS server'
  },
  {
    name: 'hash-balance-factor',
    arg: 'F',
    type: 'factor',
    group: 'balancing',
    default: null,
    shown: 'off',
    help: 'hash modes: cap each backend at F times the average load, e.g. 1.25'
  },
  {
    name: 'name',
    arg: 'NAME',
    type: 'name',
    group: 'listen',
    default: null,
    shown: 'protocol:port',
    scope: 'own',
    help: 'the listener\'s name in logs and statistics'
  },
  {
    name: 'tls-cert',
    arg: 'FILE',
    type: 'file',
    group: 'tls',
    common: true,
    default: null,
    shown: 'none',
    help: 'serve TLS with this chain (PEM)'
  },
  {
    name: 'tls-key',
    arg: 'FILE',
    type: 'file',
    group: 'tls',
    common: true,
    default: null,
    shown: 'none',
    help: 'the key of --tls-cert (PEM)'
  },
  {
    name: 'tls',
    arg: '[local|acme]',
    type: 'tlsSource',
    bare: 'local', // the value of a bare --tls
    group: 'tls',
    common: true,
    default: null,
    shown: 'off',
    help: 'certificates lila gets itself: local (its own CA) or acme (Let\'s Encrypt)'
  },
  {
    name: 'tls-names',
    arg: 'LIST',
    type: 'tlsNames',
    group: 'tls',
    default: null,
    local: Object.freeze(['localhost', '127.0.0.1', '::1']), // --tls local's names when none are given
    shown: 'localhost,loopback', // localhost, 127.0.0.1, ::1
    help: 'with --tls: names and IPs to certify, comma-separated (required for acme)'
  },
  {
    name: 'tls-client-ca',
    arg: 'FILE',
    type: 'file',
    group: 'tls',
    default: null,
    shown: 'none',
    help: 'mutual TLS: only clients with a certificate these CAs (PEM) signed'
  },
  {
    name: 'tls-client-optional',
    type: 'flag',
    group: 'tls',
    default: false,
    shown: 'off',
    help: 'with --tls-client-ca: let the other clients in too, marked'
  },
  {
    name: 'redirect-http',
    arg: 'PORT',
    type: 'port',
    group: 'tls',
    default: null,
    shown: 'off',
    help: 'plain HTTP on PORT: ACME HTTP-01 challenges, and a 308 to https'
  },
  {
    name: 'acme-email',
    arg: 'ADDR',
    type: 'email',
    group: 'tls',
    default: null,
    shown: 'none',
    scope: 'global',
    help: 'with --tls acme: the account\'s contact address'
  },
  {
    name: 'acme-directory',
    arg: 'URL',
    type: 'httpsUrl',
    group: 'tls',
    default: 'https://acme-v02.api.letsencrypt.org/directory',
    shown: 'Let\'s Encrypt',
    scope: 'global',
    help: 'with --tls acme: the ACME server\'s directory URL'
  },
  {
    name: 'acme-staging',
    type: 'flag',
    group: 'tls',
    default: false,
    directory: 'https://acme-staging-v02.api.letsencrypt.org/directory', // what it stands for
    shown: 'off',
    scope: 'global',
    help: 'with --tls acme: Let\'s Encrypt\'s staging server'
  },
  {
    name: 'acme-ca',
    arg: 'FILE',
    type: 'file',
    group: 'tls',
    default: null,
    shown: 'system CAs',
    scope: 'global',
    help: 'with --tls acme: also trust these CAs (PEM) for the ACME server'
  },
  {
    name: 'state-dir',
    arg: 'DIR',
    type: 'file',
    group: 'tls',
    default: null,
    shown: '~/.local/share/lila',
    scope: 'global',
    help: 'with --tls: where lila keeps its CA, account, certificates, keys'
  },
  {
    name: 'backend-tls',
    type: 'flag',
    group: 'tls',
    default: false,
    shown: 'off',
    help: 'speak TLS to backends, verifying their certificates'
  },
  {
    name: 'backend-tls-ca',
    arg: 'FILE',
    type: 'file',
    group: 'tls',
    default: null,
    shown: 'system CAs',
    help: 'with --backend-tls: trust these CA certificates (PEM)'
  },
  {
    name: 'backend-tls-insecure',
    type: 'flag',
    group: 'tls',
    default: false,
    shown: 'off',
    help: 'with --backend-tls: do not verify backend certificates'
  },
  {
    name: 'proxy-protocol',
    arg: 'v1|v2',
    type: 'proxyProtocol',
    group: 'listen',
    default: null,
    shown: 'off',
    only: 'tcp',
    help: 'tcp: send the client address to backends in a PROXY protocol header'
  },
  {
    name: 'accept-proxy',
    type: 'flag',
    group: 'listen',
    default: false,
    shown: 'off',
    help: 'read the client address from a PROXY protocol header (v1 or v2)'
  },
  {
    name: 'workers',
    arg: 'N|auto',
    type: 'workers',
    group: 'process',
    common: true,
    default: 1,
    scope: 'global',
    help: 'worker processes; auto: one per core'
  },
  {
    name: 'config',
    arg: 'FILE',
    type: 'file',
    group: 'config',
    scope: 'cli',
    help: 'run the listeners of a JSON config file; SIGHUP reloads it'
  },
  {
    name: 'shutdown-timeout',
    arg: 'DUR',
    type: 'duration',
    group: 'process',
    default: 30000,
    scope: 'global',
    help: 'on SIGTERM/SIGINT, let open connections finish this long'
  },
  {
    name: 'pid-file',
    arg: 'FILE',
    type: 'file',
    group: 'process',
    default: null,
    shown: 'none',
    scope: 'global',
    help: 'write the process ID to FILE once listening (for lila upgrade, lila restart-app and systemd\'s ' +
      'PIDFile=); removed at exit'
  },
  {
    name: 'exec',
    arg: 'PATH',
    type: 'file',
    group: 'process',
    scope: 'cli',
    help: 'lila upgrade: the executable the new lila runs, rather than the one at the running lila\'s own path'
  },
  {
    name: 'log-level',
    arg: 'L',
    type: 'logLevel',
    group: 'admin',
    default: 'info',
    scope: 'global',
    help: 'error | warn | info | debug'
  },
  {
    name: 'access-log',
    arg: '[FORMAT]',
    type: 'accessLog',
    bare: 'text',
    group: 'admin',
    common: true,
    default: null,
    shown: 'off',
    scope: 'global',
    help: 'a line per connection (tcp) or request (http) on stdout: text, json or combined'
  },
  {
    name: 'otlp',
    arg: '[URL]',
    type: 'otlpUrl',
    bare: 'env', // OTEL_EXPORTER_OTLP_ENDPOINT (and the rest of OTEL_*), else OTLP_DEFAULT_ENDPOINT
    group: 'admin',
    default: null,
    shown: 'off',
    scope: 'global',
    help: 'OpenTelemetry: a span per request and per attempt, and the metrics, to an OTLP/HTTP collector ' +
      `(bare: OTEL_EXPORTER_OTLP_ENDPOINT, else ${OTLP_DEFAULT_ENDPOINT})`
  },
  {
    name: 'otlp-interval',
    arg: 'DUR',
    type: 'duration',
    min: 1000,
    group: 'admin',
    default: 15000,
    scope: 'global',
    help: '--otlp: push the metrics of /metrics this often'
  },
  {
    name: 'trace-sample',
    arg: 'RATIO',
    type: 'ratio',
    group: 'admin',
    default: 1,
    shown: 'all',
    scope: 'global',
    help: '--otlp: the share of requests without a sampling decision that are traced, 0 to 1 ' +
      '(a client\'s traceparent decides for its own)'
  },
  {
    name: 'status-port',
    arg: 'N',
    type: 'port',
    group: 'admin',
    common: true,
    default: null,
    shown: 'off',
    scope: 'global',
    help: 'admin listener: /status, /status.json, /metrics, control'
  },
  {
    name: 'status-host',
    arg: 'ADDR',
    type: 'host',
    group: 'admin',
    default: '127.0.0.1',
    scope: 'global',
    help: 'address of the admin listener'
  },
  {
    name: 'status-token',
    arg: 'TOKEN',
    type: 'token',
    group: 'admin',
    default: null,
    shown: 'none',
    scope: 'global',
    help: 'changes through the admin listener need this bearer token'
  },
  {
    name: 'status-basic-auth',
    arg: 'FILE',
    type: 'file',
    group: 'admin',
    default: null,
    shown: 'off',
    scope: 'global',
    help: 'the admin listener only to users of this htpasswd file; read again on reload'
  },
  {
    name: 'dashboard',
    type: 'flag',
    group: 'admin',
    default: false,
    shown: 'off',
    scope: 'global',
    help: 'a live view of the backends on the terminal; keys drain, enable, reweight'
  },
  {
    name: 'fault',
    arg: 'ADDR,FAULT',
    type: 'fault',
    multiple: true, // once per backend
    group: 'devtools',
    default: Object.freeze([]),
    shown: 'none',
    scope: 'own',
    help: 'rehearse a failure from the start: ADDR,error=503 (or delay=2s, reset), [rate=R], [for=60s]; repeatable'
  },
  // --- lila run 'CMD' (app/): in the config file, a listener's "run" object ---
  {
    name: 'instances',
    short: 'i',
    arg: 'N|auto',
    type: 'instances',
    group: 'run',
    default: 2,
    scope: 'run',
    help: 'instances of the app to run; auto: one per core'
  },
  {
    name: 'app-ports',
    arg: 'FIRST-LAST',
    type: 'portRange',
    group: 'run',
    default: null,
    shown: 'free ports',
    scope: 'run',
    help: 'the ports instances get in PORT; leave room for a replacement (--surge) and an upgrade'
  },
  {
    name: 'app-cwd',
    arg: 'DIR',
    type: 'file',
    group: 'run',
    default: null,
    shown: 'lila\'s own',
    scope: 'run',
    help: 'the folder the app runs in'
  },
  {
    name: 'app-env',
    arg: 'NAME=VALUE',
    type: 'appEnv',
    multiple: true,
    group: 'run',
    default: Object.freeze([]),
    shown: 'none',
    scope: 'run',
    help: 'a variable for the app, beside lila\'s own environment, PORT and LILA_INSTANCE; repeatable'
  },
  {
    name: 'ready-timeout',
    arg: 'DUR',
    type: 'duration',
    min: 1,
    group: 'run',
    default: 30000,
    scope: 'run',
    help: 'a new instance must listen (or pass --check) within this long'
  },
  {
    name: 'stop-timeout',
    arg: 'DUR',
    type: 'duration',
    min: 1,
    group: 'run',
    default: 10000,
    scope: 'run',
    help: 'an instance leaving: its requests finish within this long, then the stop signal; SIGKILL this long after'
  },
  {
    name: 'stop-signal',
    arg: 'SIG',
    type: 'signal',
    group: 'run',
    default: 'SIGTERM',
    scope: 'run',
    help: 'what an instance\'s process group is sent to stop'
  },
  {
    name: 'surge',
    arg: 'N',
    type: 'positive',
    group: 'run',
    default: 1,
    scope: 'run',
    help: 'a rolling restart starts this many new instances at once'
  },
  {
    name: 'watch',
    arg: 'PATH',
    type: 'file',
    multiple: true,
    group: 'run',
    default: Object.freeze([]),
    shown: 'none',
    scope: 'run',
    help: 'a rolling restart when a file under PATH changes (not node_modules, .git); repeatable'
  },
  {
    name: 'max-rss',
    arg: 'SIZE',
    type: 'size',
    group: 'run',
    default: null,
    shown: 'none',
    scope: 'run',
    help: 'an instance using more memory is replaced through a rolling restart, e.g. 500m'
  },
  {
    name: 'max-age',
    arg: 'DUR',
    type: 'duration',
    min: 1000,
    group: 'run',
    default: null,
    shown: 'none',
    scope: 'run',
    help: 'an instance running longer is replaced through a rolling restart, e.g. 24h'
  },
  {
    name: 'exit-on-crash-loop',
    type: 'flag',
    group: 'run',
    default: false,
    shown: 'off',
    scope: 'run',
    help: 'exit 1 when every instance is crash-looping, rather than keep trying'
  },
  {
    name: 'app-log-format',
    arg: 'text|json',
    type: 'appLogFormat',
    group: 'run',
    default: 'text',
    scope: 'run',
    help: 'the app\'s lines on lila\'s stdout and stderr: led by "app.N | ", or as JSON lines'
  },
  // --- end of lila run's options ---
  // A fleet (lib/fleet/): what several lilas share through Redis.
  {
    name: 'fleet',
    arg: 'URL',
    type: 'fleetUrl',
    group: 'fleet',
    default: null,
    shown: 'alone',
    scope: 'global',
    help: 'share rate limits, certificates and run-time changes with the lilas on this Redis: ' +
      'redis://[USER:PASS@]HOST[:PORT][/DB], rediss://..., redis-sentinel://HOST:PORT,.../MASTER'
  },
  {
    name: 'fleet-name',
    arg: 'NAME',
    type: 'name',
    group: 'fleet',
    default: null,
    shown: 'default',
    scope: 'global',
    help: 'with --fleet: the fleet\'s name, its keys\' prefix in Redis (several fleets on one Redis)'
  },
  {
    name: 'fleet-ca',
    arg: 'FILE',
    type: 'file',
    group: 'fleet',
    default: null,
    shown: 'system CAs',
    scope: 'global',
    help: 'with a rediss:// --fleet: trust these CAs (PEM) for Redis'
  },
  {
    name: 'fleet-key',
    arg: 'FILE',
    type: 'file',
    group: 'fleet',
    default: null,
    shown: 'none',
    scope: 'global',
    help: 'with --fleet and --tls acme: seal the keys kept in Redis with this secret (the same file on every lila)'
  },
  {
    name: 'help',
    short: 'h',
    type: 'boolean',
    group: 'config',
    scope: 'cli',
    help: 'show this help'
  },
  {
    name: 'version',
    short: 'v',
    type: 'boolean',
    group: 'config',
    scope: 'cli',
    help: 'show the version'
  }
]

for (const option of OPTIONS) {
  option.key = option.name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())
  option.flag = `--${option.name}`
  option.scope ||= 'listener'
}

const BY_NAME = new Map(OPTIONS.map(o => [o.name, o]))
// The help topics (topics.js), each with its options in the table's order.
const GROUPS = TOPICS.map(topic => ({ ...topic, options: OPTIONS.filter(o => o.group === topic.name) }))
// The options of a listener (everything but the process-wide and command-line ones).
const LISTENER_OPTIONS = OPTIONS.filter(o => o.scope === 'listener' || o.scope === 'own')
const GLOBAL_OPTIONS = OPTIONS.filter(o => o.scope === 'global')
// lila run's options: in the config file, the keys of a listener's "run" object.
const RUN_OPTIONS = OPTIONS.filter(o => o.scope === 'run')

// The shape util.parseArgs wants. Every valued option is parsed as a string here and
// validated by parsers.js, so error messages stay ours.
function parseArgsOptions () {
  const spec = {}
  for (const o of OPTIONS) {
    spec[o.name] = { type: o.type === 'boolean' || o.type === 'flag' ? 'boolean' : 'string' }
    if (o.multiple) spec[o.name].multiple = true
    if (o.short) spec[o.name].short = o.short
  }
  return spec
}

module.exports = {
  OPTIONS, GROUPS, BY_NAME, LISTENER_OPTIONS, GLOBAL_OPTIONS, RUN_OPTIONS, OTLP_DEFAULT_ENDPOINT, parseArgsOptions
}
