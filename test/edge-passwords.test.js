'use strict'

// Passwords at the edge (--basic-auth, --status-basic-auth): bcrypt, MD5-crypt, SHA-crypt
// and {SHA}, each checked against what Apache's own htpasswd writes; the htpasswd file's
// lines and errors; the credentials remembered as HMACs, never in clear.

const t = require('tap')
const crypto = require('crypto')
const { parseBcrypt, formatBcrypt, bcryptWork, bcryptDigest, PI_HEX } = require('../lib/proxy/edge/bcrypt')
const { parseApr1, apr1Work } = require('../lib/proxy/edge/apr1')
const { parseShaCrypt, shaCryptWork } = require('../lib/proxy/edge/sha-crypt')
const { parsePasswords } = require('../lib/proxy/edge/passwords')
const { BasicAuth, credentialsOf, REMEMBERED, CHECKING } = require('../lib/proxy/edge/basic-auth')
const { tool } = require('./fixtures/tools')
const { htpasswdLine } = require('./fixtures/htpasswd')

const HTPASSWD = tool('htpasswd')

// `htpasswd -nb FLAGS user password` -> the hash; a test asks HTPASSWD.skip first.
const htpasswd = (flags, user, password) => htpasswdLine(user, password, flags).slice(user.length + 1)

const run = work => {
  for (let i = 0; i < work.rounds; i++) work.round()
  return work.result()
}

const PASSWORDS = ['s3cr3t', '', 'x', 'pässwörd ünïcode', 'a'.repeat(71), 'b'.repeat(72), 'c'.repeat(100), 'with:colon and spaces']

t.test('Blowfish\'s boxes are the digits of pi', async t => {
  // pi by Machin's formula, 1042 words after the point
  const bits = BigInt(1042 * 32 + 64)
  const one = 1n << bits
  const arctanInv = x => {
    const x2 = BigInt(x * x)
    let term = one / BigInt(x)
    let sum = term
    for (let n = 1n, sign = -1n; ; n++, sign = -sign) {
      term /= x2
      const next = term / (2n * n + 1n)
      if (next === 0n) return sum
      sum += sign * next
    }
  }
  const pi = 16n * arctanInv(5) - 4n * arctanInv(239)
  t.equal(PI_HEX, ((pi - 3n * one) >> 64n).toString(16).padStart(1042 * 8, '0'))
  t.equal(PI_HEX.slice(0, 8), '243f6a88', 'P[0]')
  t.equal(PI_HEX.slice(18 * 8, 19 * 8), 'd1310ba6', 'S0[0]')
})

t.test('bcrypt: the hashes htpasswd -B writes, at several costs', async t => {
  if (HTPASSWD.skip) return t.skip(HTPASSWD.skip)
  for (const cost of [4, 5, 6]) {
    for (const password of PASSWORDS) {
      const hash = htpasswd(['-B', '-C', String(cost)], 'alice', password)
      const parsed = parseBcrypt(hash)
      t.equal(parsed.cost, cost)
      t.equal(formatBcrypt(cost, parsed.salt, run(bcryptWork(parsed, password)), parsed.prefix), hash, `cost ${cost}, ${JSON.stringify(password)}`)
      t.notOk(run(bcryptWork(parsed, '!' + password)).equals(parsed.expected), 'another password, another hash')
    }
  }
})

t.test('bcrypt: known answers ($2a$, $2b$, the 72-byte cut)', async t => {
  // OpenBSD's and the original paper's published vectors
  const vectors = [
    ['', '$2a$06$DCq7YPn5Rq63x1Lad4cll.TV4S6ytwfsfvkgY8jIucDrjc8deX1s.'],
    ['a', '$2a$06$m0CrhHm10qJ3lXRY.5zDGO3rS2KdeeWLuGmsfGlMfOxih58VYVfxe'],
    ['abc', '$2a$06$If6bvum7DFjUnE9p2uDeDu0YHzrHM6tf.iqN8.yx.jNN1ILEf7h0i'],
    ['abcdefghijklmnopqrstuvwxyz', '$2a$06$.rCVZVOThsIa97pEDOxvGuRRgzG64bvtJ0938xuqzv18d3ZpQhstC'],
    ['~!@#$%^&*()      ~!@#$%^&*()PNBFRD', '$2a$06$fPIsBO8qRqkjj273rfaOI.HtSV9jLDpTbZn782DC6/t7qT67P6FfO']
  ]
  for (const [password, hash] of vectors) {
    const parsed = parseBcrypt(hash)
    t.equal(formatBcrypt(6, parsed.salt, bcryptDigest(password, parsed.salt, 6), '2a'), hash, JSON.stringify(password))
  }
  const salt = Buffer.alloc(16, 7)
  t.same(bcryptDigest('x'.repeat(72), salt, 4), bcryptDigest('x'.repeat(72) + 'ignored', salt, 4), 'past 72 bytes, nothing counts')
  t.notSame(bcryptDigest('x'.repeat(71), salt, 4), bcryptDigest('x'.repeat(71) + 'y', salt, 4), 'the 72nd byte counts')
  for (const bad of ['$2y$03$' + 'a'.repeat(53), '$2y$05$' + 'a'.repeat(52), '$2x$05$' + 'a'.repeat(53), '$2y$05$' + '!'.repeat(53)]) {
    t.equal(parseBcrypt(bad), null, bad)
  }
})

