'use strict'

// The JSON config file: the example in docs/config.md, inheritance, the command line and the
// file giving the same listener through the same function, and every error pinned.

const t = require('tap')
const fs = require('fs')
const path = require('path')
const { parseConfigFile, readConfigFile } = require('../lib/config/file')
const { parseCommandLine } = require('../lib/config/argv')
const { LISTENER_OPTIONS } = require('../lib/config/options')
const { parseJson } = require('../lib/config/json')
const { listenerConfig, configWith } = require('../lib/config/defaults')
const { ROOT } = require('./fixtures/helpers')
const { tmpDir } = require('./fixtures/tmp')

function docsExample () {
  const docs = fs.readFileSync(path.join(ROOT, 'docs', 'config.md'), 'utf8')
  const match = /<!-- config-example:start -->\n```json\n([\s\S]*?)```\n<!-- config-example:end -->/.exec(docs)
  if (match === null) throw new Error('docs/config.md has no config-example block')
  return match[1]
}

t.test('defaults.js: the config of defaults is what the command line builds when told nothing else', async t => {
  const { config } = parseCommandLine(['10.0.0.1:80'])
  const backends = config.listeners[0].backends
  t.same(config, configWith({ listeners: [listenerConfig({ backends })] }))
  const args = ['rr', '10.0.0.1:80', '--port', '0', '--check-interval', '1s', '--protocol', 'http']
  const given = parseCommandLine(args).config.listeners[0]
  t.same(given, listenerConfig({ mode: 'round-robin', port: 0, protocol: 'http', checkInterval: 1000, backends }),
    'derived values (name, checkTimeout) follow the overrides')
})

t.test('the example in docs/config.md: two listeners, defaults at the top, overrides below', async t => {
  const config = parseConfigFile(docsExample(), '/etc/lila/lila.json')
  t.equal(config.logLevel, 'info')
  t.equal(config.shutdownTimeout, 30000)
  t.equal(config.workers, 'auto')
  const [db, web] = config.listeners
  t.match(db, {
    name: 'postgres',
    port: 5432,
    protocol: 'tcp',
    mode: 'least-connections',
    connectTimeout: 2000, // from the top
    idleTimeout: 1800000,
    check: { type: 'tcp' },
    tls: null
  })
  t.same(db.backends.map(b => [b.host, b.port, b.backup]), [['10.0.0.1', 5432, false], ['10.0.0.2', 5432, false], ['10.0.0.3', 5432, true]])
  t.match(web, {
    name: 'web',
    port: 443,
    protocol: 'http',
    mode: 'round-robin',
    connectTimeout: 1000, // its own
    idleTimeout: 60000, // the default
    check: { type: 'http', path: '/health' },
    checkHost: 'app.example.com',
    tls: {
      certificates: [
        { cert: '/etc/lila/certs/example.com.pem', key: '/etc/lila/certs/example.com.key', certAt: '/etc/lila/lila.json: listeners[1].tls-cert' },
        { cert: '/etc/lila/certs/api.example.com.pem', key: '/etc/lila/certs/api.example.com.key', certAt: '/etc/lila/lila.json: listeners[1].certificates[0].cert' }
      ]
    }
  })
  t.same(web.backends[0], { host: 'app1.internal', port: 8080, weight: 2, maxConn: null, slowStart: 0, backup: false })
  t.same(web.backends[2], { host: '2001:db8::7', port: 8080, weight: 1, maxConn: 100, slowStart: 30000, backup: false })
})

t.test('the command line and the file make the same listener', async t => {
  const argv = parseCommandLine([
    'lc', ':9001', ':9002,weight=3', '--protocol', 'http', '--port', '8080', '--connect-timeout', '5s',
    '--check', 'http:/health', '--forwarded', '--max-conn', '10', '--hash-balance-factor', '1.5', '--name', 'web'
  ].filter(a => a !== '--hash-balance-factor' && a !== '1.5')).config
  const file = parseConfigFile(JSON.stringify({
    listeners: [{
      name: 'web',
      port: 8080,
      protocol: 'http',
      mode: 'lc',
      'connect-timeout': '5s',
      check: 'http:/health',
      forwarded: true,
      'max-conn': 10,
      backends: [':9001', ':9002,weight=3']
    }]
  }), 'lila.json')
  t.same(file, argv)
})

