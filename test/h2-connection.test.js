'use strict'

// lila's HTTP/2 connection state machine (lib/wire/h2/connection.js), both sides, fed
// frames by hand with no socket (test/fixtures/h2-codec.js): the preface and SETTINGS,
// requests and responses in lila's head form, stream states and their errors, flow
// control both ways with pause and resume, GOAWAY, PING, and the flood limits.

const t = require('tap')
const { F, GET, POST, frame, block, harness, openServer, openClient, C } = require('./fixtures/h2-codec')

t.test('server: preface, SETTINGS, a GET in lila\'s head form, the response out', async t => {
  const h = harness('server')
  t.same(h.described(), ['SETTINGS 0', 'WINDOW_UPDATE 0 +983041'], 'lila speaks first: its SETTINGS and the connection window')
  h.feed(C.PREFACE.subarray(0, 10), C.PREFACE.subarray(10), F.settings([C.SETTINGS_INITIAL_WINDOW_SIZE, 1000]))
  t.same(h.described(), ['SETTINGS 0 ack'])
  h.feed(F.headers(1, [...GET, 'user-agent', 'test', 'cookie', 'a=1', 'cookie', 'b=2', 'content-type', 'application/grpc']))
  t.same(h.events(), ['settings', 'stream 1 es'])
  const head = h.r.heads[0]
  t.match(head, {
    method: 'GET',
    scheme: 'http',
    target: '/',
    path: '/',
    authority: 'example.test',
    host: 'example.test',
    version: 2,
    contentLength: -1,
    chunked: false,
    endStream: true,
    contentType: 'application/grpc'
  })
  t.same(head.fields, ['user-agent', 'user-agent', 'test', 'content-type', 'content-type', 'application/grpc', 'cookie', 'cookie', 'a=1; b=2'],
    'fields as parse.js gives them (name, lower-case name, value); cookie crumbs joined')
  const s = h.r.streams[0]
  h.conn.headers(s, [':status', '200', 'content-type', 'text/plain'], false)
  t.equal(h.conn.write(s, Buffer.from('hello'), true), true)
  const out = h.out()
  t.same(out.map(f => f.list || f.payload.toString()), [[':status', '200', 'content-type', 'text/plain'], 'hello'])
  t.same(h.events(), ['closed 1'], 'ended both ways: the stream leaves the table')
  t.equal(h.conn.streams.size, 0)
})

t.test('server: the preface and the first frame', async t => {
  let h = harness('server')
  h.out()
  h.feed(Buffer.from('PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n'))
  t.same(h.described(), ['GOAWAY 0 PROTOCOL_ERROR'], 'a preface broken after its first bytes')
  t.ok(h.closed, 'and the transport closes')
  h = harness('server')
  h.out()
  h.feed(Buffer.from('GET / HTTP/1.1\r\n\r\n'))
  t.same(h.described(), ['GOAWAY 0 PROTOCOL_ERROR'], 'HTTP/1.1')
  h = harness('server')
  h.out()
  h.feed(C.PREFACE, F.ping())
  t.same(h.described(), ['GOAWAY 0 PROTOCOL_ERROR'], 'a first frame other than SETTINGS')
})

t.test('frame sizes (4.2, 6.x)', async t => {
  const cases = [
    ['DATA over 16,384 bytes', frame(C.DATA, 0, 1, Buffer.alloc(16385)), 'GOAWAY 0 FRAME_SIZE_ERROR'],
    ['PING of 7 bytes', frame(C.PING, 0, 0, Buffer.alloc(7)), 'GOAWAY 0 FRAME_SIZE_ERROR'],
    ['SETTINGS of 5 bytes', frame(C.SETTINGS, 0, 0, Buffer.alloc(5)), 'GOAWAY 0 FRAME_SIZE_ERROR'],
    ['a SETTINGS ack with a payload', frame(C.SETTINGS, C.ACK, 0, Buffer.alloc(6)), 'GOAWAY 0 FRAME_SIZE_ERROR'],
    ['RST_STREAM of 3 bytes', frame(C.RST_STREAM, 0, 1, Buffer.alloc(3)), 'GOAWAY 0 FRAME_SIZE_ERROR'],
    ['WINDOW_UPDATE of 3 bytes', frame(C.WINDOW_UPDATE, 0, 0, Buffer.alloc(3)), 'GOAWAY 0 FRAME_SIZE_ERROR'],
    ['GOAWAY of 7 bytes', frame(C.GOAWAY, 0, 0, Buffer.alloc(7)), 'GOAWAY 0 FRAME_SIZE_ERROR'],
    ['PRIORITY of 4 bytes (a stream error)', frame(C.PRIORITY, 0, 1, Buffer.alloc(4)), 'RST_STREAM 1 FRAME_SIZE_ERROR'],
    ['padded DATA of 0 bytes', frame(C.DATA, C.PADDED, 1), 'GOAWAY 0 FRAME_SIZE_ERROR']
  ]
  for (const [what, bytes, expected] of cases) {
    const h = openServer()
    h.feed(bytes)
    t.same(h.described(), [expected], what)
  }
  const h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS), frame(C.DATA, C.END_STREAM, 1, Buffer.alloc(16384)))
  t.same(h.events(), ['stream 1', 'data 1 16384 es'], 'a DATA frame of exactly 16,384 bytes is fine')
})