t.test('$apr1$: the hashes htpasswd -m writes', async t => {
  if (HTPASSWD.skip) return t.skip(HTPASSWD.skip)
  for (const password of PASSWORDS) {
    const parsed = parseApr1(htpasswd(['-m'], 'alice', password))
    t.ok(run(apr1Work(parsed, password)).equals(parsed.expected), JSON.stringify(password))
    t.notOk(run(apr1Work(parsed, password + 'x')).equals(parsed.expected))
  }
  // Apache's documented example
  const parsed = parseApr1('$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/')
  t.ok(run(apr1Work(parsed, 'myPassword')).equals(parsed.expected), 'httpd\'s docs: myPassword')
})

t.test('$5$ and $6$: the hashes htpasswd -2 and -5 write, rounds= too', async t => {
  if (HTPASSWD.skip) return t.skip(HTPASSWD.skip)
  for (const flags of [['-2'], ['-5'], ['-2', '-r', '1000'], ['-5', '-r', '7777']]) {
    for (const password of PASSWORDS.slice(0, 4)) {
      const parsed = parseShaCrypt(htpasswd(flags, 'alice', password))
      t.ok(run(shaCryptWork(parsed, password)).equals(parsed.expected), `${flags.join(' ')} ${JSON.stringify(password)}`)
    }
  }
  // glibc's test vectors (the spec's)
  const p = parseShaCrypt('$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5')
  t.ok(run(shaCryptWork(p, 'Hello world!')).equals(p.expected), 'sha256 vector')
  const q = parseShaCrypt('$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v.')
  t.ok(run(shaCryptWork(q, 'Hello world!')).equals(q.expected), 'sha512 vector, rounds=10000, the salt cut to 16')
})

const file = (t, lines) => parsePasswords(lines.join('\n') + '\n', 'users')

t.test('an htpasswd file: every hash htpasswd writes, comments, and each user checked', async t => {
  if (HTPASSWD.skip) return t.skip(HTPASSWD.skip)
  const users = { bea: ['-B'], max: ['-m'], sha: ['-s'], two: ['-2'], five: ['-5'] }
  const lines = ['# users of the admin pages', '']
  for (const [user, flags] of Object.entries(users)) lines.push(`${user}:${htpasswd(flags, user, `${user}-pw`)}`)
  const passwords = file(t, lines)
  t.equal(passwords.size, 5)
  for (const user of Object.keys(users)) {
    t.equal(await passwords.verify(user, `${user}-pw`), true, `${user} with the right password`)
    t.equal(await passwords.verify(user, `${user}-PW`), false, `${user} with a wrong one`)
  }
  t.equal(await passwords.verify('nobody', 'bea-pw'), false, 'a user not in the file')
  t.equal(await passwords.verify('be', 'a-pw'), false)
})

t.test('an htpasswd file: what is refused, with its line', async t => {
  const bad = [
    [['alice:plain'], 'users: line 1: user "alice" has no hash it reads (crypt and plain text are refused): expected user:hash with a hash of htpasswd -B (bcrypt), -m ($apr1$), -2 or -5 ($5$, $6$) or -s ({SHA})'],
    [['# x', 'bob:nR/7PN.XMBRyw'], 'users: line 2: user "bob" has no hash it reads (crypt and plain text are refused): expected user:hash with a hash of htpasswd -B (bcrypt), -m ($apr1$), -2 or -5 ($5$, $6$) or -s ({SHA})'],
    [['carol:$argon2id$v=19$x'], 'users: line 1: user "carol" has a hash lila does not read (crypt and plain text are refused): expected user:hash with a hash of htpasswd -B (bcrypt), -m ($apr1$), -2 or -5 ($5$, $6$) or -s ({SHA})'],
    [['no colon here'], 'users: line 1: no "user:" at the start: expected user:hash with a hash of htpasswd -B (bcrypt), -m ($apr1$), -2 or -5 ($5$, $6$) or -s ({SHA})'],
    [['a:{SHA}JauGvtFJymypwcDV23yakTiN3qs=', 'a:{SHA}JauGvtFJymypwcDV23yakTiN3qs='], 'users: line 2: user "a" appears twice: expected each user once'],
    [['# only a comment'], 'users: no user in it: expected user:hash with a hash of htpasswd -B (bcrypt), -m ($apr1$), -2 or -5 ($5$, $6$) or -s ({SHA}), e.g. htpasswd -B users alice']
  ]
  for (const [lines, message] of bad) t.throws(() => file(t, lines), { name: 'UsageError', message }, lines.join(' | '))
  const crlf = parsePasswords('a:{SHA}JauGvtFJymypwcDV23yakTiN3qs=\r\n\r\n', 'users')
  t.equal(await crlf.verify('a', 's3cr3t'), true, 'CRLF line ends')
})

