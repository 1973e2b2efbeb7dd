'use strict'

// A backend for bench/chaos.js, its own process so that it can be killed with SIGKILL
// and started again on the same port. Each answers as an application on Node would,
// with Node's own servers (the case: Node's http2 server writes an answer's END_STREAM
// a turn of its event loop after its DATA):
//
//   node chaos-backend.js h1 PORT     http: 200 "hi" (res.end)
//   node chaos-backend.js h2 PORT     http2 (h2c): 200 "hi" (res.end, no content-length)
//   node chaos-backend.js grpc PORT   @grpc/grpc-js: grpc.health.v1.Health/Check, SERVING
//
// Prints "ready" once it listens on 127.0.0.1:PORT.

const path = require('path')

const [kind, portText] = process.argv.slice(2)
const port = Number(portText)
const ready = () => process.stdout.write('ready\n')

if (kind === 'h1' || kind === 'h2') {
  const server = kind === 'h1'
    ? require('http').createServer((req, res) => res.end('hi'))
    : require('http2').createServer((req, res) => res.end('hi'))
  server.listen(port, '127.0.0.1', ready)
} else if (kind === 'grpc') {
  const grpc = require('@grpc/grpc-js')
  const loader = require('@grpc/proto-loader')
  const proto = path.join(__dirname, '..', 'test', 'fixtures', 'proto', 'health.proto')
  const definition = loader.loadSync(proto, { keepCase: true, enums: String, defaults: true })
  const { Health } = grpc.loadPackageDefinition(definition).grpc.health.v1
  const server = new grpc.Server()
  server.addService(Health.service, { Check: (call, callback) => callback(null, { status: 'SERVING' }) })
  server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), err => {
    if (err) throw err
    ready()
  })
} else {
  process.stderr.write(`chaos-backend: kind ${kind}: expected h1, h2 or grpc\n`)
  process.exit(2)
}
