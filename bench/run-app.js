'use strict'

// lila run against pm2's cluster mode on the same app and the same load: requests that
// failed while the app was reloaded three times. The app (run-app-server.js) runs 3
// instances either way; wrk runs over keep-alive and with a connection per request
// (Connection: close), both at once, while the app is reloaded 3 times in a row, each
// reload once the one before is over:
//   lila   lila run 'node run-app-server.js' -i 3, reloaded by SIGHUP (a rolling
//          restart: each new instance ready before the old one drains)
//   pm2    pm2 start run-app-server.js -i 3 (cluster mode, one port shared through
//          Node's cluster module), reloaded by pm2 reload, and with --wait-ready
//          (the app says when it listens) as pm2's docs advise for a graceful reload
// pm2 (AGPL) is a dependency of bench/ only, never of lila: npm install in bench/.
//
//   node bench/run-app.js [--rounds 3] [--only lila,pm2,pm2-wait-ready]
// Writes bench/RESULTS-run.md.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { parseArgs } = require('util')
const { spawn, spawnSync } = require('child_process')
const { startWrk } = require('../test/fixtures/upgrade')

const ROOT = path.join(__dirname, '..')
const LILA = path.join(ROOT, 'lila')
const APP = path.join(__dirname, 'run-app-server.js')
const PM2 = path.join(__dirname, 'node_modules', '.bin', 'pm2')
const RELOADS = 3
const INSTANCES = 3

const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    only: { type: 'string', default: 'lila,pm2,pm2-wait-ready' }
  }
})

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// lila run, on a free port: { url, reload(), stop() }.
async function startLila () {
  const child = spawn(LILA, ['run', `node ${APP}`, '-i', String(INSTANCES), '--protocol', 'http',
    '--host', '127.0.0.1', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] })
  let text = ''
  const seen = pattern => new Promise((resolve, reject) => {
    const check = () => {
      const match = pattern.exec(text)
      if (match) {
        child.stderr.off('data', onData)
        resolve(match)
      }
    }
    const onData = chunk => { text += chunk; check() }
    child.stderr.on('data', onData)
    child.once('exit', () => reject(new Error(`lila exited:\n${text}`)))
    check()
  })
  const [, port] = await seen(/listening on 127\.0\.0\.1:(\d+) /)
  // Every instance ready before the load begins.
  await seen(new RegExp(`(?:ready on port[^]*){${INSTANCES}}`))
  let done = 0
  return {
    url: `http://127.0.0.1:${port}/`,
    async reload () {
      child.kill('SIGHUP')
      done++
      await seen(new RegExp(`(?:rolling restart done[^]*){${done}}`))
    },
    async stop () {
      child.kill('SIGTERM')
      await new Promise(resolve => child.once('exit', resolve))
    }
  }
}

// pm2's cluster mode, its daemon in a home of its own: { url, reload(), stop() }.
async function startPm2 (waitReady) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'lila-bench-pm2-'))
  const env = { ...process.env, PM2_HOME: home, PORT: String(await freePort()) }
  const pm2 = (...args) => {
    const result = spawnSync(PM2, args, { env, encoding: 'utf8', timeout: 120000 })
    if (result.status !== 0) throw new Error(`pm2 ${args.join(' ')}: ${result.stderr || result.stdout}`)
    return result.stdout
  }
  const wait = waitReady ? ['--wait-ready', '--listen-timeout', '5000'] : []
  pm2('start', APP, '-i', String(INSTANCES), '--name', 'bench', ...wait)
  await sleep(1000) // pm2 start returns before its workers listen: no event of theirs to wait on
  return {
    url: `http://127.0.0.1:${env.PORT}/`,
    async reload () { pm2('reload', 'bench') },
    async stop () {
      pm2('kill')
      fs.rmSync(home, { recursive: true, force: true })
    }
  }
}

