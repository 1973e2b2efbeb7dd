'use strict'

// --redirect-http PORT: plain HTTP beside a TLS listener. It answers ACME HTTP-01
// validations (/.well-known/acme-challenge/TOKEN, with the key authorization the
// board holds, tls.js Challenges) and sends every other request a 308 to the same
// host, path and query on https, at the TLS listener's port (left out when it is 443).
// It serves nothing else, so Node's http server is enough: this is not a hot path.

const http = require('http')
const net = require('net')
const { listen, descriptorOf } = require('../net/bind')
const { isHostName } = require('../address')
const { challengeAnswer } = require('../tls/http01')

class RedirectListener {
  // host: where to bind (the TLS listener's); port: --redirect-http; httpsPort: where
  // the TLS listener listens; challenges: the board's.
  constructor ({ host, port, httpsPort, challenges, log }) {
    this.host = host
    this.port = port
    this.httpsPort = httpsPort
    this.challenges = challenges
    this.log = log
    this.served = { redirects: 0, challenges: 0 }
    const options = { requestTimeout: 10000, headersTimeout: 10000 }
    this.server = http.createServer(options, (req, res) => this.answer(req, res))
    this.server.on('clientError', (err, socket) => socket.destroy(err))
    this.bound = null
  }

  // `given`: a socket the process was given to listen on (bind.js), or null.
  async listen (given = null) {
    this.bound = await listen(this.server, { host: this.host, port: this.port }, given)
    return this.bound
  }

  // The listening socket's, to hand it to the next lila (cli/upgrade.js).
  get descriptor () {
    return descriptorOf(this.server)
  }

  answer (req, res) {
    const target = req.url
    const challenge = challengeAnswer(this.challenges.http, req.method, target)
    if (challenge !== null) {
      const { keyAuthorization } = challenge
      if (keyAuthorization !== undefined) {
        this.served.challenges++
        this.log.info(`ACME: answered an HTTP-01 validation from ${req.socket.remoteAddress}`)
        return send(res, 200, keyAuthorization, { 'content-type': 'application/octet-stream' })
      }
      return send(res, 404, 'no such ACME challenge\n')
    }
    const host = hostOf(req.headers.host)
    if (host === null || !target.startsWith('/')) {
      return send(res, 400, 'a request to the https redirect needs a Host and a path\n')
    }
    const port = this.httpsPort === 443 ? '' : `:${this.httpsPort}`
    this.served.redirects++
    send(res, 308, '', { location: `https://${host}${port}${target}` })
  }

  close () {
    return new Promise(resolve => {
      this.server.close(() => resolve())
      this.server.closeIdleConnections()
      setTimeout(() => this.server.closeAllConnections(), 1000).unref()
    })
  }
}

function send (res, status, body, headers = {}) {
  const length = Buffer.byteLength(body)
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': length, ...headers })
  res.end(body)
}

// The Host a client gave, without its port; null when it is not a host name or address.
function hostOf (value) {
  if (typeof value !== 'string') return null
  const match = /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/.exec(value) || /^([^:[\]]+)(?::\d{1,5})?$/.exec(value)
  if (match === null) return null
  const host = match[1]
  if (value.startsWith('[')) return net.isIPv6(host) ? `[${host}]` : null
  return isHostName(host) ? host.toLowerCase() : null
}

module.exports = { RedirectListener }
