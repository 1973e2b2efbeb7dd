'use strict'

// lib/cli/signals.js, the one signal handling of the single process and the --workers
// primary, on an emitter standing in for the process.

const t = require('tap')
const { EventEmitter } = require('events')
const { onSignals, holdSignals } = require('../lib/cli/signals')
const { captureLog } = require('./fixtures/helpers')

t.test('first SIGTERM/SIGINT stops, another destroys; SIGHUP reloads one at a time, none once stopping', async t => {
  const signals = new EventEmitter()
  const { log, lines } = captureLog()
  const calls = []
  let finishReload
  const handle = onSignals(signals, log, {
    stop: name => calls.push(`stop ${name}`),
    destroy: () => calls.push('destroy'),
    reload: () => {
      calls.push('reload')
      return new Promise(resolve => { finishReload = resolve })
    }
  })
  signals.emit('SIGHUP')
  signals.emit('SIGHUP')
  await new Promise(setImmediate)
  t.same(calls, ['reload'], 'the second reload waits for the first')
  finishReload()
  await new Promise(setImmediate)
  t.same(calls, ['reload', 'reload'])
  finishReload()
  signals.emit('SIGINT', 'SIGINT')
  signals.emit('SIGHUP')
  signals.emit('SIGTERM', 'SIGTERM')
  await new Promise(setImmediate)
  t.same(calls, ['reload', 'reload', 'stop SIGINT', 'destroy'], 'no reload once stopping')
  t.same(lines, ['SIGTERM again: closing every connection now'])
  handle.off()
  t.same(['SIGTERM', 'SIGINT', 'SIGHUP'].map(name => signals.listenerCount(name)), [0, 0, 0], 'off() leaves no handler')
})

t.test('stop(name) counts as a signal; no reload given: SIGHUP is not caught', async t => {
  const signals = new EventEmitter()
  const calls = []
  const handle = onSignals(signals, captureLog().log, {
    stop: name => calls.push(`stop ${name}`),
    destroy: () => calls.push('destroy')
  })
  t.equal(signals.listenerCount('SIGHUP'), 0)
  handle.stop('quit')
  signals.emit('SIGTERM', 'SIGTERM')
  t.same(calls, ['stop quit', 'destroy'])
  handle.off()
})

t.test('holdSignals: one caught while starting is replayed on release(true), dropped on release(false)', async t => {
  for (const replay of [true, false]) {
    const signals = new EventEmitter()
    const hold = holdSignals(signals, ['SIGHUP', 'SIGUSR2'])
    signals.emit('SIGHUP') // while starting: caught, not fatal
    signals.emit('SIGHUP')
    signals.emit('SIGUSR2')
    const seen = []
    signals.on('SIGHUP', () => seen.push('SIGHUP')) // the handlers that take over, as in main.js serve()
    signals.on('SIGUSR2', () => seen.push('SIGUSR2'))
    hold.release(replay)
    t.same(seen, replay ? ['SIGHUP', 'SIGUSR2'] : [], replay ? 'each replayed once' : 'dropped')
    t.equal(signals.listenerCount('SIGHUP'), 1, 'no longer caught')
    t.equal(signals.listenerCount('SIGUSR2'), 1, 'no longer caught')
  }
  const off = new EventEmitter()
  holdSignals(off, [])
  t.equal(off.listenerCount('SIGHUP'), 0, 'off: nothing caught')
})