t.test('stream ids and states (5.1, 5.1.1)', async t => {
  const cases = [
    ['DATA on an idle stream', [F.data(1, 'x')], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['RST_STREAM on an idle stream', [F.rst(1)], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['WINDOW_UPDATE on an idle stream', [F.windowUpdate(1, 10)], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['CONTINUATION without HEADERS', [F.continuation(1, block(GET))], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['an even stream id', [F.headers(2, GET)], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['a stream id below one opened', [F.headers(5, GET), F.headers(3, GET)], ['GOAWAY 5 PROTOCOL_ERROR']],
    ['DATA after END_STREAM (half closed)', [F.headers(1, GET), F.data(1, 'x')], ['RST_STREAM 1 STREAM_CLOSED']],
    ['HEADERS after END_STREAM', [F.headers(1, GET), F.headers(1, [':x', 'y'])], ['RST_STREAM 1 STREAM_CLOSED']],
    ['DATA after the peer\'s RST_STREAM', [F.headers(1, POST, C.END_HEADERS), F.rst(1), F.data(1, 'x')], ['RST_STREAM 1 STREAM_CLOSED']],
    ['HEADERS after the peer\'s RST_STREAM', [F.headers(1, POST, C.END_HEADERS), F.rst(1), F.headers(1, GET)], ['GOAWAY 1 STREAM_CLOSED']],
    ['a frame inside a header block', [F.headers(1, GET, 0), F.ping()], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['CONTINUATION on another stream', [F.headers(1, GET, 0), F.continuation(3, '')], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['PUSH_PROMISE from a client', [frame(C.PUSH_PROMISE, C.END_HEADERS, 1, Buffer.alloc(4))], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['HEADERS depending on itself', [frame(C.HEADERS, C.END_HEADERS | C.END_STREAM | C.PRIORITY_FLAG, 1,
      Buffer.concat([Buffer.from([0, 0, 0, 1, 15]), block(GET)]))], ['RST_STREAM 1 PROTOCOL_ERROR']],
    ['PRIORITY depending on itself', [F.priority(3, 3)], ['RST_STREAM 3 PROTOCOL_ERROR']],
    ['DATA on stream 0', [frame(C.DATA, 0, 0, Buffer.from('x'))], ['GOAWAY 0 PROTOCOL_ERROR']],
    ['HEADERS on stream 0', [frame(C.HEADERS, C.END_HEADERS, 0, block(GET))], ['GOAWAY 0 PROTOCOL_ERROR']]
  ]
  for (const [what, frames, expected] of cases) {
    const h = openServer()
    h.feed(...frames)
    t.same(h.described(), expected, what)
  }
  const h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS))
  h.conn.reset(h.r.streams[0])
  h.out()
  h.feed(F.data(1, 'late'), F.headers(1, [...GET]), F.windowUpdate(1, 5), F.rst(1))
  t.same(h.described(), [], 'frames on a stream lila reset are ignored, a header block still decoded')
  h.feed(F.priority(7, 1), F.headers(3, GET))
  t.same(h.events(), ['stream 1', 'closed 1', 'stream 3 es'], 'PRIORITY on an idle stream is fine; the connection goes on')
})

t.test('malformed requests: a stream error, the connection goes on (8.1.1, 8.2, 8.3)', async t => {
  const cases = [
    ['an upper-case name', [...GET, 'X-Upper', 'v']],
    ['a pseudo-header after a field', [':method', 'GET', 'x', 'y', ':scheme', 'http', ':path', '/']],
    ['an unknown pseudo-header', [...GET, ':foo', 'bar']],
    ['a response pseudo-header', [...GET, ':status', '200']],
    ['a repeated :path', [...GET, ':path', '/again']],
    ['no :path', [':method', 'GET', ':scheme', 'http']],
    ['no :method', [':scheme', 'http', ':path', '/']],
    ['an empty :path', [':method', 'GET', ':scheme', 'http', ':path', '']],
    ['Connection', [...GET, 'connection', 'keep-alive']],
    ['TE: gzip', [...GET, 'te', 'gzip']],
    ['a content-length of letters', [...GET, 'content-length', 'abc']],
    ['a value with a leading space', [...GET, 'x', ' v']],
    ['CONNECT with :path', [':method', 'CONNECT', ':scheme', 'http', ':path', '/', ':authority', 'a:1']],
    ['content-length 5 and no DATA', [...GET, 'content-length', '5']]
  ]
  for (const [what, list] of cases) {
    const h = openServer()
    h.feed(F.headers(1, list))
    t.same(h.described(), ['RST_STREAM 1 PROTOCOL_ERROR'], what)
    h.feed(F.headers(3, GET))
    t.same(h.events(), ['stream 3 es'], `${what}: the next stream is served`)
  }
  let h = openServer()
  h.feed(F.headers(1, [...POST, 'content-length', '3'], C.END_HEADERS), F.data(1, 'four'))
  t.same(h.described(), ['RST_STREAM 1 PROTOCOL_ERROR'], 'more DATA than content-length')
  h = openServer()
  h.feed(F.headers(1, [...POST, 'content-length', '5'], C.END_HEADERS), F.data(1, 'four'))
  t.same(h.described(), ['RST_STREAM 1 PROTOCOL_ERROR'], 'less DATA than content-length')
  t.same(h.events(), ['stream 1', 'closed 1', 'reset 1 PROTOCOL_ERROR'])
  h = openServer()
  h.feed(F.headers(1, [':method', 'CONNECT', ':authority', 'a:1'], C.END_HEADERS))
  t.same(h.events(), ['stream 1'], 'a well-formed CONNECT is the exchange\'s to refuse')
  h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS), F.data(1, 'body', 0), F.headers(1, ['x-check', 'ok', 'x-other', '1']))
  t.same(h.events(), ['stream 1', 'data 1 4', 'trailers 1 x-check:ok:x-other:1'], 'trailers')
  h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS), F.headers(1, ['x-check', 'ok'], C.END_HEADERS))
  t.same(h.described(), ['RST_STREAM 1 PROTOCOL_ERROR'], 'trailers that do not end the stream')
})

t.test('padding and CONTINUATION', async t => {
  const h = openServer()
  const padded = Buffer.concat([Buffer.from([3]), block(POST), Buffer.alloc(3)])
  h.feed(frame(C.HEADERS, C.END_HEADERS | C.PADDED, 1, padded))
  h.feed(frame(C.DATA, C.PADDED | C.END_STREAM, 1, Buffer.concat([Buffer.from([4]), Buffer.from('abc'), Buffer.alloc(4)])))
  t.same(h.events(), ['stream 1', 'data 1 3 es'])
  t.equal(h.r.bodies.get(1).toString(), 'abc')
  const list = [...GET, 'x-long', 'y'.repeat(100)]
  const b = block(list)
  h.feed(frame(C.HEADERS, C.END_STREAM, 3, b.subarray(0, 10)), F.continuation(3, b.subarray(10, 50), 0),
    F.continuation(3, b.subarray(50)))
  t.same(h.events(), ['stream 3 es'], 'a block in three frames')
  t.equal(h.r.heads[1].fields[2], 'y'.repeat(100))
  for (const [what, bytes, expected] of [
    ['HEADERS padding past the frame', frame(C.HEADERS, C.END_HEADERS | C.PADDED, 5, Buffer.concat([Buffer.from([200]), block(GET)])), 'GOAWAY 0 PROTOCOL_ERROR'],
    ['DATA padding past the frame', Buffer.concat([F.headers(5, POST, C.END_HEADERS), frame(C.DATA, C.PADDED, 5, Buffer.from([5, 1, 2]))]), 'GOAWAY 5 PROTOCOL_ERROR']
  ]) {
    const h = openServer()
    h.feed(bytes)
    t.same(h.described(), [expected], what)
  }
})

t.test('SETTINGS: values checked, unknown ones ignored, the ack', async t => {
  const cases = [
    ['ENABLE_PUSH 2', [C.SETTINGS_ENABLE_PUSH, 2], 'GOAWAY 0 PROTOCOL_ERROR'],
    ['INITIAL_WINDOW_SIZE past 2^31-1', [C.SETTINGS_INITIAL_WINDOW_SIZE, 2 ** 31], 'GOAWAY 0 FLOW_CONTROL_ERROR'],
    ['MAX_FRAME_SIZE under 16,384', [C.SETTINGS_MAX_FRAME_SIZE, 16383], 'GOAWAY 0 PROTOCOL_ERROR'],
    ['MAX_FRAME_SIZE past 2^24-1', [C.SETTINGS_MAX_FRAME_SIZE, 2 ** 24], 'GOAWAY 0 PROTOCOL_ERROR'],
    ['an unknown setting', [0xff, 1], 'SETTINGS 0 ack']
  ]
  for (const [what, pairs, expected] of cases) {
    const h = openServer()
    h.feed(F.settings(pairs))
    t.same(h.described(), [expected], what)
  }
  const h = openServer()
  h.feed(frame(C.SETTINGS, 0, 1, Buffer.alloc(0)))
  t.same(h.described(), ['GOAWAY 0 PROTOCOL_ERROR'], 'SETTINGS on a stream')
  const big = openServer({}, [C.SETTINGS_MAX_FRAME_SIZE, 20000])
  big.feed(F.headers(1, GET))
  big.conn.headers(big.r.streams[0], [':status', '200'], false)
  big.conn.write(big.r.streams[0], Buffer.alloc(30000), true)
  t.same(big.described(), ['HEADERS 1', 'DATA 1 20000', 'DATA 1 es 10000'], 'DATA framed to the peer\'s MAX_FRAME_SIZE')
  const headers = openServer()
  headers.feed(F.headers(1, GET))
  headers.conn.headers(headers.r.streams[0], [':status', '200', 'x-big', 'z'.repeat(40000)], true)
  t.same(headers.described(), ['HEADERS 1 es', 'CONTINUATION 1', 'CONTINUATION 1'], 'a header block past a frame')
})

t.test('flow control, receiving: windows given back as the handler takes, held while paused', async t => {
  const h = openServer({ initialWindowSize: 1000, connectionWindow: 65535 })
  h.out()
  h.feed(F.headers(1, POST, C.END_HEADERS))
  const s = h.r.streams[0]
  h.feed(F.data(1, Buffer.alloc(400), 0))
  t.same(h.described(), [], 'under half the window: nothing yet')
  h.feed(F.data(1, Buffer.alloc(200), 0))
  t.same(h.described(), ['WINDOW_UPDATE 1 +600'], 'half the window taken: given back')
  h.conn.pause(s)
  h.feed(F.data(1, Buffer.alloc(900), 0))
  t.same(h.described(), [], 'paused: nothing given back')
  h.feed(F.data(1, Buffer.alloc(101), 0))
  t.same(h.described(), ['RST_STREAM 1 FLOW_CONTROL_ERROR'], 'past the stream window: the peer broke it')
  const g = openServer({ initialWindowSize: 1000, connectionWindow: 65535 })
  g.feed(F.headers(1, POST, C.END_HEADERS))
  g.conn.pause(g.r.streams[0])
  g.feed(F.data(1, Buffer.alloc(1000), 0))
  g.out()
  g.conn.resume(g.r.streams[0])
  t.same(g.described(), ['WINDOW_UPDATE 1 +1000'], 'resumed: what came meanwhile is given back')
  // A handler that cannot pass on the chunk it was just given pauses: that chunk waits too.
  const p = openServer({ initialWindowSize: 1000, connectionWindow: 65535 })
  p.feed(F.headers(1, POST, C.END_HEADERS))
  const onData = p.r.handler.onData
  p.r.handler.onData = (s, chunk, end) => { onData(s, chunk, end); p.conn.pause(s) }
  p.feed(F.data(1, Buffer.alloc(600), 0))
  t.same(p.described(), [], 'paused inside onData: the chunk is not given back')
  p.r.handler.onData = onData
  p.conn.resume(p.r.streams[0])
  t.same(p.described(), ['WINDOW_UPDATE 1 +600'], 'until resumed')
  const c = openServer({ initialWindowSize: 65535, connectionWindow: 65535 })
  c.feed(...[1, 3, 5].map(id => F.headers(id, POST, C.END_HEADERS)))
  for (const s of c.r.streams) c.conn.pause(s)
  c.feed(F.data(1, Buffer.alloc(16384), 0), F.data(3, Buffer.alloc(16384), 0))
  t.same(c.described(), ['WINDOW_UPDATE 0 +32768'], 'the connection window is given back as DATA arrives, paused streams or not')
  c.feed(...Array.from({ length: 4 }, () => F.data(5, Buffer.alloc(16384), 0)))
  t.same(c.described(), ['WINDOW_UPDATE 0 +32768', 'WINDOW_UPDATE 0 +32768', 'RST_STREAM 5 FLOW_CONTROL_ERROR'], 'each stream held to its own window')
  t.same(c.events().slice(-2), ['closed 5', 'reset 5 FLOW_CONTROL_ERROR'])
})

t.test('flow control, sending: the peer\'s windows, a queue, drain', async t => {
  const h = openServer({}, [C.SETTINGS_INITIAL_WINDOW_SIZE, 10])
  h.feed(F.headers(1, GET), F.headers(3, GET))
  const [s, other] = h.r.streams
  h.conn.headers(s, [':status', '200'], false)
  t.equal(h.conn.write(s, Buffer.from('0123456789abcdef'), false), false, 'past the window: wait')
  t.equal(h.conn.write(s, Buffer.from('ghij'), false), false, 'still waiting: queued')
  t.same(h.described(), ['HEADERS 1', 'DATA 1 10'])
  h.feed(F.windowUpdate(1, 5))
  t.same(h.described(), ['DATA 1 5'])
  t.same(h.events(), ['stream 1 es', 'stream 3 es'])
  h.feed(F.windowUpdate(1, 100))
  t.same(h.described(), ['DATA 1 1', 'DATA 1 4'], 'the queue, in order')
  t.same(h.events(), ['drain 1'], 'then the writer may go on')
  t.equal(h.conn.write(s, Buffer.from('end'), true), true)
  t.same(h.events(), ['closed 1'])
  h.conn.headers(other, [':status', '200'], false)
  h.out()
  t.equal(h.conn.write(other, Buffer.alloc(20), true), false)
  h.feed(F.windowUpdate(3, 10))
  t.same(h.described(), ['DATA 3 10', 'DATA 3 es 10'])
  t.same(h.events(), ['closed 3'], 'ended: no drain')
})

t.test('flow control, sending: END_STREAM and trailers wait behind queued DATA', async t => {
  const h = openServer({}, [C.SETTINGS_INITIAL_WINDOW_SIZE, 10])
  h.feed(F.headers(1, GET))
  const s = h.r.streams[0]
  h.conn.headers(s, [':status', '200'], false)
  h.conn.write(s, Buffer.alloc(25), false)
  h.conn.headers(s, ['x-trailer', 'yes'], true)
  t.same(h.described(), ['HEADERS 1', 'DATA 1 10'])
  h.feed(F.windowUpdate(1, 100))
  const out = h.out()
  t.same(out.map(f => f.type === C.DATA ? `DATA ${f.payload.length}` : f.list.join(':')), ['DATA 15', 'x-trailer:yes'])
  t.equal(out[1].flags & C.END_STREAM, C.END_STREAM, 'the trailers end it')
  t.same(h.events(), ['stream 1 es', 'closed 1'])
  const e = openServer({}, [C.SETTINGS_INITIAL_WINDOW_SIZE, 0])
  e.feed(F.headers(1, GET))
  e.conn.headers(e.r.streams[0], [':status', '200'], false)
  t.equal(e.conn.write(e.r.streams[0], Buffer.alloc(0), true), true, 'an empty end needs no window')
  t.same(e.described(), ['HEADERS 1', 'DATA 1 es 0'])
})

t.test('flow control, sending: window updates and SETTINGS changes, their overflow', async t => {
  let h = openServer()
  h.feed(F.windowUpdate(0, 2 ** 31 - 1 - 65535 + 1))
  t.same(h.described(), ['GOAWAY 0 FLOW_CONTROL_ERROR'], 'the connection window past 2^31-1')
  h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS), F.windowUpdate(1, 2 ** 31 - 1))
  t.same(h.described(), ['RST_STREAM 1 FLOW_CONTROL_ERROR'], 'a stream window past 2^31-1')
  h = openServer()
  h.feed(F.windowUpdate(0, 0))
  t.same(h.described(), ['GOAWAY 0 PROTOCOL_ERROR'], 'a connection WINDOW_UPDATE of 0')
  h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS), F.windowUpdate(1, 0))
  t.same(h.described(), ['RST_STREAM 1 PROTOCOL_ERROR'], 'a stream WINDOW_UPDATE of 0')
  h = openServer({}, [C.SETTINGS_INITIAL_WINDOW_SIZE, 100])
  h.feed(F.headers(1, GET))
  const s = h.r.streams[0]
  h.conn.headers(s, [':status', '200'], false)
  h.conn.write(s, Buffer.alloc(300), true)
  t.same(h.described(), ['HEADERS 1', 'DATA 1 100'])
  h.feed(F.settings([C.SETTINGS_INITIAL_WINDOW_SIZE, 50]))
  t.equal(s.sendWindow, -50, 'a smaller initial window makes the window negative (6.9.2)')
  h.feed(F.settings([C.SETTINGS_INITIAL_WINDOW_SIZE, 400]))
  t.same(h.described(), ['SETTINGS 0 ack', 'SETTINGS 0 ack', 'DATA 1 es 200'], 'a larger one lets the queue go')
})

