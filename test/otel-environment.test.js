'use strict'

// Where --otlp sends (lib/config/otel-environment.js, pure): a bare --otlp reads
// OTEL_EXPORTER_OTLP_ENDPOINT, else the one default in config/options.js, which the
// help, the admin topic's example and the parser's error say too.

const t = require('tap')
const { otlpSettings } = require('../lib/config/otel-environment')
const { OTLP_DEFAULT_ENDPOINT, BY_NAME } = require('../lib/config/options')
const { parseCommandLine } = require('../lib/config/argv')
const { topicText, EXAMPLES } = require('../lib/cli/help')

const config = otlp => ({ otlp, otlpInterval: 15000, traceSample: 1 })

t.test('a bare --otlp: OTEL_EXPORTER_OTLP_ENDPOINT, else the default', async t => {
  t.equal(OTLP_DEFAULT_ENDPOINT, 'http://localhost:4318', 'the SDKs\' default')
  const plain = otlpSettings(config('env'), {}).settings
  t.equal(plain.traces.url, `${OTLP_DEFAULT_ENDPOINT}/v1/traces`)
  t.equal(plain.metrics.url, `${OTLP_DEFAULT_ENDPOINT}/v1/metrics`)

  const named = otlpSettings(config('env'), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9999/' }).settings
  t.equal(named.traces.url, 'http://127.0.0.1:9999/v1/traces', 'the variable is the base')

  const { settings, warnings } = otlpSettings(config('env'), { OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://x' })
  t.equal(settings.metrics.url, `${OTLP_DEFAULT_ENDPOINT}/v1/metrics`, 'a bad variable: the default')
  t.match(warnings, [`OTEL_EXPORTER_OTLP_ENDPOINT="grpc://x" cannot be read (expected an http:// or https:// URL); using ${OTLP_DEFAULT_ENDPOINT}`])

  t.equal(otlpSettings(config('http://127.0.0.1:9/'), {}).settings.traces.url, 'http://127.0.0.1:9/v1/traces',
    '--otlp URL over the variable')
})

t.test('the help, the example and the parser\'s error name the same default', async t => {
  t.match(BY_NAME.get('otlp').help, `else ${OTLP_DEFAULT_ENDPOINT})`, '--otlp\'s help')
  const example = EXAMPLES.find(([, , command]) => command.includes('--otlp'))
  t.match(example[1], `(else ${OTLP_DEFAULT_ENDPOINT})`, 'the example\'s words')
  t.match(topicText('admin', 200), OTLP_DEFAULT_ENDPOINT, 'lila help admin')
  t.throws(() => parseCommandLine(['rr', ':9001', '--otlp', 'ftp://x'], {}),
    { message: new RegExp(`e\\.g\\. ${OTLP_DEFAULT_ENDPOINT}$`) }, 'the parser\'s example')
})
