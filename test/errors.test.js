'use strict'

// One error family (lib/errors.js): every class a LilaError with a stable code and
// name, the plain form that crosses the --workers IPC, and a conflict answered 409.

const t = require('tap')
const errors = require('../lib/errors')
const { createControl } = require('../lib/admin/control')

const {
  LilaError, UsageError, RuntimeError, ControlError, ConflictError, HttpError, ProxyHeaderError, JsonError,
  toPlain, fromPlain
} = errors

t.test('every class: a LilaError with its name and code, and docs/errors.md lists the code', async t => {
  const docs = require('fs').readFileSync(require('path').join(__dirname, '..', 'docs', 'errors.md'), 'utf8')
  const made = [
    [new UsageError('u'), 'UsageError', 'LILA_USAGE'],
    [new RuntimeError('r'), 'RuntimeError', 'LILA_RUNTIME'],
    [new ControlError(404, 'c'), 'ControlError', 'LILA_CONTROL'],
    [new ConflictError('x'), 'ConflictError', 'LILA_CONFLICT'],
    [new HttpError(400, 'h'), 'HttpError', 'LILA_HTTP_PARSE'],
    [new ProxyHeaderError('p'), 'ProxyHeaderError', 'LILA_PROXY_HEADER'],
    [new JsonError('j', 2, 3), 'JsonError', 'LILA_JSON']
  ]
  for (const [err, name, code] of made) {
    t.ok(err instanceof LilaError && err instanceof Error, `${name} is a LilaError`)
    t.same([err.name, err.code], [name, code])
    t.match(docs, `\`${code}\``, `docs/errors.md names ${code}`)
  }
  t.equal(new JsonError('unexpected "}"', 2, 3).message, 'line 2, column 3: unexpected "}"')
  t.equal(new RuntimeError('r', new Error('cause')).cause.message, 'cause')
})

t.test('toPlain/fromPlain: the same class, message and status on the other side', async t => {
  const all = [
    new UsageError('u'), new RuntimeError('r'), new ControlError(409, 'c'), new ConflictError('x'), new HttpError(414, 'h'),
    new ProxyHeaderError('p')
  ]
  for (const err of all) {
    const plain = JSON.parse(JSON.stringify(toPlain(err))) // as IPC carries it
    const back = fromPlain(plain)
    t.equal(back.constructor, err.constructor, err.name)
    t.same([back.message, back.status, back.code], [err.message, err.status, err.code])
  }
  const other = fromPlain(toPlain(Object.assign(new Error('worker 1 exited'), { code: 'ECHILD' })))
  t.same([other.constructor, other.message, other.code, other.status], [Error, 'worker 1 exited', 'ECHILD', undefined],
    'an error of no known code: a plain Error')
})

t.test('control: a ConflictError from the upstream is answered 409; anything else is not', async t => {
  const message = '10.0.0.1:80 is already a backend'
  const controlThrowing = thrown => createControl({ listeners: [{ name: 'web', upstream: { addBackend: async () => { throw thrown } } }] })
  const spec = { host: '10.0.0.1', port: 80 }
  await t.rejects(controlThrowing(new ConflictError(message)).add({ spec }), { name: 'ControlError', status: 409, message })
  await t.rejects(controlThrowing(new RangeError(message)).add({ spec }), { name: 'RangeError', message })
})