t.test('client: requests, responses (1xx too), trailers, stream limits and ids', async t => {
  const h = openClient({ maxStreamId: 5 }, [C.SETTINGS_MAX_CONCURRENT_STREAMS, 2])
  const handler = h.r.handler
  const a = h.conn.request(handler, GET, true)
  const b = h.conn.request(handler, POST, false)
  t.same([a.id, b.id], [1, 3])
  t.equal(h.conn.canOpen(), false, 'at the peer\'s SETTINGS_MAX_CONCURRENT_STREAMS')
  t.equal(h.conn.request(handler, GET, true), null)
  t.same(h.described(), ['HEADERS 1 es', 'HEADERS 3'])
  h.feed(F.headers(1, [':status', '103', 'link', '</a>'], C.END_HEADERS), F.headers(1, [':status', '200', 'content-length', '2'], C.END_HEADERS))
  h.feed(F.data(1, 'ok'))
  t.same(h.events(), ['head 1 103', 'head 1 200', 'data 1 2 es', 'closed 1'])
  t.match(h.r.heads[1], { status: 200, contentLength: 2, fields: ['content-length', 'content-length', '2'], version: 2 })
  t.equal(h.conn.canOpen(), true)
  const c = h.conn.request(handler, GET, true)
  t.equal(c.id, 5)
  t.equal(h.conn.canOpen(), false, 'the stream ids are spent (maxStreamId): the owner opens another connection')
  h.conn.write(b, Buffer.from('up'), true)
  h.feed(F.headers(3, [':status', '200'], C.END_HEADERS), F.headers(3, ['grpc-status', '0']))
  t.same(h.events(), ['head 3 200', 'trailers 3 grpc-status:0', 'closed 3'])
  h.feed(F.headers(5, [':status', '204']))
  t.same(h.events(), ['head 5 204 es', 'closed 5'])
  const head = openClient()
  head.conn.request(head.r.handler, [':method', 'HEAD', ':scheme', 'http', ':path', '/', ':authority', 'x'], true)
  head.conn.request(head.r.handler, GET, true)
  head.feed(F.headers(1, [':status', '200', 'content-length', '1000']), F.headers(3, [':status', '304', 'content-length', '5']))
  t.same(head.events(), ['head 1 200 es', 'closed 1', 'head 3 304 es', 'closed 3'],
    'an answer to HEAD, a 304: a content-length and no DATA (8.1.1)')
  head.conn.request(head.r.handler, GET, true)
  head.feed(F.headers(5, [':status', '200', 'content-length', '5']))
  t.same(head.described(), ['HEADERS 1 es', 'HEADERS 3 es', 'HEADERS 5 es', 'RST_STREAM 5 PROTOCOL_ERROR'], 'but a 200 to GET may not')
  for (const [what, frames, expected] of [
    ['DATA before the response', [F.data(1, 'x')], 'RST_STREAM 1 PROTOCOL_ERROR'],
    ['a response without :status', [F.headers(1, ['x', 'y'])], 'RST_STREAM 1 PROTOCOL_ERROR'],
    ['a 1xx that ends the stream', [F.headers(1, [':status', '100'])], 'RST_STREAM 1 PROTOCOL_ERROR'],
    ['a request pseudo-header in a response', [F.headers(1, [':status', '200', ':path', '/'])], 'RST_STREAM 1 PROTOCOL_ERROR'],
    ['HEADERS on a stream lila never opened', [F.headers(3, [':status', '200'])], 'GOAWAY 0 PROTOCOL_ERROR'],
    ['PUSH_PROMISE', [frame(C.PUSH_PROMISE, C.END_HEADERS, 1, Buffer.alloc(4))], 'GOAWAY 0 PROTOCOL_ERROR'],
    ['ENABLE_PUSH 1 from a server', [F.settings([C.SETTINGS_ENABLE_PUSH, 1])], 'GOAWAY 0 PROTOCOL_ERROR']
  ]) {
    const h = openClient()
    h.conn.request(h.r.handler, GET, true)
    h.out()
    h.feed(...frames)
    t.same(h.described(), [expected], what)
  }
})

