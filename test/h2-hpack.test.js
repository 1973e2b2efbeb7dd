'use strict'

// HPACK (lib/wire/h2/hpack.js, huffman.js) as pure functions: RFC 7541 Appendix C's
// examples decoded, lila's stateless encoder read back by the decoder, and what the
// decoder refuses or bounds.

const t = require('tap')
const { HpackDecoder, STATIC } = require('../lib/wire/h2/hpack')
const huffman = require('../lib/wire/h2/huffman')
const { COMPRESSION_ERROR } = require('../lib/wire/h2/constants')
const { encodeBlock: encode } = require('./fixtures/h2-frames')

const hex = text => Buffer.from(text.replace(/\s+/g, ''), 'hex')
const BIG = 1 << 30

function decode (decoder, bytes, maxListSize = BIG, maxFields = 1000) {
  return decoder.decode(bytes, 0, bytes.length, maxListSize, maxFields)
}

// The dynamic table as [name, value] pairs, newest first, and its size.
function table (d) {
  const out = []
  for (let k = 1; k <= d.count; k++) {
    const slot = (d.head - k + 1) & d.mask
    out.push([d.names[slot], d.values[slot]])
  }
  return out
}

t.test('RFC 7541 C.2: one representation of each kind', async t => {
  let d = new HpackDecoder()
  t.same(decode(d, hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572')), ['custom-key', 'custom-header'], 'C.2.1 literal with indexing')
  t.same(table(d), [['custom-key', 'custom-header']])
  t.equal(d.size, 55)
  d = new HpackDecoder()
  t.same(decode(d, hex('040c 2f73 616d 706c 652f 7061 7468')), [':path', '/sample/path'], 'C.2.2 literal without indexing')
  t.equal(d.count, 0)
  d = new HpackDecoder()
  t.same(decode(d, hex('1008 7061 7373 776f 7264 0673 6563 7265 74')), ['password', 'secret'], 'C.2.3 literal never indexed')
  t.equal(d.count, 0)
  d = new HpackDecoder()
  t.same(decode(d, hex('82')), [':method', 'GET'], 'C.2.4 indexed')
  t.equal(d.count, 0)
})

// C.3 and C.4: the same three requests, raw and Huffman; C.5 and C.6 three responses
// with a 256-byte table, raw and Huffman.
const REQUESTS = [
  [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com'],
  [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com', 'cache-control', 'no-cache'],
  [':method', 'GET', ':scheme', 'https', ':path', '/index.html', ':authority', 'www.example.com', 'custom-key', 'custom-value']
]
const REQUEST_SIZES = [57, 110, 164]
const RESPONSES = [
  [':status', '302', 'cache-control', 'private', 'date', 'Mon, 21 Oct 2013 20:13:21 GMT', 'location', 'https://www.example.com'],
  [':status', '307', 'cache-control', 'private', 'date', 'Mon, 21 Oct 2013 20:13:21 GMT', 'location', 'https://www.example.com'],
  [':status', '200', 'cache-control', 'private', 'date', 'Mon, 21 Oct 2013 20:13:22 GMT', 'location', 'https://www.example.com',
    'content-encoding', 'gzip', 'set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1']
]
const RESPONSE_SIZES = [222, 222, 215]
const RESPONSE_TABLES = [
  [['location', 'https://www.example.com'], ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'], ['cache-control', 'private'], [':status', '302']],
  [[':status', '307'], ['location', 'https://www.example.com'], ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'], ['cache-control', 'private']],
  [['set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1'], ['content-encoding', 'gzip'], ['date', 'Mon, 21 Oct 2013 20:13:22 GMT']]
]

const VECTORS = {
  'C.3 requests without Huffman': [4096, REQUESTS, REQUEST_SIZES, [
    '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
    '8286 84be 5808 6e6f 2d63 6163 6865',
    '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65']],
  'C.4 requests with Huffman': [4096, REQUESTS, REQUEST_SIZES, [
    '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
    '8286 84be 5886 a8eb 1064 9cbf',
    '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf']],
  'C.5 responses without Huffman': [256, RESPONSES, RESPONSE_SIZES, [
    '4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
    '4803 3330 37c1 c0bf',
    '88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31'],
  RESPONSE_TABLES],
  'C.6 responses with Huffman': [256, RESPONSES, RESPONSE_SIZES, [
    '4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3',
    '4883 640e ffc1 c0bf',
    '88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07'],
  RESPONSE_TABLES]
}

for (const [name, [limit, lists, sizes, blocks, tables]] of Object.entries(VECTORS)) {
  t.test(`RFC 7541 ${name}`, async t => {
    const d = new HpackDecoder(limit)
    blocks.forEach((block, i) => {
      t.same(decode(d, hex(block)), lists[i], `block ${i + 1}`)
      t.equal(d.size, sizes[i], `table size after block ${i + 1}`)
      if (tables) t.same(table(d), tables[i], `table after block ${i + 1} (evictions)`)
      t.equal(d.invalid, null)
    })
  })
}

t.test('Huffman: every byte value both ways; padding and EOS refused', async t => {
  let all = ''
  for (let c = 0; c < 256; c++) all += String.fromCharCode(c)
  const buf = Buffer.alloc(huffman.encodedLength(all))
  t.equal(huffman.encode(all, buf, 0), buf.length)
  t.equal(huffman.decode(buf, 0, buf.length), all, 'all 256 symbols round trip')
  t.equal(huffman.decode(hex('f1e3 c2e5 f23a 6ba0 ab90 f4ff'), 0, 12), 'www.example.com')
  t.equal(huffman.decode(Buffer.alloc(0), 0, 0), '')
  // '0' is 00000 (5 bits): 3 bits of one-padding are fine, zero bits are not.
  t.equal(huffman.decode(Buffer.from([0x07]), 0, 1), '0')
  t.equal(huffman.decode(Buffer.from([0x00]), 0, 1), null, 'padding that is not EOS\'s ones')
  t.equal(huffman.decode(Buffer.from([0x07, 0xff]), 0, 2), null, 'padding of 8 bits or more (11 here)')
  t.equal(huffman.decode(Buffer.from([0xff, 0xff, 0xff, 0xfc]), 0, 4), null, 'EOS itself (30 ones)')
})

t.test('the stateless encoder: what the decoder reads back, and its bytes', async t => {
  const list = [':method', 'GET', ':scheme', 'http', ':path', '/p?q', ':authority', 'example.test',
    'user-agent', 'h2load', 'x-custom', 'v\xe9', 'accept-encoding', 'gzip, deflate', ':status', '503']
  const d = new HpackDecoder()
  t.same(decode(d, encode(list)), list, 'round trip, latin1 kept')
  t.equal(d.count, 0, 'nothing enters the peer\'s table')
  t.same([...encode([':method', 'GET', ':path', '/', ':scheme', 'https', ':status', '404'])], [0x82, 0x84, 0x87, 0x8d],
    'full static matches are one byte each')
  t.same([...encode(['content-type', 'a'])], [0x0f, 0x10, 0x01, 0x61], 'a static name (31) by index, its value raw')
  const long = 'x'.repeat(300)
  t.same(decode(new HpackDecoder(), encode(['x-long', long])), ['x-long', long], 'lengths past the 7-bit prefix')
  t.equal(STATIC.length, 62)
})

t.test('what the decoder refuses (COMPRESSION_ERROR)', async t => {
  const cases = {
    'index 0': '80',
    'an index past both tables': 'be',
    'a truncated string': '4003 6162',
    'a truncated integer': '7f',
    'an integer over 2^28': '7f ff ff ff ff 0f',
    'a table size update after a field': '82 3f e1 1f',
    'a table size over the limit': '3f e2 1f', // 4097
    'an invalid Huffman string': '0081 00 0161'
  }
  for (const [what, bytes] of Object.entries(cases)) {
    t.throws(() => decode(new HpackDecoder(), hex(bytes)), { code: COMPRESSION_ERROR }, what)
  }
  const d = new HpackDecoder()
  t.same(decode(d, hex('3fe1 1f 20 82')), [':method', 'GET'], 'size updates (4096, then 0) at the start')
  t.equal(d.max, 0)
  t.same(decode(d, hex('4001 6101 62')), ['a', 'b'], 'an entry bigger than the table leaves it empty')
  t.equal(d.count, 0)
})

t.test('fields that are not valid HTTP/2 are flagged, once per entry', async t => {
  const d = new HpackDecoder()
  decode(d, hex('4001 4101 62')) // "A: b", inserted
  t.match(d.invalid, /invalid field name "A"/)
  decode(d, hex('be'))
  t.match(d.invalid, /invalid field name "A"/, 'a reference to the entry is still invalid')
  decode(d, hex('0001 6103 2062 20'))
  t.match(d.invalid, /invalid value in field a/, 'a value with spaces around it')
  decode(d, hex('0001 6103 6200 63'))
  t.match(d.invalid, /invalid value in field a/, 'NUL in a value')
  decode(d, hex('0001 6103 620d 63'))
  t.match(d.invalid, /invalid value/, 'CR in a value')
  decode(d, hex('0001 6103 6209 63'))
  t.equal(d.invalid, null, 'a tab inside a value is fine')
  decode(d, hex('0001 3a00'))
  t.match(d.invalid, /invalid field name ":"/)
})

t.test('limits: a list past them is counted, not kept; the table still follows', async t => {
  // An HPACK bomb: a 4,000-byte entry, then 10,000 one-byte references to it.
  const d = new HpackDecoder()
  const value = 'v'.repeat(4000)
  const insert = Buffer.concat([hex('4001 62 7f a1 1e'), Buffer.from(value)]) // "b", 4000 bytes (127 + 3873)
  t.same(decode(d, insert, 64 * 1024, 128), ['b', value])
  const bomb = Buffer.alloc(10000, 0xbe)
  const list = decode(d, bomb, 64 * 1024, 128)
  t.same(list, [], 'nothing kept past the list size')
  t.equal(d.overflow, true)
  t.equal(d.listSize, 10000 * (1 + 4000 + 32), 'the size it would have had')
  t.same(decode(d, hex('82be'), 64 * 1024, 128), [':method', 'GET', 'b', value], 'the next block decodes against the same table')
  t.equal(d.overflow, false)
  const many = decode(new HpackDecoder(), Buffer.alloc(200, 0x82), BIG, 128)
  t.same(many, [], 'past 128 fields')
})
