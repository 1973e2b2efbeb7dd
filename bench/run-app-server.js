'use strict'

// The app bench/run-app.js runs under lila run and under pm2's cluster mode: a small
// HTTP server on 127.0.0.1:$PORT that answers after a few milliseconds of work, and
// shuts down as a well-behaved app does on SIGINT (pm2's signal) or SIGTERM (lila's):
// it stops listening, lets the requests it holds finish, then exits.
const http = require('http')

const server = http.createServer((req, res) => {
  req.resume()
  setTimeout(() => res.end(`pid ${process.pid}\n`), 2)
})
server.keepAliveTimeout = 65000
server.listen(Number(process.env.PORT), '127.0.0.1', () => {
  if (process.send) process.send('ready') // pm2's --wait-ready
})
const stop = () => {
  server.close(() => process.exit(0))
  server.closeIdleConnections()
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