t.test('client: GOAWAY lets streams under its last id finish, and refuses the rest', async t => {
  const h = openClient()
  const streams = [1, 2, 3].map(() => h.conn.request(h.r.handler, GET, true))
  h.out()
  h.feed(F.goaway(3))
  t.same(h.events(), ['closed 5', 'reset 5 REFUSED_STREAM', 'goaway 3 NO_ERROR'], 'above the last id: not processed, retry elsewhere')
  t.equal(h.conn.canOpen(), false)
  h.feed(F.headers(1, [':status', '200']), F.headers(3, [':status', '200']))
  t.same(h.events(), ['head 1 200 es', 'closed 1', 'head 3 200 es', 'closed 3', 'close NO_ERROR: the peer went away'])
  t.ok(h.closed)
  t.equal(streams.length, 3)
})

t.test('PING both ways; lila\'s own capped', async t => {
  const h = openClient({ maxPings: 2 })
  h.feed(F.ping('12345678'))
  const [ack] = h.out()
  t.same([ack.flags, ack.payload.toString()], [C.ACK, '12345678'], 'answered with the same bytes')
  t.equal(h.conn.ping(), true)
  t.equal(h.conn.ping(), true)
  t.equal(h.conn.ping(), false, 'no more than maxPings in flight')
  const pings = h.out()
  h.feed(F.ping(pings[0].payload, C.ACK))
  t.same(h.events(), ['ping ack'])
  h.feed(F.ping('whatever', C.ACK), F.ping('whatever', C.ACK))
  t.same(h.events(), ['ping ack'], 'acks beyond those sent are ignored')
  h.feed(frame(C.PING, 0, 1, Buffer.alloc(8)))
  t.same(h.described(), ['GOAWAY 0 PROTOCOL_ERROR'], 'PING on a stream')
})