t.test('a password of many rounds is checked in slices: other work runs meanwhile', async t => {
  // bcrypt at cost 10: ~100 ms of work in slices of ~2 ms
  const salt = crypto.randomBytes(16)
  const hash = formatBcrypt(10, salt, bcryptDigest('pw', salt, 10))
  const passwords = parsePasswords(`alice:${hash}\n`, 'users')
  let turns = 0
  let done = false
  const verified = passwords.verify('alice', 'pw').then(ok => { done = true; return ok })
  const counting = new Promise(resolve => {
    const tick = () => {
      if (done) return resolve()
      turns++
      setImmediate(tick)
    }
    tick()
  })
  t.equal(await verified, true)
  await counting
  t.ok(turns >= 10, `the event loop turned ${turns} times during the check`)
})

const basic = (user, password) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`

t.test('Basic credentials: the Authorization forms read', async t => {
  t.equal(credentialsOf('Basic YTpi'), 'YTpi')
  t.equal(credentialsOf('basic   YTpi  '), 'YTpi', 'the scheme in any case, spaces around')
  t.equal(credentialsOf('BASIC YTpi'), 'YTpi')
  for (const none of [undefined, '', 'Bearer YTpi', 'Basic', 'Basic ', 'Basic YT pi', 'Basic Y*pi', 'Digest x']) {
    t.equal(credentialsOf(none), null, JSON.stringify(none))
  }
})

t.test('BasicAuth: a password checked once, remembered as an HMAC, never in clear', async t => {
  const salt = crypto.randomBytes(16)
  const passwords = parsePasswords(`alice:${formatBcrypt(4, salt, bcryptDigest('right', salt, 4))}\n`, 'users')
  let verifications = 0
  const verify = passwords.verify.bind(passwords)
  passwords.verify = (...args) => { verifications++; return verify(...args) }
  const auth = new BasicAuth(passwords, { realm: 'lila' })
  t.equal(auth.challenge, 'Basic realm="lila", charset="UTF-8"')
  t.equal(auth.check(undefined), 'missing')
  t.equal(auth.check('Bearer x'), 'missing')
  const first = auth.check(basic('alice', 'right'))
  t.type(first, Promise, 'the first time: checked')
  t.equal(await first, 'ok')
  t.equal(auth.check(basic('alice', 'right')), 'ok', 'then remembered: no promise, no check')
  t.equal(await auth.check(basic('alice', 'wrong')), 'bad')
  t.equal(auth.check(basic('alice', 'wrong')), 'bad', 'wrong credentials remembered too')
  t.equal(verifications, 2, 'two checks for four requests')
  t.equal(auth.check(`Basic ${Buffer.from('no colon').toString('base64')}`), 'bad')
  const kept = JSON.stringify([...auth.good.keys(), ...auth.bad])
  for (const secret of ['right', 'wrong', Buffer.from('alice:right').toString('base64')]) t.notMatch(kept, secret, `${secret} is not kept`)
  const other = new BasicAuth(passwords, { realm: 'lila' })
  await other.check(basic('alice', 'right'))
  t.notSame([...other.good.keys()], [...auth.good.keys()], 'each object its own key')
})

t.test('BasicAuth: bounded memories and checks', async t => {
  const passwords = { verify: () => new Promise(() => {}) } // never done
  const auth = new BasicAuth(passwords, { realm: 'r' })
  const pending = []
  for (let i = 0; i < CHECKING; i++) pending.push(auth.check(basic('u', `p${i}`)))
  t.equal(await auth.check(basic('u', 'one more')), 'busy', `past ${CHECKING} checks under way: busy`)
  const fast = new BasicAuth({ verify: async (user, password) => password.startsWith('good') }, { realm: 'r' })
  for (let i = 0; i < REMEMBERED + 10; i++) await fast.check(basic('u', `good${i}`))
  t.equal(fast.good.size, REMEMBERED, 'at most REMEMBERED kept')
  t.type(fast.check(basic('u', 'good0')), Promise, 'the oldest forgotten')
  t.equal(fast.check(basic('u', `good${REMEMBERED + 9}`)), 'ok', 'the newest kept')
})
