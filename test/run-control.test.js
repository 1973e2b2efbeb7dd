'use strict'

// lila run through the spawned executable, continued (run.test.js and run-roll.test.js
// have the rest): the start-up table, --max-age under load, `lila restart-app`, and a
// config reload that starts or stops a listener's app.

const t = require('tap')
const { request, statusJson } = require('./fixtures/helpers')
const { runApp, instances, requestLoop } = require('./fixtures/run')

t.setTimeout(180000)

t.test('the start-up table shows each instance ready, with its port and pid', async t => {
  const lila = await runApp(t, ['-i', '3'])
  const start = lila.lines.findIndex(line => /^lila: backend +state +check$/.test(line))
  const end = lila.lines.indexOf(lila.listening)
  t.ok(start !== -1 && start < end, `a table before the listening line:\n${lila.stderr}`)
  const table = lila.lines.slice(start + 1, end)
  const [, count] = /^lila: app +(\d) ready +an instance joins when it is ready$/.exec(table[0]) || []
  t.ok(Number(count) >= 1, `the app's row says how many are ready: ${table[0]}`)
  const rows = table.slice(1)
  t.equal(rows.length, Number(count), `a row for each instance ready:\n${rows.join('\n')}`)
  t.notMatch(rows.join('\n'), /pending|not checked/, 'none shown as not checked')
  const list = await instances(lila)
  const numbers = new Set()
  for (const row of rows) {
    const match = /^lila: 127\.0\.0\.1:(\d+) \(app\.(\d), pid (\d+)\) +up +tcp connect ok$/.exec(row)
    t.ok(match, `an instance up, with its port and pid: ${row}`)
    if (match === null) continue
    const [, port, number, pid] = match.map(Number)
    t.match(list.find(i => i.number === number), { port, pid, state: 'ready' }, `app.${number} as /status.json shows it`)
    numbers.add(number)
  }
  t.equal(numbers.size, rows.length, 'each instance once')
  t.equal((await request(lila.port)).status, 200)
})

t.test('--max-age: each instance older than it is replaced through a roll; no request failed', async t => {
  const lila = await runApp(t, ['-i', '2', '--max-age', '3s'])
  const before = (await instances(lila)).map(i => i.pid)
  const loop = requestLoop(lila.port, 2, 100000)
  t.teardown(() => loop.stop())
  const old = 'app\\.(\\d) is older than --max-age 3s'
  await lila.waitForLine(new RegExp(`app: rolling restart \\(${old}\\): 1 instance, 1 at a time$`))
  const from = loop.state.ok
  const done = new RegExp(`app: rolling restart done \\(${old}\\): 1 replaced in `)
  await lila.waitForLine(done, { count: 2 })
  const during = loop.state.ok - from
  const { ok, failed } = await loop.stop()
  const rolled = lila.lines.map(line => done.exec(line)).filter(Boolean).slice(0, 2).map(match => match[1])
  t.same(rolled.sort(), ['1', '2'], 'app.1 and app.2 rolled, each for its age')
  t.ok(during > 0, `${during} requests answered during the two rolls (${ok} in all)`)
  t.same(failed, [], 'none failed')
  const after = await instances(lila)
  t.same(after.filter(i => before.includes(i.pid)), [], 'both first instances replaced')
  t.ok((await statusJson(lila)).listeners[0].app.restarts['max-age'] >= 2, 'counted under max-age')
})