t.test('every listener option: the same value from argv and from JSON', async t => {
  // One valid value per option type, as text; JSON takes it as a string (or a number
  // or boolean where the type allows).
  const samples = {
    port: ['8081', 8081],
    host: ['127.0.0.1', '127.0.0.1'],
    protocol: ['http', 'http'],
    duration: ['1500ms', '1500ms'],
    count: ['5', 5],
    positive: ['7', 7],
    size: ['10m', '10m'],
    threshold: ['4', 4],
    check: ['http:/ready', 'http:/ready'],
    hostHeader: ['example.com:8080', 'example.com:8080'],
    dnsServer: ['127.0.0.1:5353', '127.0.0.1:5353'],
    factor: ['1.25', 1.25],
    name: ['front', 'front'],
    flag: [true, true],
    proxyProtocol: ['v2', 'v2'],
    backendProtocol: ['h2', 'h2'],
    file: ['/tmp/x.pem', '/tmp/x.pem'],
    statusList: ['5xx', '5xx'],
    retryList: ['502,503,reset', '502,503,reset'],
    percent: ['25%', '25%'],
    rate: ['10/s,burst=20', '10/s,burst=20'],
    fault: [':9001,error=503,for=30s', ':9001,error=503,for=30s'],
    sticky: ['cookie=SID', 'cookie=SID'],
    headerField: ['X-Env: prod {client_ip}', ['X-Env: prod {client_ip}']],
    headerName: ['X-Secret', ['X-Secret']],
    requestId: ['X-Correlation-ID', 'X-Correlation-ID'],
    hostRule: ['backend', 'backend'],
    mirror: [':9000,percent=10', ':9000,percent=10'],
    tlsSource: ['local', 'local'],
    tlsNames: ['a.test,B.test', 'a.test,B.test'],
    cidrList: ['10.0.0.0/8,::1', ['10.0.0.0/8', '::1']],
    realm: ['staff only', 'staff only'],
    compress: ['br', 'br'],
    mediaTypes: ['text/*,application/json', 'text/*,application/json'],
    forwardAuth: ['http://127.0.0.1:9091/verify', 'http://127.0.0.1:9091/verify'],
    headerNames: ['Remote-User,Remote-Groups', 'Remote-User,Remote-Groups'],
    errorPage: ['502,503=/tmp/5xx.html', ['502,503=/tmp/5xx.html']],
    maintenance: ['/tmp/maintenance.html', '/tmp/maintenance.html'],
    canary: [':9101 :9102,weight=2 10%', ':9101 :9102,weight=2 10%'],
    cookieName: ['side', 'side'],
    headerToken: ['X-Canary', 'X-Canary']
  }
  // Some options need another, given beside them on both sides.
  const companions = {
    timeout: { protocol: 'http' },
    'header-timeout': { protocol: 'http' },
    'body-timeout': { protocol: 'http' },
    'max-body-size': { protocol: 'http' },
    'drain-grace': { protocol: 'http' },
    forwarded: { protocol: 'http' },
    sticky: { protocol: 'http' },
    'backend-protocol': { protocol: 'http' },
    mirror: { protocol: 'http' },
    compare: { protocol: 'http', mirror: ':9000' },
    'retry-on': { protocol: 'http' },
    'eject-on': { protocol: 'http' },
    'request-id': { protocol: 'http' },
    'set-header': { protocol: 'http' },
    'del-header': { protocol: 'http' },
    'set-response-header': { protocol: 'http' },
    'del-response-header': { protocol: 'http' },
    'host-header': { protocol: 'http' },
    'basic-auth': { protocol: 'http' },
    'basic-auth-realm': { protocol: 'http', 'basic-auth': '/tmp/users' },
    'basic-auth-pass': { protocol: 'http', 'basic-auth': '/tmp/users' },
    compress: { protocol: 'http' },
    'compress-types': { protocol: 'http', compress: true },
    trace: { protocol: 'http' },
    'forward-auth': { protocol: 'http' },
    'forward-auth-copy': { protocol: 'http', 'forward-auth': 'http://127.0.0.1:9091/' },
    'forward-auth-timeout': { protocol: 'http', 'forward-auth': 'http://127.0.0.1:9091/' },
    'forward-auth-cache': { protocol: 'http', 'forward-auth': 'http://127.0.0.1:9091/' },
    'error-page': { protocol: 'http' },
    'intercept-errors': { protocol: 'http', 'error-page': '502=/tmp/5xx.html' },
    maintenance: { protocol: 'http' },
    'maintenance-allow': { protocol: 'http' },
    canary: { protocol: 'http' },
    'canary-cookie': { protocol: 'http', canary: ':9101 10%' },
    'canary-header': { protocol: 'http', canary: ':9101 10%' },
    'hash-balance-factor': { mode: 'ip-hash' },
    'tls-cert': { 'tls-key': '/tmp/k.pem' },
    'tls-key': { 'tls-cert': '/tmp/c.pem' },
    'backend-tls-ca': { 'backend-tls': true },
    'backend-tls-insecure': { 'backend-tls': true },
    'tls-names': { tls: 'local' },
    'tls-client-ca': { tls: 'local' },
    'tls-client-optional': { tls: 'local', 'tls-client-ca': '/tmp/ca.pem' },
    'redirect-http': { tls: 'local' }
  }
  for (const o of LISTENER_OPTIONS) {
    const sample = samples[o.type]
    if (sample === undefined) {
      t.fail(`no sample for type ${o.type}`)
      continue
    }
    const extra = { port: 8080, ...companions[o.name], [o.name]: sample[1] }
    const args = [':9001']
    for (const [name, value] of Object.entries({ port: '8080', ...companions[o.name], [o.name]: sample[0] })) {
      if (name === 'mode') args.unshift(value)
      else if (value === true) args.push(`--${name}`)
      else args.push(`--${name}`, String(value))
    }
    const fromArgv = parseCommandLine(args).config
    const listener = { ...extra, backends: [':9001'] }
    const fromFile = parseConfigFile(JSON.stringify({ listeners: [listener] }), '/tmp/lila.json')
    // Where a value was given differs (flag or JSON path); everything else must not.
    for (const c of [fromArgv, fromFile]) {
      for (const l of c.listeners) {
        for (const cert of (l.tls && l.tls.certificates) || []) { delete cert.certAt; delete cert.keyAt }
        if (l.tls && l.tls.clientAuth) delete l.tls.clientAuth.caAt
        if (l.backendTls) delete l.backendTls.caAt
      }
    }
    t.same(fromFile, fromArgv, `--${o.name}`)
  }
})