t.test('server: concurrency, unknown frames, shutdown', async t => {
  let h = openServer({ maxConcurrentStreams: 2 })
  h.feed(F.headers(1, POST, C.END_HEADERS), F.headers(3, POST, C.END_HEADERS), F.headers(5, POST, C.END_HEADERS))
  t.same(h.described(), ['RST_STREAM 5 REFUSED_STREAM'], 'past SETTINGS_MAX_CONCURRENT_STREAMS')
  h.feed(frame(0xbb, 0xff, 0, Buffer.from('extension')), frame(0xbb, 0, 1, Buffer.alloc(3)))
  t.same(h.described(), [], 'unknown frame types are ignored')
  h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS))
  h.events()
  h.conn.shutdown()
  t.same(h.described(), ['GOAWAY 1 NO_ERROR'])
  h.feed(F.headers(3, GET))
  t.same(h.events(), [], 'a stream after lila\'s GOAWAY is ignored')
  h.feed(F.data(1, 'x'))
  h.conn.headers(h.r.streams[0], [':status', '200'], true)
  t.same(h.events(), ['data 1 1 es', 'closed 1', 'close NO_ERROR: done'], 'the last stream done, the connection ends')
  t.ok(h.closed)
})

t.test('the transport: congestion, drain, the connection\'s end', async t => {
  const h = openServer()
  h.feed(F.headers(1, GET), F.headers(3, GET))
  const [a, b] = h.r.streams
  h.conn.headers(a, [':status', '200'], false)
  h.conn.setCongested(true)
  t.equal(h.conn.write(a, Buffer.from('x'), false), false, 'congested: wait')
  t.equal(h.conn.write(b, Buffer.from('y'), false), false)
  h.conn.setCongested(false)
  t.same(h.events(), ['stream 1 es', 'stream 3 es', 'drain 1', 'drain 3'])
  h.conn.destroy('test')
  t.same(h.events(), ['reset 1 CLOSED', 'reset 3 CLOSED', 'close CLOSED: test'], 'the transport gone: every stream hears it')
  t.equal(h.conn.write(a, Buffer.from('x'), true), false, 'a write after that is dropped')
})

