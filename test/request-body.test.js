'use strict'

// RequestBody (proxy/http/request-body.js): a request without a body shares one per
// method, which nothing a request does to it changes.

const t = require('tap')
const { requestBody, RequestBody } = require('../lib/proxy/http/request-body')

const state = body => ({ ...body })

t.test('a bodiless request shares one RequestBody per usual method, never changed', async t => {
  const get = requestBody('GET', 0, true, false, false)
  t.equal(requestBody('GET', 0, true, false, false), get, 'the same for every bodiless GET')
  t.not(requestBody('HEAD', 0, true, false, false), get, 'another per method')
  const before = state(get)
  get.sent()
  get.replay(() => t.fail('a bodiless request has no piece to replay'), null)
  t.ok(get.end(), 'its end agrees with its length')
  t.same(state(get), before, 'sent, replay and end leave it as it was')
  t.ok(get.canReplay() && get.canRepeat(), 'a GET may be sent again')
  t.notOk(requestBody('POST', 0, true, false, false).canRepeat(), 'a POST may not, even without a body')
})

t.test('a body, a gRPC call, a chunked body or an unusual method gets its own', async t => {
  const own = [
    requestBody('POST', 10, false, false, false),
    requestBody('GET', 0, true, true, false),
    requestBody('POST', -1, false, false, true),
    requestBody('PURGE', 0, true, false, false)
  ]
  for (const body of own) t.ok(body instanceof RequestBody)
  t.equal(new Set(own).size, 4)
  t.not(requestBody('PURGE', 0, true, false, false), own[3], 'not kept for the next one')
  t.notOk(own[1].canReplay(), 'a call is never replayed')
  own[0].add(Buffer.alloc(10), 10)
  t.equal(requestBody('POST', 0, true, false, false).received, 0, 'the shared one saw nothing of it')
})

t.test('a small body read whole in one piece is given whole, to go with its head', async t => {
  const one = requestBody('POST', 5, false, false, false)
  const piece = Buffer.from('hello')
  one.add(piece, 5)
  t.equal(one.whole(16), null, 'not before its end')
  t.ok(one.end())
  t.equal(one.whole(4), null, 'not past the size asked')
  t.equal(one.whole(16), piece, 'the one piece, once it ended')
  t.notOk(one.started, 'not sent yet')
  one.replayed()
  t.ok(one.started && one.kept, 'then sent, and still held for a replay')
  const two = requestBody('PUT', 10, false, false, false)
  two.add(Buffer.from('hello'), 5)
  two.add(Buffer.from('world'), 5)
  two.end()
  t.equal(two.whole(16), null, 'two pieces are replayed as they are')
  const none = requestBody('GET', 0, true, false, false)
  t.equal(none.whole(16), null, 'no body, nothing to join')
})