t.test('top-level options are every listener\'s default; a listener overrides them', async t => {
  const config = parseConfigFile(JSON.stringify({
    'connect-timeout': '9s',
    mode: 'rr',
    retries: 0,
    listeners: [
      { port: 1, backends: [':9001'] },
      { port: 2, mode: 'lc', 'connect-timeout': '1s', backends: [':9001'] }
    ]
  }), 'lila.json')
  t.same(config.listeners.map(l => [l.name, l.mode, l.connectTimeout, l.retries]), [
    ['tcp:1', 'round-robin', 9000, 0],
    ['tcp:2', 'least-connections', 1000, 0]
  ])
  t.equal(config.workers, 1, 'defaults as on the command line')
})

// Each case: a document (an object is JSON.stringify'd), then the exact error.
const L = (extra = {}) => ({ listeners: [{ port: 8080, backends: [':9001'], ...extra }] })
const ERRORS = [
  ['', 'invalid JSON at line 1, column 1: unexpected end of file: expected a value'],
  ['[]', 'expected a JSON object at the top, got an array'],
  ['{', 'invalid JSON at line 1, column 2: unexpected end of file: expected a "key" in double quotes'],
  ['{"listeners": [}', 'invalid JSON at line 1, column 16: unexpected "}": expected a value'],
  ['{"listeners": [{"port": 1,\n  "port": 2}]}', 'invalid JSON at line 2, column 3: key "port" appears twice in this object'],
  ['{\n  "listeners": [\n    { "port": 80, /* its backends\n  ]\n}', 'invalid JSON at line 3, column 19: unterminated comment: expected */ to close the /* here'],
  ['{\n  // a comment, then\n  / not one\n}', 'invalid JSON at line 3, column 3: unexpected "/": expected // or /* to start a comment'],
  ['{\n  "listeners": [,]\n}', 'invalid JSON at line 2, column 17: unexpected ",": expected a value'],
  ['{"x": "\u0001"}', 'invalid JSON at line 1, column 8: control character in a string: expected it escaped, e.g. \\n'],
  ['{"x": "\\q"}', 'invalid JSON at line 1, column 8: invalid escape "\\\\q"'],
  ['{"x": 01}', 'invalid JSON at line 1, column 8: unexpected "1": expected "," or "}"'],
  ['{} x', 'invalid JSON at line 1, column 4: unexpected "x" after the value'],
  ['['.repeat(100), 'invalid JSON at line 1, column 66: nested more than 64 deep'],
  [{}, 'listeners: expected a list of at least one listener, e.g. "listeners": [{ "port": 80, "backends": ["10.0.0.1:80"] }], got none'],
  [{ listeners: [] }, 'listeners: expected a list of at least one listener, e.g. "listeners": [{ "port": 80, "backends": ["10.0.0.1:80"] }], got an empty list'],
  [{ listeners: [3] }, 'listeners[0]: expected a listener object, e.g. { "port": 80, "backends": ["10.0.0.1:80"] }, got number 3'],
  [{ listeners: [{}] }, 'listeners[0]: missing "backends": expected a list such as ["10.0.0.1:80", "10.0.0.2:80,weight=2"]'],
  [{ listeners: [{ backends: ':9001' }] }, 'listeners[0].backends: expected a list of at least one backend such as ["10.0.0.1:80"], got a string'],
  [L({ backends: [':9001', 'x'] }), 'listeners[0].backends[1]: invalid backend "x": expected host:port[,weight=N][,max-conn=N][,slow-start=DUR][,backup]'],
  [L({ backends: [':9001', ':9001'] }), 'listeners[0].backends[1]: duplicate backend "127.0.0.1:9001": expected each backend once (use weight=N to send it more)'],
  [L({ backends: [':9001', null] }), 'listeners[0].backends[1]: expected a backend such as "10.0.0.1:80,weight=2", got null'],
  [L({ backends: ['x\ny:80'] }), 'listeners[0].backends[0]: invalid backend "x\\ny:80": expected a host name or IPv4 address before the ":"'],
  [L({ port: 70000 }), 'listeners[0].port: invalid value "70000": expected a port number from 0 to 65535'],
  [L({ port: true }), 'listeners[0].port: expected a number, got true'],
  [L({ 'connect-timeout': 3000 }), 'listeners[0].connect-timeout: expected a duration with a unit, e.g. "3s", got 3000'],
  [L({ 'connect-timeout': '3' }), 'listeners[0].connect-timeout: invalid duration "3": expected a number with a unit, e.g. 500ms, 2s or 1m'],
  [L({ forwarded: 'yes' }), 'listeners[0].forwarded: expected true or false, got "yes"'],
  [L({ timeout: '5s' }), 'listeners[0].timeout: needs "protocol": "http"'],
  [L({ mode: 'uri-hash' }), 'listeners[0].mode: mode uri-hash needs "protocol": "http"'],
  [L({ mode: 'fastest' }), 'listeners[0].mode: unknown mode "fastest": expected one of random, round-robin, rr, least-connections, lc, least-time, ip-hash, uri-hash, header-hash:NAME, cookie-hash:NAME'],
  [L({ mode: 'round-robbin' }), 'listeners[0].mode: unknown mode "round-robbin": did you mean "round-robin"?'],
  [L({ 'hash-balance-factor': 1.5 }), 'listeners[0].hash-balance-factor: does not apply to mode "random": expected a hash mode (ip-hash, uri-hash, header-hash:NAME, cookie-hash:NAME)'],
  [L({ workers: 2 }), 'listeners[0].workers: applies to the whole process: expected it at the top level, not in a listener'],
  [L({ config: 'x' }), 'listeners[0].config: --config is for the command line only: expected it not in the config file'],
  [L({ 'conect-timeout': '1s' }), 'listeners[0].conect-timeout: unknown key "conect-timeout": did you mean "connect-timeout"?'],
  [L({ colour: 'red' }), 'listeners[0].colour: unknown key "colour": expected an option\'s long name (lila --help), "mode", "backends" or "certificates"'],
  [L({ 'tls-cert': 'a.pem' }), 'listeners[0].tls-cert: needs "tls-key"'],
  [L({ certificates: [{ cert: 'a.pem' }] }), 'listeners[0].certificates[0]: missing "key": expected { "cert": FILE, "key": FILE }'],
  [L({ certificates: [{ cert: 3, key: 'k' }] }), 'listeners[0].certificates[0].cert: expected a file name, got number 3'],
  [L({ 'backend-tls-ca': 'ca.pem' }), 'listeners[0].backend-tls-ca: needs "backend-tls": true'],
  [{ port: 80, listeners: [{ backends: [':1'] }] }, 'port: is set per listener: expected it in each of "listeners", not at the top level'],
  [{ backends: [':1'], listeners: [{ backends: [':1'] }] }, 'backends: belongs to a listener: expected it in each of "listeners", not at the top level'],
  [{ 'log-level': 'loud', listeners: [{ backends: [':1'] }] }, 'log-level: invalid log level "loud": expected one of error, warn, info, debug'],
  [{ 'connect-timeout': '1x', listeners: [{ backends: [':1'] }] }, 'connect-timeout: invalid duration "1x": expected a number with a unit, e.g. 500ms, 2s or 1m'],
  [{ 'proxy-protocol': 'v1', protocol: 'http', listeners: [{ backends: [':1'] }] }, 'proxy-protocol: needs "protocol": "tcp"'],
  [{ 'status-token': 'a-long-token', listeners: [{ backends: [':1'] }] }, 'status-token: needs "status-port"'],
  [{ listeners: [{ port: 80, backends: [':1'] }, { port: 80, protocol: 'http', backends: [':2'] }] }, 'listeners[1]: port 80 is taken by listener "tcp:80": expected each listener on its own port'],
  [{ listeners: [{ port: 0, backends: [':1'] }, { port: 0, backends: [':2'] }] }, 'listeners[1]: duplicate listener name "tcp:0": expected each listener to have its own (set "name")']
]

