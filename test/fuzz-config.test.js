'use strict'

// Hostile config files: thousands of generated JSON documents (mostly plausible
// configs with something wrong, some broken JSON), each of which must end in a config
// or a one-line UsageError that starts with the file's name, never another exception.
//   CONFIG_CASES=50000 CONFIG_SEED=7 npx tap test/fuzz-config.test.js   (a longer run)

const t = require('tap')
const { parseConfigFile } = require('../lib/config/file')
const { OPTIONS } = require('../lib/config/options')
const { MODES } = require('../lib/upstream/balancers')
const { prng } = require('./fixtures/http-fuzz')

const CASES = Number(process.env.CONFIG_CASES || 4000)
const SEED = Number(process.env.CONFIG_SEED || 1)

const KEYS = [...OPTIONS.map(o => o.name), 'mode', 'backends', 'certificates', 'listeners', 'name', '__proto__', 'constructor', '', 'Port', 'cert', 'key']
const STRINGS = [
  '', '3s', '500ms', '0s', '24d', '1e3ms', 'tcp', 'http', 'udp', 'http:/health', 'http:', 'none', 'auto', 'v1', 'v2', 'info', 'loud',
  // eslint-disable-next-line no-template-curly-in-string -- a literal "${HOME}" is one of the values
  ':9001', '127.0.0.1:9001,weight=3', '[::1]:80', 'x', 'a.pem', '\u0000', '\n', 'é', '${HOME}', '../../etc/passwd', '1.25', '80', 'rr', 'uri-hash',
  'x'.repeat(300)
]

function generate (rand) {
  const pick = list => list[Math.floor(rand() * list.length)]
  const value = depth => {
    const r = rand()
    if (depth > 3 || r < 0.3) return pick(STRINGS)
    if (r < 0.45) return pick([0, 1, -1, 80, 65536, 1.5, 1e21, 3000, 0.1, -0])
    if (r < 0.55) return pick([true, false, null])
    if (r < 0.75) return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1))
    return object(depth + 1)
  }
  const object = depth => {
    const out = {}
    const n = Math.floor(rand() * 5)
    for (let i = 0; i < n; i++) out[pick(KEYS)] = value(depth)
    return out
  }
  // A plausible config to start from, then changes to it.
  const listener = () => {
    const l = { port: Math.floor(rand() * 3), backends: [':9001', ':9002,weight=2'].slice(0, 1 + Math.floor(rand() * 2)) }
    if (rand() < 0.5) l.mode = pick(MODES.map(m => m.name))
    if (rand() < 0.3) l.protocol = pick(['tcp', 'http'])
    if (rand() < 0.3) l.name = pick(['a', 'b', 'web', 'x y'])
    return l
  }
  const doc = { listeners: Array.from({ length: 1 + Math.floor(rand() * 3) }, listener) }
  const mutations = Math.floor(rand() * 4)
  for (let i = 0; i < mutations; i++) {
    const target = rand() < 0.4 || !Array.isArray(doc.listeners) ? doc : pick(doc.listeners)
    if (target === undefined || target === null || typeof target !== 'object') continue
    const r = rand()
    if (r < 0.6) target[pick(KEYS)] = value(0)
    else if (r < 0.8) delete target[pick(Object.keys(target))]
    else if (Array.isArray(target.backends)) target.backends.push(value(2))
  }
  let text = JSON.stringify(doc, null, rand() < 0.5 ? 2 : 0)
  // Broken JSON now and then: cut, a byte changed, a key repeated, deep nesting.
  const r = rand()
  if (r < 0.08) text = text.slice(0, Math.floor(rand() * text.length))
  else if (r < 0.16) {
    const at = Math.floor(rand() * text.length)
    text = text.slice(0, at) + pick(['"', '}', ']', ',', ':', '\\', '\u0001', 'x', '\n', '0']) + text.slice(at + 1)
  } else if (r < 0.2) text = text.replace('{', '{"port": 1, "port": 2, ')
  else if (r < 0.22) text = '['.repeat(Math.floor(rand() * 200)) + text
  return text
}

t.test(`${CASES} generated config files (seed ${SEED})`, async t => {
  const rand = prng(SEED)
  const problems = []
  const tally = { config: 0, usage: 0 }
  for (let i = 0; i < CASES; i++) {
    const text = generate(rand)
    try {
      const config = parseConfigFile(text, 'fuzz.json')
      tally.config++
      const ok = Array.isArray(config.listeners) && config.listeners.length > 0 &&
        config.listeners.every(l => typeof l.name === 'string' && Number.isInteger(l.port) && l.backends.length > 0)
      if (!ok) problems.push(`a malformed config from ${JSON.stringify(text)}`)
    } catch (err) {
      tally.usage++
      if (err.name !== 'UsageError') problems.push(`${err.name}: ${err.message} from ${JSON.stringify(text).slice(0, 200)}`)
      else if (!err.message.startsWith('fuzz.json: ') || /[\n\r]/.test(err.message)) problems.push(`not one line naming the file: ${JSON.stringify(err.message)}`)
    }
  }
  t.same(problems.slice(0, 10), [], `every document ended in a config or a one-line usage error (${problems.length} did not)`)
  t.ok(tally.config > CASES / 20, `some documents were valid configs (${tally.config})`)
  t.comment(`configs: ${tally.config}, usage errors: ${tally.usage}`)
})