function freePort () {
  return new Promise(resolve => {
    const server = require('net').createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

// One round: the loads, 3 reloads, the loads' counts.
async function round (start) {
  const target = await start()
  const loads = [startWrk(target.url, ['-t1', '-c8']), startWrk(target.url, ['-t1', '-c8', '-H', 'Connection: close'])]
  await sleep(1000) // the loads at full pace before the first reload
  const began = Date.now()
  for (let i = 0; i < RELOADS; i++) await target.reload()
  const reloads = Date.now() - began
  await sleep(500) // and after the last
  const [keepAlive, perRequest] = await Promise.all(loads.map(load => load.stop()))
  await target.stop()
  return { keepAlive, perRequest, reloads }
}

const failed = wrk => {
  const e = wrk.errors
  return e.connect + e.read + e.write + e.timeout + wrk.non2xx
}

function cell (wrk) {
  const e = wrk.errors
  const kinds = Object.entries({ ...e, non2xx: wrk.non2xx }).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`)
  return `${wrk.requests} / ${failed(wrk)}${kinds.length ? ` (${kinds.join(', ')})` : ''}`
}

async function main () {
  const contenders = {
    lila: ['lila run, SIGHUP', () => startLila()],
    pm2: ['pm2 cluster mode, pm2 reload', () => startPm2(false)],
    'pm2-wait-ready': ['pm2 cluster mode --wait-ready, pm2 reload', () => startPm2(true)]
  }
  const only = opts.only.split(',')
  if (only.some(name => name.startsWith('pm2')) && !fs.existsSync(PM2)) {
    throw new Error('pm2 is not installed: npm install in bench/')
  }
  const rows = []
  for (const name of only) {
    const [what, start] = contenders[name]
    for (let r = 1; r <= Number(opts.rounds); r++) {
      const result = await round(start)
      console.log(name, r, cell(result.keepAlive), cell(result.perRequest), `${result.reloads} ms`)
      rows.push({ name, what, round: r, ...result })
    }
  }
  const pm2Version = fs.existsSync(PM2) ? require('./node_modules/pm2/package.json').version : 'none'
  const lines = [
    '# lila run against pm2\'s cluster mode: failed requests during reloads',
    '',
    `\`node bench/run-app.js --rounds ${opts.rounds}\`, ${new Date().toISOString().slice(0, 10)}, ` +
      `${os.cpus().length} cores, Node ${process.version}, pm2 ${pm2Version}.`,
    `The same app (bench/run-app-server.js: answers after 2 ms, closes gracefully on SIGINT and SIGTERM), ${INSTANCES} ` +
      'instances; wrk (1 thread, 8 connections) over keep-alive and with `Connection: close` at once, while the app is ' +
      `reloaded ${RELOADS} times in a row. A cell is requests / failed (wrk's socket errors: a refused connect shows as ` +
      'a write or connect error, a connection cut as a read error; and non-2xx answers). "3 reloads" is how long the ' +
      'three took.',
    '',
    '| contender | reloaded by | round | wrk keep-alive | wrk Connection: close | 3 reloads |',
    '|---|---|---|---|---|---|',
    ...rows.map(r => `| ${r.name} | ${r.what} | ${r.round} | ${cell(r.keepAlive)} | ${cell(r.perRequest)} | ${r.reloads} ms |`),
    ''
  ]
  for (const name of only) {
    const mine = rows.filter(r => r.name === name)
    const total = mine.reduce((sum, r) => sum + r.keepAlive.requests + r.perRequest.requests, 0)
    const bad = mine.reduce((sum, r) => sum + failed(r.keepAlive) + failed(r.perRequest), 0)
    lines.push(`- ${name}: ${bad} failed of ${total} requests in ${mine.length} rounds ` +
      `(${(100 * bad / Math.max(1, total)).toFixed(2)} %)`)
  }
  lines.push('')
  fs.writeFileSync(path.join(__dirname, 'RESULTS-run.md'), lines.join('\n'))
  console.log(lines.join('\n'))
}

main().catch(err => {
  console.error(err.message)
  process.exitCode = 1
})
