'use strict'

// lila run's pure parts (lib/app/): the line reader (whole lines, the 64 KiB cut), the
// backoff and crash-loop policy, and the program a command starts.

const t = require('tap')
const { LineReader, MAX_LINE } = require('../lib/app/log-lines')
const { Backoff, MAX_DELAY } = require('../lib/app/backoff')
const { programOf, execForm } = require('../lib/app/command')

function read (chunks) {
  const lines = []
  const reader = new LineReader((text, cut) => lines.push([text, cut]))
  for (const chunk of chunks) reader.push(Buffer.from(chunk))
  reader.end()
  return lines
}

t.test('lines come whole, however the bytes are cut', async t => {
  t.same(read(['a', 'b\nc', 'd\n', '\n', 'e']), [['ab', false], ['cd', false], ['', false], ['e', false]])
  t.same(read(['crlf\r\n']), [['crlf', false]], 'a CR before the LF is dropped')
  t.same(read([]), [], 'nothing, no line')
  const long = 'x'.repeat(MAX_LINE + 10)
  t.same(read([long.slice(0, 40000), long.slice(40000) + '\nnext\n']), [['x'.repeat(MAX_LINE), true], ['next', false]],
    'a line over 64 KiB is cut there, its rest dropped, the next line whole')
  t.same(read(['y'.repeat(MAX_LINE) + '\n']), [['y'.repeat(MAX_LINE), false]], 'exactly 64 KiB is not cut')
})

t.test('backoff: 100 ms doubling to 30 s, a crash loop said once, starting over once it stayed up', async t => {
  const b = new Backoff()
  const delays = []
  const began = []
  for (let i = 0; i < 12; i++) {
    const { delay, loopBegan } = b.exited(0)
    delays.push(delay)
    began.push(loopBegan)
  }
  t.same(delays, [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, MAX_DELAY, MAX_DELAY, MAX_DELAY])
  t.same(began.map((x, i) => x ? i : -1).filter(i => i >= 0), [4], 'the fifth exit in a row begins the loop, once')
  t.equal(b.stayedUp(), true, 'it was looping')
  t.same(b.exited(0), { delay: 100, loopBegan: false }, 'then starts over')
  const c = new Backoff()
  c.exited(0)
  c.exited(0)
  t.same(c.exited(60000), { delay: 100, loopBegan: false }, 'an exit after staying up starts over')
})

t.test('the program a command starts, when lila can tell', async t => {
  t.equal(programOf('node server.js'), 'node')
  t.equal(programOf('  NODE_ENV=production PORT=1 ./bin/app --x'), './bin/app')
  t.equal(programOf('exec node a.js'), null, 'a word of the shell')
  t.equal(programOf('cd src && node a.js'), null)
  t.equal(programOf('"my app" start'), null, 'quoted: left to the shell')
  t.equal(programOf('$HOME/bin/app'), null, 'expanded: left to the shell')
  t.equal(programOf('python3 -m http.server $PORT'), 'python3')
})

t.test('the command as exec runs it, so that lila holds the app\'s own pid', async t => {
  t.equal(execForm('node server.js'), 'exec node server.js')
  t.equal(execForm('NODE_ENV=production node a.js'), 'NODE_ENV=production exec node a.js')
  t.equal(execForm('python3 -m http.server $PORT'), 'exec python3 -m http.server $PORT')
  t.equal(execForm('node -e "a  b"'), 'exec node -e "a  b"', 'its spaces kept')
  for (const command of ['cd src && node a.js', 'node a.js | tee log', 'node a.js > log', 'A="x y" node a.js', 'exec node a']) {
    t.equal(execForm(command), null, `${command}: the shell runs it`)
  }
})

t.test('lila run in a config file: a listener\'s "run", its options, LILA_ variables', async t => {
  const { parseConfigFile } = require('../lib/config/file')
  const text = JSON.stringify({
    listeners: [{ port: 3000, protocol: 'http', run: { command: 'node server.js', instances: 3, 'app-env': ['A=1'], 'app-cwd': 'app' } }]
  })
  const env = new Map([['stop-timeout', { value: '3s', variable: 'LILA_STOP_TIMEOUT', option: require('../lib/config/options').BY_NAME.get('stop-timeout') }]])
  const [listener] = parseConfigFile(text, '/etc/lila/lila.json', env).listeners
  t.match(listener.run, { command: 'node server.js', instances: 3, appEnv: [['A', '1']], appCwd: '/etc/lila/app', stopTimeout: 3000 })
  t.same(listener.backends, [{ host: '127.0.0.1', port: null, app: true, weight: 1, maxConn: null, slowStart: 0, backup: false }])
  t.throws(() => parseConfigFile(JSON.stringify({ listeners: [{ run: { command: 'x', surge: 0 } }] }), 'f.json'),
    /^f\.json: listeners\[0\]\.run\.surge: invalid value "0": expected a whole number of at least 1$/)
})

t.test('the dashboard shows the app\'s instances under its listener', async t => {
  const { listenerLines } = require('../lib/admin/dashboard-table')
  const listener = {
    name: 'http:3000',
    protocol: 'http',
    mode: 'random',
    active: 0,
    queued: 0,
    unserved: 0,
    app: {
      command: 'node server.js',
      rolling: true,
      restarts: { signal: 2 },
      list: [
        { number: 1, pid: 41, port: 12001, generation: 2, state: 'ready' },
        { number: 2, pid: 42, port: 12002, generation: 1, state: 'draining' }
      ]
    }
  }
  const lines = listenerLines(listener, false, 200)
  t.equal(lines[1], 'app node server.js · rolling · ready 1, draining 1 · restarts signal 2 · ' +
    'app.1 pid 41 :12001 gen 2 ready, app.2 pid 42 :12002 gen 1 draining')
})