t.test('floods end the connection with ENHANCE_YOUR_CALM', async t => {
  const calm = (h, what) => {
    const out = h.described()
    t.equal(out[out.length - 1].startsWith('GOAWAY') && out[out.length - 1].endsWith('ENHANCE_YOUR_CALM'), true, what)
    t.ok(h.closed, `${what}: closed`)
  }
  let h = openServer()
  for (let i = 0; i < 300 && !h.closed; i++) h.feed(F.headers(1 + 2 * i, GET), F.rst(1 + 2 * i))
  calm(h, 'rapid reset (CVE-2023-44487)')
  h = openServer()
  h.feed(F.headers(1, GET, C.END_STREAM))
  for (let i = 0; i < 10000 && !h.closed; i++) h.feed(F.continuation(1, 'x'.repeat(100), 0))
  t.equal(h.closed, true, 'CONTINUATION flood (CVE-2024-27316): closed')
  h = openServer()
  for (let i = 0; i < 2000 && !h.closed; i++) h.feed(F.settings())
  calm(h, 'SETTINGS flood')
  h = openServer()
  for (let i = 0; i < 2000 && !h.closed; i++) h.feed(F.ping())
  calm(h, 'PING flood')
  h = openServer()
  h.feed(F.headers(1, POST, C.END_HEADERS))
  for (let i = 0; i < 2000 && !h.closed; i++) h.feed(F.data(1, '', 0))
  calm(h, 'empty DATA (CVE-2019-9518)')
  h = openServer()
  for (let i = 0; i < 2000 && !h.closed; i++) h.feed(F.priority(3, 1))
  calm(h, 'PRIORITY flood')
  h = openServer()
  for (let i = 0; i < 2000 && !h.closed; i++) h.feed(F.windowUpdate(0, 1))
  calm(h, 'WINDOW_UPDATE flood')
  h = openServer({ maxConcurrentStreams: 1 })
  h.feed(F.headers(1, POST, C.END_HEADERS))
  for (let i = 1; i < 300 && !h.closed; i++) h.feed(F.headers(1 + 2 * i, GET))
  calm(h, 'streams refused over and over')
  h = openServer({ maxControlBacklog: 100 })
  h.conn.setCongested(true)
  for (let i = 0; i < 150 && !h.closed; i++) h.feed(F.ping())
  calm(h, 'PINGs whose acks are never read')
  // The counters decay: the same frames spread over sweeps are fine.
  h = openServer()
  for (let i = 0; i < 10; i++) {
    for (let j = 0; j < 400; j++) h.feed(F.ping())
    h.conn.sweep()
  }
  t.equal(h.closed, false, '400 PINGs a sweep for 10 sweeps: not a flood')
  h = openServer()
  for (let i = 0; i < 300; i++) {
    h.feed(F.headers(1 + 2 * i, GET))
    if (i % 3 === 0) h.feed(F.rst(1 + 2 * i))
    else h.conn.headers(h.r.streams[i], [':status', '200'], true)
  }
  t.equal(h.closed, false, 'a third of 300 streams reset before their answer: not rapid reset')
  // A gRPC client: a BDP PING and window updates for every answer it reads.
  h = openServer()
  for (let i = 0; i < 3000 && !h.closed; i++) {
    const id = 1 + 2 * i
    h.feed(F.headers(id, POST, C.END_HEADERS), F.data(id, 'message'))
    const s = h.r.streams[h.r.streams.length - 1]
    h.conn.headers(s, [':status', '200'], false)
    h.conn.write(s, Buffer.from('answer'), false)
    h.conn.headers(s, ['grpc-status', '0'], true)
    h.feed(F.ping(), F.windowUpdate(0, 6), F.settings())
  }
  t.equal(h.closed, false, '3,000 calls, each with a PING, a WINDOW_UPDATE and a SETTINGS: not a flood')
})

