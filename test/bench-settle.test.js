'use strict'

// bench/cpu.js settledRssKiB, which the memory benches read idle memory with: a process
// whose memory still grows is not read until it stops; one that holds still is read
// once it held for `still` seconds. A real child process, its RSS from /proc.

const t = require('tap')
const fs = require('fs')
const { spawn } = require('child_process')
const { settledRssKiB } = require('../bench/cpu')

if (!fs.existsSync('/proc/self/status')) {
  t.plan(0, 'no /proc here')
} else {
  t.test('a process that grows is read once it stopped growing', async t => {
    // 2 MiB touched every 100 ms, 40 times (80 MiB over about 4 s), then its own RSS
    // said once, then idle until killed.
    const child = spawn(process.execPath, ['-e', `
      const held = []
      let n = 0
      const grow = setInterval(() => {
        held.push(Buffer.alloc(2 * 1048576, 1))
        if (++n < 40) return
        clearInterval(grow)
        const kib = Number(/VmRSS:\\s+(\\d+)/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'))[1])
        process.stdout.write('grown ' + kib + '\\n')
        setInterval(() => {}, 1000)
      }, 100)
    `], { stdio: ['ignore', 'pipe', 'inherit'] })
    t.teardown(() => child.kill())
    const grown = new Promise(resolve => {
      let text = ''
      child.stdout.on('data', chunk => {
        text += chunk
        const m = /grown (\d+)/.exec(text)
        if (m) resolve(Number(m[1]))
      })
    })
    const reading = await settledRssKiB(child.pid, { still: 3, max: 60 })
    const grownKiB = await grown
    t.ok(reading.settled, 'it settled')
    t.ok(reading.kib >= grownKiB * 0.97, `read ${reading.kib} KiB, not less than its ${grownKiB} once grown`)
  })
}
