'use strict'

// The retry budget (lib/upstream/retry-budget.js) on a hand-driven clock: 20% of the
// requests of the last 10 s, plus 10; the window slides a second at a time.

const t = require('tap')
const { RetryBudget, FLOOR, WINDOW_S } = require('../lib/upstream/retry-budget')

function budget (percent) {
  const clock = { now: 1_000_000 }
  return { clock, b: new RetryBudget(percent, () => clock.now) }
}

// Retries taken while allowed, at most `max`.
function drain (b, max = 1000) {
  let n = 0
  while (n < max && b.allows()) {
    b.spend()
    n++
  }
  return n
}

t.test('a quiet listener may still retry: the floor', async t => {
  const { b } = budget(20)
  t.equal(drain(b), FLOOR)
  t.equal(b.exhausted, 1, 'the refusal is counted')
})

t.test('20% of the requests of the window, plus the floor', async t => {
  const { b } = budget(20)
  for (let i = 0; i < 100; i++) b.request()
  t.equal(drain(b), 20 + FLOOR)
})

t.test('the window slides: old requests and retries stop counting', async t => {
  const { b, clock } = budget(20)
  for (let i = 0; i < 100; i++) b.request()
  t.equal(drain(b), 30)
  clock.now += (WINDOW_S - 1) * 1000
  t.equal(drain(b), 0, 'within the window: nothing left')
  clock.now += 1000
  t.equal(drain(b), FLOOR, 'the window passed: the requests went, and so did the retries')
  clock.now += 60 * 1000
  for (let i = 0; i < 50; i++) b.request()
  t.equal(drain(b), 10 + FLOOR, 'a long pause clears everything')
})

t.test('a clock that steps back keeps counting in the current second', async t => {
  const { b, clock } = budget(20)
  for (let i = 0; i < 50; i++) b.request()
  clock.now -= 5000
  t.equal(drain(b), 10 + FLOOR)
})

t.test('off: no cap, nothing counted; a reload can set one', async t => {
  const { b } = budget(null)
  t.equal(drain(b, 500), 500)
  t.equal(b.exhausted, 0)
  b.setPercent(0)
  t.equal(drain(b), FLOOR, '0%: the floor only')
})