t.test('every error names the JSON path and what was expected, in one line', async t => {
  for (const [doc, message] of ERRORS) {
    const text = typeof doc === 'string' ? doc : JSON.stringify(doc)
    t.throws(() => parseConfigFile(text, 'lila.json'), { name: 'UsageError', message: `lila.json: ${message}` }, JSON.stringify(text).slice(0, 80))
  }
})

t.test('the JSON parser agrees with JSON.parse on valid documents', async t => {
  const docs = ['{"a":[1,-2.5e3,true,false,null,"x\\u00e9\\n\\"",{}],"b":{"c":[]}}', ' \t\n[ ]\r\n', '"\\ud83d\\ude00"', '0', '-0.0e-0', '\ufeff{"bom": 1}']
  for (const doc of docs) t.same(parseJson(doc), JSON.parse(doc.replace(/^\ufeff/, '')), doc)
  const proto = parseJson('{"__proto__": {"polluted": true}}')
  t.same(Object.keys(proto), ['__proto__'], '"__proto__" is only a key')
  t.equal({}.polluted, undefined)
})

t.test('readConfigFile: a file that cannot be read', async t => {
  const dir = tmpDir(t, 'lila-config-')
  t.throws(() => readConfigFile(path.join(dir, 'none.json')), { message: `cannot read config file ${JSON.stringify(path.join(dir, 'none.json'))}: no such file` })
  t.throws(() => readConfigFile(dir), { message: `cannot read config file ${JSON.stringify(dir)}: it is a folder` })
  const file = path.join(dir, 'lila.json')
  fs.writeFileSync(file, JSON.stringify(L()))
  t.equal(readConfigFile(file).listeners[0].port, 8080)
})