t.test('an HPACK bomb: a header list past the limit is answered 431, never built', async t => {
  const h = openServer()
  // "b: vvv..." (4,000 bytes) into the table: a literal with indexing, then 16,000 references to it.
  const entry = Buffer.concat([Buffer.from([0x40, 1, 0x62, 0x7f, 0xa1, 0x1e]), Buffer.alloc(4000, 0x76)])
  const insert = frame(C.HEADERS, C.END_HEADERS | C.END_STREAM, 1, Buffer.concat([block(GET), entry]))
  h.feed(insert)
  const bomb = frame(C.HEADERS, C.END_HEADERS, 3, Buffer.concat([block(GET), Buffer.alloc(16000, 0xbe)]))
  h.feed(bomb)
  t.same(h.events(), ['stream 1 es'], 'the bomb never reaches the owner')
  t.ok(h.conn.inbound.decoder.listSize > 60e6, `what it would have decoded to: ${h.conn.inbound.decoder.listSize} bytes`)
  const out = h.out()
  t.same(out.map(f => f.list || f.code), [[':status', '431', 'content-length', '0'], C.NO_ERROR], '431, and the rest of the request refused')
  h.feed(F.data(3, 'late'), F.headers(5, GET))
  t.same(h.events(), ['stream 5 es'], 'the connection goes on')
  t.equal(h.r.heads[1].fields.length, 0)
})

t.test('an idle connection lets its output buffer go at a sweep, and takes a new one to write', async t => {
  const h = openServer()
  h.feed(F.headers(1, GET))
  const s = h.r.streams[0]
  h.conn.sweep() // the SETTINGS ack was written since the start: kept
  t.ok(h.conn.output.buf.length > 0, 'a buffer after writing')
  h.conn.sweep() // nothing written since
  t.equal(h.conn.output.buf.length, 0, 'no buffer once a sweep found nothing written')
  h.conn.headers(s, [':status', '200'], true)
  t.same(h.out().map(f => f.list), [[':status', '200']], 'the next frame goes out whole')
  t.ok(h.conn.output.buf.length > 0, 'in a new buffer')
  h.feed(F.headers(3, GET))
  h.conn.headers(h.r.streams[1], [':status', '204'], false)
  h.conn.sweep() // written since the last sweep, and waiting: kept
  t.ok(h.conn.output.buf.length > 0, 'a buffer with frames waiting is kept')
  t.same(h.out().map(f => f.list), [[':status', '204']])
})