t.test('TLS in the file: sources, names, client CA, redirect, and the state folder and ACME at the top', async t => {
  const config = parseConfigFile(JSON.stringify({
    'state-dir': 'state',
    'acme-email': 'ops@example.com',
    'acme-staging': true,
    'acme-ca': 'ca/acme.pem',
    'tls-client-ca': 'clients.pem',
    listeners: [
      { port: 443, protocol: 'http', backends: [':9001'], tls: 'acme', 'tls-names': 'example.com,www.example.com', 'redirect-http': 80 },
      { port: 8443, backends: [':9002'], tls: true, 'tls-client-optional': true }
    ]
  }), '/etc/lila/lila.json')
  t.equal(config.stateDir, '/etc/lila/state', 'relative to the file')
  t.same(config.acme, {
    directory: 'https://acme-staging-v02.api.letsencrypt.org/directory', email: 'ops@example.com', ca: '/etc/lila/ca/acme.pem'
  })
  const [web, tcp] = config.listeners
  t.same(web.tls, {
    source: 'acme',
    names: ['example.com', 'www.example.com'],
    clientAuth: { ca: '/etc/lila/clients.pem', caAt: '/etc/lila/lila.json: tls-client-ca', optional: false }
  })
  t.equal(web.redirectHttp, 80)
  t.same(tcp.tls.names, ['localhost', '127.0.0.1', '::1'], '"tls": true is local, for the default names')
  t.equal(tcp.tls.clientAuth.optional, true)
  t.throws(() => parseConfigFile(JSON.stringify({ listeners: [{ port: 1, backends: [':9'], tls: 'local', 'redirect-http': 1 }] }), 'x.json'),
    { message: 'x.json: listeners[0].redirect-http: is the listener\'s own port 1: expected another port (80, say)' })
  t.throws(() => parseConfigFile(JSON.stringify({
    listeners: [{ port: 1, backends: [':9'], tls: 'local', 'redirect-http': 2 }, { port: 2, backends: [':9'], name: 'b' }]
  }), 'x.json'), { message: 'x.json: listeners[0]: redirect-http port 2 is taken by listener "b": expected a port of its own' })
  t.throws(() => parseConfigFile(JSON.stringify({ 'state-dir': 'x', listeners: [{ backends: [':9'], 'state-dir': 'y' }] }), 'x.json'),
    { message: 'x.json: listeners[0].state-dir: applies to the whole process: expected it at the top level, not in a listener' })
})
